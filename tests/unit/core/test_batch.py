"""What a mirror batch copies: Spark's plan, corrected for new incarnations, holds and lost offsets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.batch import (
    EARLIEST,
    LostRange,
    MirrorState,
    ShortRead,
    hold_short_reads,
    plan_batch,
    renewed_topics,
    short_read_message,
    short_reads,
    state_before,
)


def test_spark_plan_is_kept_and_new_partitions_start_at_their_first_record() -> None:
    plan = plan_batch({"t": {"0": 10, "1": 5}}, {"t": {"0": 15, "1": 5, "2": 3}, "u": {"0": 0}}, {})
    assert plan.ranges == {("t", 0): (10, 15), ("t", 2): (EARLIEST, 3)}  # u/0 is empty: nothing to read
    assert plan.held == {} and plan.lost == ()


def test_a_renewed_topic_is_copied_from_its_first_record_whatever_spark_planned() -> None:
    # Deleted and created again within one trigger: Spark's start belongs to the old incarnation.
    plan = plan_batch({"t": {"0": 100}}, {"t": {"0": 250}}, {}, renewed=frozenset({"t"}))
    assert plan.ranges == {("t", 0): (EARLIEST, 250)}
    shorter = plan_batch({"t": {"0": 100}}, {"t": {"0": 40}}, {}, renewed=frozenset({"t"}))
    assert shorter.ranges == {("t", 0): (EARLIEST, 40)} and shorter.lost == ()


def test_a_partition_that_went_back_in_one_incarnation_is_reported_and_nothing_is_copied_twice() -> None:
    plan = plan_batch({"t": {"0": 100}}, {"t": {"0": 40}}, {})
    assert plan.ranges == {} and plan.lost == (LostRange("t", 0, 100, 40),)


def test_a_refused_topic_is_held_from_the_first_offset_not_copied_and_the_others_flow() -> None:
    refused = frozenset({"t"})
    first = plan_batch({"t": {"0": 10}, "u": {"0": 1}}, {"t": {"0": 20}, "u": {"0": 4}}, {}, refused)
    assert first.ranges == {("u", 0): (1, 4)} and first.held == {("t", 0): 10}
    # Spark moves on; the hold does not.
    second = plan_batch({"t": {"0": 20}}, {"t": {"0": 30, "1": 2}}, first.held, refused)
    assert second.ranges == {} and second.held == {("t", 0): 10, ("t", 1): EARLIEST}
    # The refusal is lifted: the owed records are copied first, in order, with the new ones.
    lifted = plan_batch({"t": {"0": 30, "1": 2}}, {"t": {"0": 31, "1": 2}}, second.held)
    assert lifted.ranges == {("t", 0): (10, 31), ("t", 1): (EARLIEST, 2)} and lifted.held == {}


def test_holds_of_a_deleted_or_renewed_topic_are_dropped() -> None:
    assert plan_batch({"u": {"0": 1}}, {"u": {"0": 1}}, {("t", 0): 10}).held == {}
    renewed = plan_batch({"t": {"0": 50}}, {"t": {"0": 5}}, {("t", 0): 10}, renewed=frozenset({"t"}))
    assert renewed.ranges == {("t", 0): (EARLIEST, 5)} and renewed.held == {}


def test_renewed_topics_need_a_known_and_a_different_id() -> None:
    assert renewed_topics({"t": "a", "u": "b"}, {"t": "a", "u": "c", "v": "d", "w": ""}) == {"u"}


def test_the_state_a_batch_starts_from_ignores_attempts_spark_did_not_commit() -> None:
    states = [MirrorState("s", 3, {"t": "a"}), MirrorState("s", 5, {"t": "b"}), MirrorState("old", 9)]
    assert state_before(states, "s", 5).batch_id == 3  # batch 5 is being decided again
    assert state_before(states, "s", 6).topic_ids == {"t": "b"}
    assert state_before(states, "new", 0) == MirrorState("new", -1)


offsets = st.integers(min_value=0, max_value=1_000)


@given(
    st.dictionaries(st.integers(0, 3), st.tuples(offsets, offsets), min_size=1),
    st.dictionaries(st.integers(0, 3), offsets),
    st.booleans(),
)
def test_every_record_is_copied_once_in_order_across_a_refusal(
    bounds: dict[int, tuple[int, int]], holds: dict[int, int], _: bool
) -> None:
    """Refused for one batch, then lifted: per partition the copies of the two batches are exactly Spark's
    offsets from the first batch's start to the second's end, once each."""
    start = {"t": {str(p): min(a, b) for p, (a, b) in bounds.items()}}
    middle = {"t": {str(p): max(a, b) for p, (a, b) in bounds.items()}}
    end = {"t": {str(p): max(a, b) + 7 for p, (a, b) in bounds.items()}}
    refused = plan_batch(start, middle, {}, frozenset({"t"}))
    assert refused.ranges == {}
    lifted = plan_batch(middle, end, refused.held)
    for p in bounds:
        since, until = lifted.ranges[("t", p)]
        assert (since, until) == (start["t"][str(p)], end["t"][str(p)])


def test_a_read_short_of_the_planned_end_is_named_and_holes_at_the_end_are_not() -> None:
    ranges = {("t", 0): (0, 10), ("t", 1): (5, 10), ("u", 0): (EARLIEST, 4), ("w", 0): (3, 6)}
    # t/0 reached past its end (a marker), t/1 stopped at 7 (truncated), u/0 exactly, w/0 never answered.
    reached = {("t", 0): 12, ("t", 1): 7, ("u", 0): 4}
    assert short_reads(ranges, reached) == (ShortRead("t", 1, 10, 7), ShortRead("w", 0, 6, 3))
    line = short_read_message("A->B", ShortRead("t", 1, 10, 7))
    assert "A->B" in line and "t/1" in line and "offset 7" in line and "offset 10" in line and "\n" not in line


def test_short_partitions_that_go_on_are_held_from_where_their_read_stopped() -> None:
    held = hold_short_reads({("r", 0): 3}, [ShortRead("t", 1, 10, 7)])
    assert held == {("r", 0): 3, ("t", 1): 7}
    # The next batch copies t/1 from 7, though Spark starts it at 10: records written again at 7..9 are not skipped.
    plan = plan_batch({"t": {"1": 10}}, {"t": {"1": 12}}, held)
    assert plan.ranges == {("t", 1): (7, 12)} and plan.held == {}


@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 3)),
        st.tuples(st.integers(0, 50), st.integers(1, 50), st.integers(-5, 60)),
        max_size=8,
    )
)
def test_a_partition_is_short_exactly_when_its_position_is_below_the_planned_end(
    cases: dict[tuple[str, int], tuple[int, int, int]],
) -> None:
    ranges = {k: (since, since + length) for k, (since, length, _) in cases.items()}
    reached = {k: since + delta for k, (since, _, delta) in cases.items()}
    shorts = short_reads(ranges, reached)
    assert {(s.topic, s.partition) for s in shorts} == {k for k, (_, until) in ranges.items() if reached[k] < until}
    assert all(
        s.reached == reached[(s.topic, s.partition)] and s.until == ranges[(s.topic, s.partition)][1] for s in shorts
    )
    # Held from where the read stopped, the next batch of a short partition starts there, whatever Spark's start.
    held = hold_short_reads({}, shorts)
    for s in shorts:
        nxt = plan_batch({s.topic: {str(s.partition): s.until}}, {s.topic: {str(s.partition): s.until + 10}}, held)
        assert nxt.ranges[(s.topic, s.partition)][0] == s.reached
