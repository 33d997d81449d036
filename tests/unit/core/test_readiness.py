"""drkit.core.readiness: a group is as ready as its worst partition, translated with the syncs now; the records at
risk are the unread ones past the mirror, unknown (never 0) when a fact is missing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.checkpoints import Checkpoint, CommittedOffset, RecordedCheckpoint
from drkit.core.offsets import SyncRange
from drkit.core.readiness import GroupFacts, Readiness, readiness
from drkit.core.translate import Position

NOW = 1_000_000


def row(
    partition: int, upstream: int, position: Position = Position.UNMIRRORED, age_s: float = 1.0
) -> RecordedCheckpoint:
    c = Checkpoint("A->B", "g", "t", "A.t", partition, upstream, None, position)
    return RecordedCheckpoint(c, NOW - int(age_s * 1000))


def facts(
    rows: list[RecordedCheckpoint],
    ranges: dict[tuple[str, int], list[SyncRange]] | None = None,
    committed: dict[str, list[CommittedOffset]] | None = None,
    ends: dict[tuple[str, int], int] | None = None,
) -> GroupFacts:
    ranges = ranges or {}
    mirrored = {k: max(r.upstream_last for r in v) + 1 for k, v in ranges.items()}
    return GroupFacts(rows, NOW, 60.0, ranges, mirrored, committed, ends)


def test_the_worst_partition_decides_whatever_the_order() -> None:
    ranges = {("t", 0): [SyncRange(0, 9, 0, 9)], ("t", 1): [SyncRange(5, 9, 0, 4)]}
    rows = [row(0, 3), row(1, 2), row(0, 4, age_s=61)]
    for order in (rows, rows[::-1]):
        [g] = readiness(facts(order, ranges))
        assert g.readiness is Readiness.STALE
    [g] = readiness(facts([row(0, 3), row(1, 2)], ranges))
    assert g.readiness is Readiness.SKIPS
    [g] = readiness(facts([row(0, 3), row(2, 0)], ranges))
    assert g.readiness is Readiness.UNTRANSLATABLE


def test_nothing_to_mirror_stands_without_syncs_and_a_past_end_offset_is_exact() -> None:
    nothing = RecordedCheckpoint(Checkpoint("A->B", "g", "t", "A.t", 0, 7, 0, Position.NOTHING_TO_MIRROR), NOW)
    assert readiness(facts([nothing]))[0].readiness is Readiness.EXACT
    ranges = {("t", 0): [SyncRange(0, 9, 0, 9)]}
    assert readiness(facts([row(0, 15)], ranges))[0].readiness is Readiness.EXACT


def test_at_risk_is_unknown_when_the_source_or_one_partitions_end_is() -> None:
    ranges = {("t", 0): [SyncRange(0, 9, 0, 9)]}
    assert readiness(facts([row(0, 3)], ranges, None, {("t", 0): 20}))[0].at_risk_records is None
    assert readiness(facts([row(0, 3)], ranges, {}, None))[0].at_risk_records is None
    rows = [row(0, 3), row(1, 0)]
    assert readiness(facts(rows, ranges, {}, {("t", 0): 20}))[0].at_risk_records is None


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50), st.integers(0, 60) | st.none()),
        min_size=1,
        max_size=4,
    )
)
def test_at_risk_is_the_unread_records_past_the_mirror(parts: list[tuple[int, int, int, int | None]]) -> None:
    """Per partition (mirrored, checkpoint, extra, committed now): the source's end is past both the mirror and
    the checkpoint; the records at risk are those at or past both the mirror and the group's offset now."""
    rows, ranges, ends, committed, expected = [], {}, {}, [], 0
    for p, (mirrored, checkpoint, extra, now) in enumerate(parts):
        end = max(mirrored, checkpoint, now or 0) + extra
        rows.append(row(p, checkpoint))
        if mirrored:
            ranges[("t", p)] = [SyncRange(0, mirrored - 1, 0, mirrored - 1)]
        ends[("t", p)] = end
        if now is not None:
            committed.append(CommittedOffset("g", "t", p, now))
        expected += end - max(mirrored, checkpoint if now is None else now)
    [g] = readiness(facts(rows, ranges, {"g": committed}, ends))
    assert g.at_risk_records == expected >= 0
