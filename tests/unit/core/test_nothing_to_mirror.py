"""A partition of which nothing was mirrored: translated to the target's start only when there is nothing to mirror.

Checked by example (delete-records, never written, records really unmirrored), against a brute-force
model of the source partition, and through checkpoint planning and the failover plan.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.checkpoints import Checkpoint, CommittedOffset, FindingKind, plan_checkpoints
from drkit.core.offsets import SyncRange
from drkit.core.plan import CheckpointFact, GroupFacts, failover_plan
from drkit.core.refusals import RefusalReason
from drkit.core.translate import PartitionBounds, Position, SyncIndex, Translation, translate_unmirrored

# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("committed", "start", "end", "empty"),
    [
        (50, 50, 50, True),  # every record deleted (delete-records, retention): log start = log end = 50
        (0, 0, 0, True),  # never written; Java consumers commit 0 for an empty assigned partition
        (30, 50, 50, True),  # everything removed, records 30..49 included: nothing left to mirror
        (60, 0, 50, True),  # the group is past the end (records 0..49 exist, all before it)
        (50, 0, 50, True),  # at the end
        (49, 0, 50, False),  # record 49 exists and was not mirrored
        (0, 10, 50, False),  # records 10..49 exist
        (55, 50, 60, False),  # records 55..59 exist
        (10, 60, 50, False),  # a start read after the end proves nothing
    ],
)
def test_empty_from(committed: int, start: int, end: int, empty: bool) -> None:
    assert PartitionBounds(start, end).empty_from(committed) is empty
    t = translate_unmirrored(committed, PartitionBounds(start, end), 7)
    assert t == (Translation(7, Position.NOTHING_TO_MIRROR) if empty else Translation(None, Position.UNMIRRORED))


def test_without_bounds_or_target_start_there_is_no_answer() -> None:
    assert translate_unmirrored(0, None, 0) == Translation(None, Position.UNMIRRORED)
    assert translate_unmirrored(0, PartitionBounds(0, 0), None) == Translation(None, Position.UNMIRRORED)
    assert not Translation(3, Position.NOTHING_TO_MIRROR).provisional


@given(start=st.integers(0, 40), length=st.integers(0, 40), committed=st.integers(0, 100))
def test_nothing_to_mirror_exactly_when_no_record_is_left_to_read(start: int, length: int, committed: int) -> None:
    """Brute force: the records that exist are start..end-1; the group still has to read those >= committed."""
    end = start + length
    left = [offset for offset in range(start, end) if offset >= committed]
    t = translate_unmirrored(committed, PartitionBounds(start, end), 1000)
    assert (t.offset == 1000) is (not left)
    assert (t.position is Position.NOTHING_TO_MIRROR) is (not left)


# --------------------------------------------------------------------------- checkpoints

TOPICS = {"events": "A.events"}
# events/2 has syncs; events/0 (all deleted at 50) and events/1 (never written) have none.
INDEXES = {("events", 2): SyncIndex([SyncRange(0, 29, 0, 29)])}
BOUNDS = {
    ("events", 0): PartitionBounds(50, 50),
    ("events", 1): PartitionBounds(0, 0),
    ("events", 3): PartitionBounds(0, 20),
}
TARGET_STARTS = {("A.events", 0): 0, ("A.events", 1): 0, ("A.events", 3): 0}


def group(*items: tuple[int, int]) -> dict[str, list[CommittedOffset]]:
    return {"g": [CommittedOffset("g", "events", p, o) for p, o in items]}


def test_checkpoints_translate_partitions_with_nothing_to_mirror_to_the_target_start() -> None:
    plan = plan_checkpoints("A->B", group((0, 50), (1, 0), (2, 10)), TOPICS, INDEXES, {}, BOUNDS, TARGET_STARTS)
    assert [(c.partition, c.downstream_offset, c.position) for c in plan.current] == [
        (0, 0, Position.NOTHING_TO_MIRROR),
        (1, 0, Position.NOTHING_TO_MIRROR),
        (2, 10, Position.MIRRORED),
    ]
    assert plan.findings == []  # exact answers: nothing to report


def test_checkpoints_keep_refusing_records_that_exist_and_were_not_mirrored() -> None:
    plan = plan_checkpoints("A->B", group((3, 5)), TOPICS, INDEXES, {}, BOUNDS, TARGET_STARTS)
    [c] = plan.current
    assert (c.downstream_offset, c.position) == (None, Position.UNMIRRORED)
    assert [f.kind for f in plan.findings] == [FindingKind.PARTITION_NOT_MIRRORED]


def test_checkpoints_without_bounds_stay_unmirrored_as_before() -> None:
    plan = plan_checkpoints("A->B", group((0, 50)), TOPICS, INDEXES, {})
    assert [(c.downstream_offset, c.position) for c in plan.current] == [(None, Position.UNMIRRORED)]
    no_target = plan_checkpoints("A->B", group((0, 50)), TOPICS, INDEXES, {}, BOUNDS, {})
    assert [c.position for c in no_target.current] == [Position.UNMIRRORED]


def test_the_verdict_is_a_change_worth_a_new_row() -> None:
    before = plan_checkpoints("A->B", group((0, 50)), TOPICS, INDEXES, {}).current[0]
    after = plan_checkpoints("A->B", group((0, 50)), TOPICS, INDEXES, {before.key: before}, BOUNDS, TARGET_STARTS)
    assert [c.position for c in after.changed] == [Position.NOTHING_TO_MIRROR]
    again = plan_checkpoints(
        "A->B", group((0, 50)), TOPICS, INDEXES, {before.key: after.changed[0]}, BOUNDS, TARGET_STARTS
    )
    assert again.changed == []


# --------------------------------------------------------------------------- failover plan


def fact(partition: int, upstream: int, position: Position | None, downstream: int | None) -> CheckpointFact:
    return CheckpointFact("g", "events", "A.events", partition, upstream, 1.0, position, downstream)


def test_failover_uses_the_recorded_verdict_when_the_syncs_have_nothing() -> None:
    facts = [
        fact(0, 50, Position.NOTHING_TO_MIRROR, 0),
        fact(1, 0, Position.NOTHING_TO_MIRROR, 3),
        fact(2, 10, Position.MIRRORED, 10),
    ]
    plan = failover_plan("A->B", "B", ["g"], facts, INDEXES, {"g": GroupFacts(None, {})}, 300)
    assert plan.ok and plan.warnings == ()
    assert plan.commits() == {"g": {("A.events", 0): 0, ("A.events", 1): 3, ("A.events", 2): 10}}
    assert [m.position for m in plan.moves] == [
        Position.NOTHING_TO_MIRROR,
        Position.NOTHING_TO_MIRROR,
        Position.MIRRORED,
    ]


def test_failover_prefers_the_syncs_when_records_were_mirrored_since() -> None:
    # The checkpoint saw nothing to mirror; records arrived and were mirrored (50..59 -> 0..9): exact now.
    indexes = {("events", 0): SyncIndex([SyncRange(50, 59, 0, 9)])}
    plan = failover_plan(
        "A->B", "B", ["g"], [fact(0, 50, Position.NOTHING_TO_MIRROR, 0)], indexes, {"g": GroupFacts(None, {})}, 300
    )
    assert [(m.new, m.position) for m in plan.moves] == [(0, Position.MIRRORED)]
    past = failover_plan(
        "A->B", "B", ["g"], [fact(0, 60, Position.NOTHING_TO_MIRROR, 0)], indexes, {"g": GroupFacts(None, {})}, 300
    )
    assert [(m.new, m.position) for m in past.moves] == [(10, Position.PAST_END)]


@pytest.mark.parametrize(
    ("position", "downstream"), [(Position.UNMIRRORED, None), (None, None), (Position.NOTHING_TO_MIRROR, None)]
)
def test_failover_still_refuses_a_partition_with_unmirrored_records(
    position: Position | None, downstream: int | None
) -> None:
    plan = failover_plan(
        "A->B", "B", ["g"], [fact(3, 5, position, downstream)], INDEXES, {"g": GroupFacts(None, {})}, 300
    )
    assert [r.reason for r in plan.refusals] == [RefusalReason.UNTRANSLATABLE]
    assert plan.commits() == {}


def test_a_checkpoint_row_carries_its_verdict() -> None:
    c = Checkpoint("A->B", "g", "events", "A.events", 0, 50, 0, Position.NOTHING_TO_MIRROR)
    assert Position(c.position.value) is Position.NOTHING_TO_MIRROR  # stored as its value, read back the same
