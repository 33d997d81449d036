"""``drkit verify``'s reads on fakes: the range per partition (the last ``max_records``, or from an offset, cut
to the log start and the end), the target read only over the syncs' target offsets, and bad input as one line
before anything is read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest
from support.fakes import World, world

from drkit.config import ClusterConfig
from drkit.core.offsets import SyncRange
from drkit.core.probe import SourceRecord
from drkit.errors import ConfigError, RefusedError
from drkit.operate.verify import VerifyRequest, verify_topic

FLOW = "A->B"
Key = tuple[str, int]


def mirrored(tmp_path: Path) -> World:
    w = world(tmp_path)
    w.a.ends.update({("orders", 0): 100, ("orders", 1): 30})
    w.a.starts[("orders", 0)] = 20  # retention took 0-19
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(0, 89, 1000, 1089))  # 90-99 not mirrored yet
    w.syncs.add(FLOW, "orders", "A.orders", 1, SyncRange(0, 29, 0, 29))
    return w


class Reads:
    """Records as a faithful mirror left them; remembers what was asked of each cluster."""

    def __init__(self, lost: frozenset[int] = frozenset()) -> None:
        self.asked: dict[str, dict[Key, tuple[int, int]]] = {}
        self.calls: list[tuple[str, dict[Key, tuple[int, int]]]] = []
        self.lost = lost  # source offsets of partition 0 whose copies are gone

    def __call__(
        self,
        cluster: ClusterConfig,
        alias: str,
        ranges: Mapping[Key, tuple[int, int]],
        timeout: float,
        origin: str | None,
    ) -> dict[Key, list[SourceRecord]]:
        self.asked[alias] = dict(ranges)
        self.calls.append((alias, dict(ranges)))
        out: dict[Key, list[SourceRecord]] = {}
        for (topic, p), (lo, hi) in ranges.items():
            if alias == "A":
                out[(topic, p)] = [SourceRecord(o, f"{p}:{o}", 0) for o in range(lo, hi)]
            else:  # the copy of o sits at 1000 + o in partition 0, at o in partition 1
                base = 1000 if p == 0 else 0
                out[(topic, p)] = [
                    SourceRecord(d, f"{p}:{d - base}", 0, d - base)
                    for d in range(lo, hi)
                    if not (p == 0 and d - base in self.lost)
                ]
        return out


def test_the_last_records_of_each_partition_are_read_where_the_syncs_place_them(tmp_path: Path) -> None:
    w, reads = mirrored(tmp_path), Reads()
    report = verify_topic(w.context, VerifyRequest(w.config.flow(FLOW), "orders", max_records=50), reads)
    assert reads.asked["A"] == {("orders", 0): (50, 100), ("orders", 1): (0, 30)}  # partition 1 holds 30 in all
    assert reads.asked["B"] == {("A.orders", 0): (1050, 1090), ("A.orders", 1): (0, 30)}
    d = report.as_dict()
    assert report.ok and (d["verified"], d["not_mirrored"]) == (40 + 30, 10)


def test_a_range_from_an_offset_is_cut_to_the_log_start_and_the_end(tmp_path: Path) -> None:
    w, reads = mirrored(tmp_path), Reads()
    request = VerifyRequest(w.config.flow(FLOW), "orders", partitions=(0,), from_offset=0, max_records=1000)
    report = verify_topic(w.context, request, reads)
    assert reads.asked["A"] == {("orders", 0): (20, 100)}
    assert report.ok and report.as_dict()["verified"] == 70


@pytest.mark.parametrize(
    "request_args, error, message",
    [
        (
            {"topic": "payments"},
            RefusedError,
            "flow A->B has mirrored no topic 'payments' (its offset-syncs name none)",
        ),
        ({"topic": "orders", "partitions": (2,)}, ConfigError, "topic 'orders' on A has partitions 0-1, not 2"),
        ({"topic": "orders", "max_records": 0}, ConfigError, "--max-records must be at least 1, not 0"),
        ({"topic": "orders", "sample": 0}, ConfigError, "--sample and --window must be at least 1, not 0 and 100"),
        (
            {"topic": "orders", "sample": 10, "from_offset": 5},
            ConfigError,
            "--sample spreads over the whole log: leave out --from-offset",
        ),
    ],
)
def test_bad_input_is_one_line_before_anything_is_read(
    tmp_path: Path, request_args: dict[str, object], error: type[Exception], message: str
) -> None:
    w, reads = mirrored(tmp_path), Reads()
    with pytest.raises(error) as raised:
        verify_topic(w.context, VerifyRequest(w.config.flow(FLOW), **request_args), reads)  # type: ignore[arg-type]
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    assert reads.asked == {}


def test_a_sample_reads_each_window_on_both_sides_and_a_seed_repeats_it(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    reads = Reads(lost=frozenset(range(20, 90)))  # every mirrored copy of partition 0's log is gone
    request = VerifyRequest(w.config.flow(FLOW), "orders", partitions=(0,), sample=30, window=10)
    report = verify_topic(w.context, request, reads)
    [p0] = report.partitions
    assert report.sample_seed is not None and len(p0.windows) == 3
    assert all(20 <= lo < hi <= 100 and hi - lo == 10 for lo, hi in p0.windows)  # inside the log (20-99)
    asked_a = [r[("orders", 0)] for alias, r in reads.calls if alias == "A"]
    asked_b = [r[("A.orders", 0)] for alias, r in reads.calls if alias == "B" and r]
    assert asked_a == list(p0.windows)  # one read per window, no more
    assert asked_b == [(lo + 1000, min(hi, 90) + 1000) for lo, hi in p0.windows if lo < 90]
    mirrored_sampled = sum(max(0, min(hi, 90) - lo) for lo, hi in p0.windows)
    d = report.as_dict()
    assert (d["records"], d["missing"], d["not_mirrored"]) == (30, mirrored_sampled, 30 - mirrored_sampled)
    assert not report.ok and mirrored_sampled >= 20  # one slot of eight (90-99) is not mirrored
    again = verify_topic(w.context, replace(request, seed=report.sample_seed), Reads())
    assert again.partitions[0].windows == p0.windows and again.ok
