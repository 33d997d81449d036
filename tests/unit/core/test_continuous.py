"""The continuous copy's decisions: which lanes run ahead of the batches, when a batch may take them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.batch import EARLIEST
from drkit.core.continuous import CopyMode, Split, copy_mode, covered, frontier, lane_changes, split_stopped


def test_continuous_for_a_running_mirror_in_the_driver_or_the_cluster_s_copy_tasks() -> None:
    assert copy_mode(True, True, False, 1_000_000) is CopyMode.CONTINUOUS
    assert copy_mode(False, True, False, 1_000_000) is CopyMode.CONTINUOUS  # a cluster: long-lived copy tasks
    assert copy_mode(False, True, False, 0) is CopyMode.CONTINUOUS  # the driver's limit does not matter there
    assert copy_mode(False, True, True, 1_000_000) is CopyMode.PER_BATCH  # --once, on a cluster too
    assert copy_mode(False, False, False, 1_000_000) is CopyMode.PER_BATCH
    assert copy_mode(True, True, True, 1_000_000) is CopyMode.PER_BATCH  # --once: no copies past the last batch
    assert copy_mode(True, False, False, 1_000_000) is CopyMode.PER_BATCH  # the flow asks for batches
    assert copy_mode(True, True, False, 0) is CopyMode.PER_BATCH  # driver_copy_max_records = 0: always tasks


def test_a_lane_that_runs_on_from_the_last_batch_is_kept() -> None:
    changes = lane_changes({("t", 0): 10}, {("t", 0): (10, 20)}, {("t", 0): 20}, {"t"})
    assert not changes and changes.start == {} and changes.drop == frozenset()


def test_new_partitions_held_and_renewed_ones_start_where_the_plan_says() -> None:
    bases = {("t", 0): 10, ("t", 1): 40}
    ranges = {("t", 0): (7, 20), ("t", 1): (40, 50), ("t", 2): (EARLIEST, 3)}  # t/0 held at 7, t/2 new
    changes = lane_changes(bases, ranges, {("t", 0): 20, ("t", 1): 50, ("t", 2): 3}, {"t"})
    assert changes.start == {("t", 0): 7, ("t", 2): EARLIEST}
    assert changes.drop == frozenset()


def test_an_idle_lane_stays_while_nothing_of_it_is_owed_and_its_topic_is_copied() -> None:
    bases = {("t", 0): 10, ("t", 1): 5, ("r", 0): 3}
    # t/0 idle at its end; t/1's end moved without the batch planning it (held elsewhere): dropped; r refused.
    changes = lane_changes(bases, {}, {("t", 0): 10, ("t", 1): 9, ("r", 0): 3}, {"t"})
    assert changes.start == {}
    assert changes.drop == {("t", 1), ("r", 0)}


def test_a_lane_whose_partition_is_gone_is_dropped() -> None:
    assert lane_changes({("t", 0): 10}, {}, {}, {"t"}).drop == {("t", 0)}


def test_a_batch_takes_a_lane_only_when_it_holds_the_whole_range() -> None:
    assert covered(10, 20, 10, 20)
    assert covered(10, 25, 10, 20)  # ran ahead: the rest is the next batch's
    assert not covered(10, 19, 10, 20)  # a record below until not acknowledged yet
    assert not covered(12, 30, 10, 20)  # started after since: records 10 and 11 are not its copies
    assert covered(EARLIEST, 3, EARLIEST, 3)


def test_the_frontier_is_the_oldest_copy_in_flight_else_the_read_position() -> None:
    assert frontier(30, None) == 30
    assert frontier(30, 25) == 25
    assert frontier(30, 30) == 30


partition = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3))


@given(
    st.dictionaries(partition, st.integers(0, 50), max_size=8),
    st.dictionaries(partition, st.tuples(st.integers(0, 50), st.integers(1, 30)), max_size=8),
    st.dictionaries(partition, st.integers(0, 80), max_size=8),
    st.sets(st.sampled_from(["a", "b", "c"])),
)
def test_after_the_changes_the_lanes_are_exactly_what_the_plan_allows(
    bases: dict[tuple[str, int], int],
    planned: dict[tuple[str, int], tuple[int, int]],
    end: dict[tuple[str, int], int],
    topics: set[str],
) -> None:
    ranges = {key: (since, since + length) for key, (since, length) in planned.items() if key[0] in topics}
    changes = lane_changes(bases, ranges, end, topics)
    lanes = {k: v for k, v in bases.items() if k not in changes.drop and k not in changes.start}
    lanes.update(changes.start)
    for key, (since, _) in ranges.items():
        assert lanes[key] == since  # every planned partition runs from the plan's start
    for key, base in lanes.items():
        assert key[0] in topics  # never a topic the flow does not copy
        assert key in ranges or end.get(key) == base  # an unplanned lane owes nothing
    assert not (changes.drop & set(changes.start))


def test_a_stopping_copier_gives_what_it_acknowledged_and_the_batch_copies_the_rest() -> None:
    assert split_stopped(10, 30, 10, 20) == Split(20, None)  # all of it, and more for the next batch
    assert split_stopped(10, 15, 10, 20) == Split(15, (15, 20))
    assert split_stopped(None, -1, 10, 20) == Split(None, (10, 20))  # no lane
    assert split_stopped(12, 30, 10, 20) == Split(None, (10, 20))  # a lane that does not start at since
    assert split_stopped(EARLIEST, EARLIEST, EARLIEST, 5) == Split(None, (EARLIEST, 5))  # read nothing yet


@given(st.integers(0, 100), st.integers(0, 200), st.integers(1, 100))
def test_a_stopping_split_covers_the_range_once(since: int, ahead: int, length: int) -> None:
    until = since + length
    split = split_stopped(since, since + ahead, since, until)
    taken = range(since, split.taken_below or since)
    rest = range(*split.rest) if split.rest else range(0)
    assert set(taken) | set(rest) == set(range(since, until)) and not set(taken) & set(rest)
