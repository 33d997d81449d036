"""Which copy task copies which partition: one live owner each, lanes moved only when they must."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.copy_shards import assign, split

partitions = st.sets(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 15)), max_size=24)
tasks = st.sets(st.integers(0, 5), max_size=4)


@given(
    partitions, st.dictionaries(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 15)), st.integers(0, 5)), tasks
)
def test_every_partition_has_one_live_owner_and_the_load_is_even(
    wanted: set[tuple[str, int]], owners: dict[tuple[str, int], int], live: set[int]
) -> None:
    result = assign(owners, wanted, live)
    if not live:
        assert result == {}
        return
    assert set(result) == wanted and set(result.values()) <= live
    load = [sum(1 for t in result.values() if t == task) for task in live]
    assert max(load) - min(load) <= 1


@given(partitions, tasks, st.integers(0, 5))
def test_a_lane_stays_with_its_owner_while_it_lives_and_the_load_is_even(
    wanted: set[tuple[str, int]], live: set[int], lost: int
) -> None:
    before = assign({}, wanted, live)
    after = assign(before, wanted, live - {lost})
    moved = {key for key in wanted if before.get(key) != after.get(key)}
    # Exactly the lost task's partitions move (to the others: the load stays even without moving any other).
    assert moved == {key for key, task in before.items() if task == lost}
    assert assign(after, wanted, live - {lost}) == after  # stable: asking again moves nothing


def test_a_task_that_comes_back_takes_over_only_what_evens_the_load() -> None:
    keys = {("t", p) for p in range(6)}
    one = assign({}, keys, {0})
    assert set(one.values()) == {0}
    both = assign(one, keys, {0, 1})
    assert sorted(both.values()) == [0, 0, 0, 1, 1, 1]
    assert sum(1 for key in keys if one[key] != both[key]) == 3  # no more than evens it out


def test_each_owner_gets_its_ranges_and_only_its_partitions_ends() -> None:
    owners = {("t", 0): 0, ("t", 1): 1, ("t", 2): 1}
    parts = split({("t", 0): (0, 5), ("t", 1): (3, 4)}, {("t", 0): 5, ("t", 1): 4, ("t", 2): 9, ("u", 0): 1}, owners)
    assert parts == {0: ({("t", 0): (0, 5)}, {("t", 0): 5}), 1: ({("t", 1): (3, 4)}, {("t", 1): 4, ("t", 2): 9})}
