"""The latency probe: off, the copier's factories are the same objects; on, every copy's report still reaches
its lane, and each copy and read leaves one row of its times in the files."""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

from drkit.mirror.latency_probe import COPY_FIELDS, READ_FIELDS, probed


class Msg:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 2, 1_700_000_000_123


class FakeProducer:
    def __init__(self) -> None:
        self.reports: list[Any] = []
        self.offset = 40

    def produce(self, topic: str, value: Any, key: Any, partition: int, on_delivery: Any, **kw: Any) -> None:
        self.reports.append((on_delivery, Msg(self.offset)))
        self.offset += 1

    def poll(self, timeout: float) -> int:
        served = 0
        for callback, msg in self.reports:
            callback(None, msg)
            served += 1
        self.reports.clear()
        return served


class FakeConsumer:
    def consume(self, n: int, timeout: float) -> list[str]:
        return ["a", "b"]

    def assign(self, partitions: list[Any]) -> str:
        return "assigned"


def read(path: Path, fields: int) -> list[list[float]]:
    data = array("d")
    data.frombytes(path.read_bytes())
    return [list(data[i : i + fields]) for i in range(0, len(data), fields)]


def test_off_returns_the_same_factories() -> None:
    def consumer() -> Any:
        return None

    def producer(conf: dict[str, Any], alias: str) -> Any:
        return None

    assert probed(consumer, producer, "") == (consumer, producer)


def test_on_every_report_reaches_its_lane_and_leaves_a_row(tmp_path: Path) -> None:
    path = tmp_path / "probe.bin"
    fake = FakeProducer()
    new_consumer, new_producer = probed(FakeConsumer, lambda conf, alias: fake, str(path))
    consumer, producer = new_consumer(), new_producer({}, "B")
    assert consumer.assign([]) == "assigned"  # everything else is the client's own
    assert consumer.consume(500, 0.002) == ["a", "b"]
    lane: list[int] = []
    for offset in range(3):
        producer.produce(
            "t", b"v", None, 7, lambda err, msg: lane.append(msg.offset()), timestamp=1_700_000_000_000 + offset
        )
    assert producer.poll(0) == 3
    assert lane == [40, 41, 42]
    producer._copies.write()  # what the probe's thread does every half second
    consumer._reads.write()
    copies = read(path, COPY_FIELDS)
    assert [(r[0], r[1], r[5], r[6]) for r in copies] == [
        (7.0, 1_700_000_000_000.0 + i, 40.0 + i, 1_700_000_000_123.0) for i in range(3)
    ]
    assert all(r[2] <= r[3] <= r[4] for r in copies)  # read, produce, report in that order
    ((called, returned, n),) = read(Path(f"{path}.reads"), READ_FIELDS)
    assert called <= returned == copies[0][2] and n == 2
