"""Copier: the copy of a batch's records, with a fake producer instead of a target cluster (no Spark, no
broker). Records are fed as Arrow batches of the source's columns, one run of a partition at a time, as a
reader hands them on (``deliver_batches`` below)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import confluent_kafka
import pyarrow as pa
import pytest
from support.fakes import FakeProducer

from drkit.core.origin import origin_of
from drkit.mirror import deliver, producers
from drkit.mirror.chunk import RecordChunk
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.deliver import Copier
from drkit.mirror.producers import FAILURE_MARKER, DeliveryFailed
from drkit.store import offset_syncs

TOPIC_MAP = {"orders": "A.orders", "users": "A.users"}
CONF = {"bootstrap.servers": "target:9092"}

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
INPUT_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("ts", pa.int64()),
        ("headers", HEADERS_TYPE),
    ]
)


INPUT_COLUMNS = ("topic", "partition", "offset", "key", "value", "ts", "headers")


def _runs(topics: list[str], partitions: list[int]) -> list[tuple[int, int]]:
    """[start, end) index runs of equal (topic, partition): one run for a task's usual single partition."""
    n = len(topics)
    if n and len(set(partitions)) == 1 and len(set(topics)) == 1:
        return [(0, n)]
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, n):
        if topics[i] != topics[i - 1] or partitions[i] != partitions[i - 1]:
            runs.append((start, i))
            start = i
    if n:
        runs.append((start, n))
    return runs


def deliver_batches(
    producer_conf: dict[str, Any],
    topic_map: dict[str, str],
    source_alias: str,
    target_alias: str = "",
    flush_timeout: float = 300.0,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A copy fed with Arrow batches of records; its ranges as one batch of COPY_SCHEMA."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        copier = Copier(producer_conf, topic_map, source_alias, target_alias)
        try:
            batches = iter(batches)
            while not copier.failures:
                batch = next(batches, None)
                if batch is None:
                    break
                if not batch.num_rows:
                    continue
                topics = batch.column("topic").to_pylist()
                partitions = batch.column("partition").to_pylist()
                offsets = batch.column("offset").to_pylist()
                keys = batch.column("key").to_pylist()
                values = batch.column("value").to_pylist()
                stamps = batch.column("ts").to_pylist()
                header_col = batch.column("headers")
                headers = (
                    [[(h["key"], h["value"]) for h in hs] if hs else None for hs in header_col.to_pylist()]
                    if header_col.null_count < batch.num_rows
                    else None
                )
                for start, end in _runs(topics, partitions):
                    copier.copy(
                        RecordChunk(
                            topics[start],
                            partitions[start],
                            offsets[start:end],
                            keys[start:end],
                            values[start:end],
                            stamps[start:end],
                            headers[start:end] if headers is not None else None,
                        )
                    )
            copied = copier.finish(flush_timeout)
        except BaseException:
            copier.abort()
            raise
        out = copied.cast(pa.schema([f.with_nullable(True) for f in COPY_SCHEMA]))
        yield from out.to_batches() or [pa.RecordBatch.from_pylist([], schema=out.schema)]

    return run


Record = tuple[str, int, int, bytes | None, bytes | None]  # topic, partition, offset, key, value


def batch(records: list[Record], headers: list[list[dict[str, Any]] | None] | None = None) -> pa.RecordBatch:
    """Records as columns (INPUT_COLUMNS, ts = offset * 10)."""
    columns = {
        "topic": [r[0] for r in records],
        "partition": [r[1] for r in records],
        "offset": [r[2] for r in records],
        "key": [r[3] for r in records],
        "value": [r[4] for r in records],
        "ts": [r[2] * 10 for r in records],
        "headers": headers or [None] * len(records),
    }
    assert tuple(columns) == INPUT_COLUMNS
    return pa.RecordBatch.from_pydict(columns, schema=INPUT_SCHEMA)


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Callable[[FakeProducer], list[dict[str, Any]]]:
    """Make ``confluent_kafka.Producer(conf)`` build the given fake; returns the confs it was built with."""
    monkeypatch.setattr(producers, "_PRODUCERS", {})
    built: list[dict[str, Any]] = []

    def use(fake: FakeProducer) -> list[dict[str, Any]]:
        def factory(conf: dict[str, Any]) -> FakeProducer:
            built.append(conf)
            return fake

        monkeypatch.setattr(confluent_kafka, "Producer", factory)
        return built

    return use


def run(batches: list[pa.RecordBatch], topic_map: dict[str, str] = TOPIC_MAP) -> list[dict[str, Any]]:
    out = list(deliver_batches(CONF, topic_map, "A")(iter(batches)))
    assert len(out) == 1
    assert out[0].schema.names == COPY_SCHEMA.names
    return list(out[0].to_pylist())


def ranges(rows: list[dict[str, Any]]) -> dict[tuple[str, int], list[tuple[int, int, int, int]]]:
    out: dict[tuple[str, int], list[tuple[int, int, int, int]]] = defaultdict(list)
    for r in rows:
        assert r["record_count"] == r["upstream_last"] - r["upstream_first"] + 1
        assert r["target_topic"] == TOPIC_MAP[r["source_topic"]]
        out[(r["source_topic"], r["partition"])].append(
            (r["upstream_first"], r["upstream_last"], r["downstream_first"], r["downstream_last"])
        )
    return dict(out)


def contiguous(topic: str, partition: int, offsets: Iterable[int], size: int = 3) -> list[Record]:
    return [(topic, partition, o, b"k", b"v" * size) for o in offsets]


# ------------------------------------------------------------------------------ schema


def test_task_rows_are_the_range_columns_of_offset_syncs_plus_bytes_and_newest_timestamp() -> None:
    ranges = offset_syncs.RANGE_SCHEMA
    assert COPY_SCHEMA.names == [*ranges.names, "bytes", "max_timestamp"]
    assert all(COPY_SCHEMA.field(n) == ranges.field(n) == offset_syncs.SPEC.schema.field(n) for n in ranges.names)


# ------------------------------------------------------------------------------ delivery


def test_contiguous_delivery_is_one_range_per_partition(install: Any) -> None:
    fake = FakeProducer()
    install(fake)
    records = (
        contiguous("orders", 0, range(0, 5))
        + contiguous("orders", 1, range(10, 13), size=7)
        + contiguous("users", 0, range(3, 4))
    )
    rows = run([batch(records[:4]), batch(records[4:])])

    assert ranges(rows) == {
        ("orders", 0): [(0, 4, 0, 4)],
        ("orders", 1): [(10, 12, 0, 2)],
        ("users", 0): [(3, 3, 0, 0)],
    }
    # bytes: key + value of every record of the partition
    assert {(r["source_topic"], r["partition"]): r["bytes"] for r in rows} == {
        ("orders", 0): 5 * (1 + 3),
        ("orders", 1): 3 * (1 + 7),
        ("users", 0): 1 + 3,
    }
    assert fake.flushes == [300.0]


def test_upstream_gap_starts_a_new_range(install: Any) -> None:
    install(FakeProducer())
    rows = run([batch(contiguous("orders", 0, [0, 1, 5, 6]))])  # 2..4 compacted away

    assert ranges(rows) == {("orders", 0): [(0, 1, 0, 1), (5, 6, 2, 3)]}
    assert [r["bytes"] for r in rows] == [4 * 4, 0]  # the partition's bytes are on its first range


def test_downstream_gap_starts_a_new_range(install: Any) -> None:
    install(FakeProducer(skip={("A.orders", 2): {2, 3}}))  # e.g. a transaction marker on the target
    rows = run([batch(contiguous("orders", 2, range(100, 105)))])

    assert ranges(rows) == {("orders", 2): [(100, 101, 0, 1), (102, 104, 4, 6)]}


def test_gaps_on_both_sides(install: Any) -> None:
    install(FakeProducer(skip={("A.orders", 0): {1}}))
    rows = run([batch(contiguous("orders", 0, [0, 1, 2, 7, 8]))])

    assert ranges(rows) == {("orders", 0): [(0, 0, 0, 0), (1, 2, 2, 3), (7, 8, 4, 5)]}


def test_records_go_in_source_order_to_the_same_partition_with_key_value_timestamp(install: Any) -> None:
    fake = FakeProducer()
    install(fake)
    records: list[Record] = [
        ("orders", 3, 40, b"a", b"1"),
        ("users", 1, 7, None, b"2"),
        ("orders", 3, 41, b"b", None),
        ("orders", 0, 9, b"c", b"3"),
        ("orders", 3, 42, b"d", b"4"),
    ]
    run([batch(records[:2]), batch(records[2:])])

    assert [(p["topic"], p["partition"], p["key"], p["value"], p["timestamp"]) for p in fake.produced] == [
        ("A.orders", 3, b"a", b"1", 400),
        ("A.users", 1, None, b"2", 70),
        ("A.orders", 3, b"b", None, 410),
        ("A.orders", 0, b"c", b"3", 90),
        ("A.orders", 3, b"d", b"4", 420),
    ]


def test_headers_are_passed_through_and_every_record_names_its_origin_last(install: Any) -> None:
    fake = FakeProducer()
    install(fake)
    headers: list[list[dict[str, Any]] | None] = [
        [{"key": "trace", "value": b"abc"}, {"key": "trace", "value": None}, {"key": "type", "value": b"x"}],
        None,
        [],
    ]
    run([batch(contiguous("orders", 0, range(40, 43)), headers)])

    assert [p["headers"] for p in fake.produced] == [
        [("trace", b"abc"), ("trace", None), ("type", b"x"), ("drkit.origin", b"A:40")],
        [("drkit.origin", b"A:41")],
        [("drkit.origin", b"A:42")],
    ]
    assert [origin_of(p["headers"], "A") for p in fake.produced] == [40, 41, 42]


def test_full_local_queue_is_polled_and_retried(install: Any) -> None:
    fake = FakeProducer(buffer_full=2)
    install(fake)
    rows = run([batch(contiguous("orders", 0, range(3)))])

    assert ranges(rows) == {("orders", 0): [(0, 2, 0, 2)]}
    assert len(fake.produced) == 3


def test_empty_input_gives_no_ranges(install: Any) -> None:
    install(FakeProducer())
    assert run([batch([])]) == []


def test_producer_is_kept_between_batches(install: Any) -> None:
    built = install(FakeProducer())
    run([batch(contiguous("orders", 0, range(2)))])
    run([batch(contiguous("orders", 0, range(2, 4)))])

    assert [{k: v for k, v in c.items() if k != "logger"} for c in built] == [CONF]
    assert built[0]["logger"].name.startswith("drkit.kafka.")  # librdkafka's lines: Python logging, masked
    assert len(producers._PRODUCERS) == 1


# ------------------------------------------------------------------------------ failures


def test_topic_not_selected_by_the_flow_fails(install: Any) -> None:
    fake = FakeProducer()
    install(fake)
    records = contiguous("orders", 0, range(2)) + contiguous("payments", 0, range(1))

    with pytest.raises(DeliveryFailed) as info:
        run([batch(records)])

    assert str(info.value) == f"{FAILURE_MARKER}topic payments is not selected by this flow"
    assert len(fake.produced) == 2
    assert producers._PRODUCERS == {}


def test_delivery_error_fails_the_task_and_drops_the_producer(install: Any) -> None:
    fake = FakeProducer(fail={b"too-big"})
    built = install(fake)
    records: list[Record] = [("orders", 1, 5, b"k", b"ok"), ("orders", 1, 6, b"k", b"too-big")]
    records += contiguous("orders", 1, range(7, 10))

    with pytest.raises(DeliveryFailed) as info:
        run([batch(records)])

    assert str(info.value) == (
        f"{FAILURE_MARKER}record orders/1@6 could not be delivered to A.orders/1: "
        "MSG_SIZE_TOO_LARGE: Broker: Message size too large"
    )
    # the failure is seen at the next poll (every POLL_EVERY records, and at the end): nothing more is
    # produced after it
    assert [p["value"] for p in fake.produced] == [b"ok", b"too-big", b"v" * 3, b"v" * 3, b"v" * 3]
    assert producers._PRODUCERS == {}

    # the retry builds a fresh producer
    install(FakeProducer())
    rows = run([batch(records[:1])])
    assert ranges(rows) == {("orders", 1): [(5, 5, 0, 0)]}
    assert [{k: v for k, v in c.items() if k != "logger"} for c in built] == [CONF, CONF]


def test_unacknowledged_records_fail_the_task(install: Any) -> None:
    class Stuck(FakeProducer):
        def poll(self, timeout: float) -> int:
            return 0

        def flush(self, timeout: float) -> int:
            self.flushes.append(timeout)
            return len(self.pending)

    fake = Stuck()
    install(fake)
    with pytest.raises(DeliveryFailed) as info:
        run([batch(contiguous("orders", 0, range(2)))])
    assert str(info.value) == f"{FAILURE_MARKER}2 records were not acknowledged by the target within 300.0s"
    assert producers._PRODUCERS == {}


def _batches_then_error(records: list[Record]) -> Iterator[pa.RecordBatch]:
    yield batch(records)
    raise RuntimeError("the source read failed")


def test_any_other_error_drops_the_producer(install: Any) -> None:
    install(FakeProducer())
    with pytest.raises(RuntimeError, match="the source read failed"):
        list(deliver_batches(CONF, TOPIC_MAP, "A")(_batches_then_error(contiguous("orders", 0, range(2)))))
    assert producers._PRODUCERS == {}


def test_a_failure_stops_producing_at_the_next_poll(install: Any) -> None:
    fake = FakeProducer(fail={b"bad"})
    install(fake)
    records: list[Record] = [("orders", 0, 0, b"k", b"bad"), *contiguous("orders", 0, range(1, 200))]

    with pytest.raises(DeliveryFailed, match="orders/0@0 could not be delivered"):
        run([batch(records)])
    assert len(fake.produced) == deliver.POLL_EVERY


def test_delivery_reports_out_of_produce_order_fail_the_task(install: Any) -> None:
    class Reordering(FakeProducer):
        def _report(self) -> int:
            self.pending.reverse()
            return super()._report()

    install(Reordering())
    with pytest.raises(DeliveryFailed, match=r"delivery reports of A.orders/0 do not match"):
        run([batch(contiguous("orders", 0, range(5)))])
    assert producers._PRODUCERS == {}


def test_newest_source_timestamp_per_partition(install: Any) -> None:
    install(FakeProducer())
    rows = run([batch(contiguous("orders", 0, [0, 1, 5, 6]) + contiguous("users", 1, [3]))])
    assert [(r["source_topic"], r["max_timestamp"]) for r in rows] == [("orders", 60), ("orders", 0), ("users", 30)]


def test_records_that_were_on_the_target_before_are_never_copied_back(install: Any) -> None:
    """Flows both ways with the identity policy: a record copied from B (its origin header names B, on any
    hop) is not copied back to B; the records around it are, and the syncs skip it like a compaction hole."""
    fake = FakeProducer()
    install(fake)
    headers: list[list[dict[str, Any]] | None] = [
        None,
        [{"key": "drkit.origin", "value": b"B:7"}],  # came from B
        [{"key": "drkit.origin", "value": b"C:1"}, {"key": "drkit.origin", "value": b"B:9"}],  # via B, 2 hops
        [{"key": "drkit.origin", "value": b"BB:3"}],  # another cluster whose alias starts with B
        [{"key": "trace", "value": b"B:1"}],  # not an origin header
    ]
    out = list(deliver_batches(CONF, TOPIC_MAP, "A", "B")(iter([batch(contiguous("orders", 0, range(5)), headers)])))
    rows = out[0].to_pylist()
    assert [origin_of(p["headers"], "A") for p in fake.produced] == [0, 3, 4]
    assert ranges(rows) == {("orders", 0): [(0, 0, 0, 0), (3, 4, 1, 2)]}
    everything = list(deliver_batches(CONF, TOPIC_MAP, "A")(iter([batch(contiguous("orders", 0, range(5)), headers)])))
    assert sum(r["record_count"] for r in everything[0].to_pylist()) == 5  # no target alias: nothing skipped


def test_a_partition_just_added_to_the_target_is_looked_up_not_a_failure(install: Any) -> None:
    """The mirror grew the target topic a moment ago: the cached producer learns the new partition and the
    copy goes on (librdkafka's own metadata refresh comes every 5 minutes)."""
    fake = FakeProducer()
    fake.unknown = {("A.orders", 5)}
    install(fake)
    rows = run([batch(contiguous("orders", 5, range(3)))])
    assert fake.lookups == ["A.orders"] and ranges(rows) == {("orders", 5): [(0, 2, 0, 2)]}


# ------------------------------------------------------------------------------ the lease's gate and epoch


def chunk(offsets: list[int]) -> RecordChunk:
    return RecordChunk("orders", 0, offsets, [b"k"] * len(offsets), [b"v"] * len(offsets), offsets, None)


def test_every_copy_carries_its_holders_epoch_after_its_origin(install: Any) -> None:
    fake = FakeProducer()
    install(fake)
    copier = Copier(CONF, TOPIC_MAP, "A", "B", epoch=7)
    copier.copy(chunk([0, 1]))
    copier.finish(5.0)
    assert [p["headers"] for p in fake.produced] == [
        [("drkit.origin", b"A:0"), ("drkit.epoch", b"7")],
        [("drkit.origin", b"A:1"), ("drkit.epoch", b"7")],
    ]


def test_a_copier_whose_lease_refuses_produces_nothing_more_and_fails_the_batch(install: Any) -> None:
    fake = FakeProducer()
    install(fake)
    refusal: list[str] = []
    copier = Copier(CONF, TOPIC_MAP, "A", "B", epoch=3, gate=lambda: refusal[0] if refusal else None)
    copier.copy(chunk([0, 1]))
    refusal.append("flow A->B: the lease (epoch 3) lapsed")
    copier.copy(chunk([2, 3]))
    assert len(fake.produced) == 2  # the second chunk was not produced
    with pytest.raises(DeliveryFailed, match=r"the lease \(epoch 3\) lapsed"):
        copier.finish(5.0)
