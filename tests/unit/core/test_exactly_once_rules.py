"""drkit.core.exactly_once: which transactional id writes a partition, and what a restarted copy skips.

(Named ``..._rules`` because tests/integration/mirror/test_exactly_once.py holds the real-broker tests and
test module basenames are unique across tests/.)"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.batch import EARLIEST
from drkit.core.exactly_once import (
    BEHIND_COMMIT_SHARE,
    BEHIND_SPAN_SECONDS,
    TRANSACTION_SLOTS,
    Delivery,
    Partition,
    Resume,
    resume,
    slot_groups,
    slot_of,
    transaction_span,
    transactional_id,
)
from drkit.core.offsets import BatchRanges

Tail = list[tuple[int | None, int]]

# ------------------------------------------------------------------------------ slots and ids


def test_a_partitions_slot_never_changes_between_releases() -> None:
    """Every host, process and release must agree on a partition's id, or fencing stops working: the values
    are pinned (crc32("orders") = 3845127662, crc32("users") = 344172009)."""
    assert [slot_of("orders", p, 4) for p in range(6)] == [2, 3, 0, 1, 2, 3]
    assert [slot_of("users", p, 4) for p in range(6)] == [1, 2, 3, 0, 1, 2]
    assert slot_of("orders", 0, 1) == 0
    assert slot_of("orders", 7, 1024) == (3845127662 + 7) % 1024


def test_no_slots_is_one_slot() -> None:
    assert slot_of("orders", 5, 0) == 0
    assert slot_of("orders", 5, -3) == 0


def test_the_transactional_id_names_the_flow_and_the_slot() -> None:
    assert transactional_id("A->B", 3) == "drkit-mirror.A->B.3"
    assert transactional_id("A->B", 0) != transactional_id("B->A", 0)
    assert transactional_id("A->B", 0) != transactional_id("A->B", 1)


def test_the_defaults() -> None:
    assert TRANSACTION_SLOTS == 4
    assert Delivery("exactly_once") is Delivery.EXACTLY_ONCE
    assert Delivery("at_least_once") is Delivery.AT_LEAST_ONCE


def test_slot_groups_hold_whole_partitions_slots_in_order() -> None:
    ranges: BatchRanges = {("orders", 0): (0, 5), ("orders", 1): (3, 9), ("orders", 4): (1, 2), ("users", 3): (7, 8)}
    # orders/0 -> 2, orders/1 -> 3, orders/4 -> 2, users/3 -> 0
    assert slot_groups(ranges, 4) == (
        (0, {("users", 3): (7, 8)}),
        (2, {("orders", 0): (0, 5), ("orders", 4): (1, 2)}),
        (3, {("orders", 1): (3, 9)}),
    )
    assert slot_groups(ranges, 1) == ((0, ranges),)
    assert slot_groups({}, 4) == ()


partition = st.tuples(st.sampled_from(["a", "b", "orders", "users.v2"]), st.integers(0, 40))


@given(st.dictionaries(partition, st.tuples(st.integers(-2, 100), st.integers(1, 100)), max_size=20), st.integers(1, 9))
def test_every_partition_is_in_exactly_one_group_of_its_slot(
    planned: dict[Partition, tuple[int, int]], slots: int
) -> None:
    ranges: BatchRanges = {key: (since, since + n) for key, (since, n) in planned.items()}
    groups = slot_groups(ranges, slots)
    numbers = [slot for slot, _ in groups]
    assert numbers == sorted(set(numbers))  # each slot once, in order
    seen: list[Partition] = []
    for slot, group in groups:
        assert group  # no empty group
        assert 0 <= slot < slots
        for key, span in group.items():
            assert slot_of(key[0], key[1], slots) == slot
            assert span == ranges[key]
        seen.extend(group)
    assert sorted(seen) == sorted(ranges)  # every partition, once


@given(st.text(max_size=30), st.integers(0, 10_000), st.integers(1, 1024))
def test_consecutive_partitions_go_to_consecutive_slots(topic: str, p: int, slots: int) -> None:
    slot = slot_of(topic, p, slots)
    assert 0 <= slot < slots
    assert slot_of(topic, p + 1, slots) == (slot + 1) % slots
    # a topic's first `slots` partitions use every slot once
    if p == 0 and slots <= 64:
        assert sorted(slot_of(topic, q, slots) for q in range(slots)) == list(range(slots))


# ------------------------------------------------------------------------------ resume: examples


def test_nothing_found_leaves_the_ranges_as_planned() -> None:
    ranges: BatchRanges = {("t", 0): (10, 20), ("t", 1): (0, 3)}
    found = resume(ranges, {("t", 0): [(None, 5), (3, 6)]})  # no origin, and a copy from before the range
    assert found == Resume(ranges, {}, frozenset())
    assert found.reached(ranges) == {}


def test_a_prefix_found_is_kept_and_the_copy_goes_on_after_it() -> None:
    ranges: BatchRanges = {("t", 0): (10, 20)}
    tail: Tail = [(9, 100), (10, 101), (11, 103), (None, 104), (13, 105)]  # 12 compacted away, 102 a marker
    found = resume(ranges, {("t", 0): tail})
    assert found.found == {("t", 0): ((10, 101), (11, 103), (13, 105))}
    assert found.ranges == {("t", 0): (14, 20)}
    assert found.again == frozenset()
    assert found.reached(ranges) == {}


def test_a_range_completed_by_the_copies_found_is_dropped_and_reached_at_its_end() -> None:
    ranges: BatchRanges = {("t", 0): (10, 13), ("t", 1): (0, 4)}
    found = resume(ranges, {("t", 0): [(10, 0), (11, 1), (12, 2)]})
    assert found.ranges == {("t", 1): (0, 4)}
    assert found.found == {("t", 0): ((10, 0), (11, 1), (12, 2))}
    assert found.reached(ranges) == {("t", 0): 13}


def test_copies_met_again_are_someone_elses() -> None:
    """A past at-least-once run's re-copies: the first copy of each record counts, later ones stay unsynced."""
    found = resume({("t", 0): (0, 10)}, {("t", 0): [(0, 7), (1, 8), (0, 9), (1, 10), (2, 11)]})
    assert found.found == {("t", 0): ((0, 7), (1, 8), (2, 11))}
    assert found.ranges == {("t", 0): (3, 10)}


def test_copies_past_the_range_read_again_and_are_not_the_batchs() -> None:
    ranges: BatchRanges = {("t", 0): (0, 3), ("t", 1): (5, 9)}
    found = resume(ranges, {("t", 0): [(0, 1), (1, 2), (2, 3), (3, 4)], ("t", 1): [(9, 0), (12, 1)]})
    assert found.found == {("t", 0): ((0, 1), (1, 2), (2, 3))}
    assert found.ranges == {("t", 1): (5, 9)}
    assert found.again == {("t", 0), ("t", 1)}


def test_a_range_from_earliest_counts_copies_from_offset_zero() -> None:
    ranges: BatchRanges = {("t", 0): (EARLIEST, 4)}
    found = resume(ranges, {("t", 0): [(0, 50), (1, 51)]})
    assert found.found == {("t", 0): ((0, 50), (1, 51))}
    assert found.ranges == {("t", 0): (2, 4)}
    assert resume(ranges, {}).ranges == ranges  # nothing found: still from earliest


def test_tails_of_partitions_not_planned_are_ignored() -> None:
    found = resume({("t", 0): (0, 2)}, {("t", 9): [(0, 1)], ("u", 0): [(5, 2)]})
    assert found == Resume({("t", 0): (0, 2)}, {}, frozenset())


# ------------------------------------------------------------------------------ resume: properties


@st.composite
def committed_prefix(draw: st.DrawFn) -> tuple[int, int, int, list[tuple[int, int]], Tail]:
    """A range [since, until), the end x of the prefix committed on the target, the copies of that prefix
    (the last is x - 1; holes below it are compaction), and the target's tail: those copies in order with
    increasing offsets (gaps: markers), and records that are not the batch's interleaved (no origin, copies
    from before the range, copies of records already met)."""
    since = draw(st.integers(0, 60))
    until = since + draw(st.integers(1, 30))
    x = draw(st.integers(since, until))
    copies: list[int] = []
    if x > since:
        below = draw(st.sets(st.integers(since, x - 1), max_size=x - since)) if x - 1 > since else set()
        copies = sorted({*below, x - 1})
    downstream = draw(st.integers(0, 1000))
    tail: Tail = []
    pairs: list[tuple[int, int]] = []

    def append(upstream: int | None) -> int:
        nonlocal downstream
        downstream += draw(st.integers(1, 3))
        tail.append((upstream, downstream))
        return downstream

    for upstream in [*copies, None]:
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["none", "before", "again"]))
            if kind == "none":
                append(None)
            elif kind == "before" and since > 0:
                append(draw(st.integers(0, since - 1)))
            elif kind == "again" and pairs:
                append(draw(st.sampled_from([u for u, _ in pairs])))
        if upstream is not None:
            pairs.append((upstream, append(upstream)))
    return since, until, x, pairs, tail


@given(st.dictionaries(partition, committed_prefix(), max_size=4))
def test_the_committed_prefix_is_found_exactly_and_the_copy_goes_on_from_its_end(
    parts: dict[Partition, tuple[int, int, int, list[tuple[int, int]], Tail]],
) -> None:
    ranges: BatchRanges = {key: (since, until) for key, (since, until, _, _, _) in parts.items()}
    found = resume(ranges, {key: tail for key, (*_, tail) in parts.items()})
    assert found.again == frozenset()
    for key, (_, until, x, pairs, _) in parts.items():
        assert found.found.get(key, ()) == tuple(pairs)
        if x >= until:
            assert key not in found.ranges
            assert found.reached(ranges)[key] == until
        else:
            assert found.ranges[key] == (x, until)
            assert key not in found.reached(ranges)


tails = st.lists(st.tuples(st.none() | st.integers(0, 60), st.integers(1, 5)), max_size=30)


def _increasing(raw: list[tuple[int | None, int]]) -> Tail:
    """Target offsets from gaps: strictly increasing, as a partition's are."""
    out: Tail = []
    at = 0
    for upstream, gap in raw:
        at += gap
        out.append((upstream, at))
    return out


@given(st.dictionaries(partition, st.tuples(st.integers(-2, 40), st.integers(1, 30), tails), max_size=4))
def test_what_resume_finds_is_in_order_inside_the_range_and_the_rest_follows_it(
    parts: dict[Partition, tuple[int, int, list[tuple[int | None, int]]]],
) -> None:
    ranges: BatchRanges = {key: (since, since + n) for key, (since, n, _) in parts.items()}
    tail_of = {key: _increasing(raw) for key, (_, _, raw) in parts.items()}
    found = resume(ranges, tail_of)
    assert set(found.found) <= set(ranges) and set(found.ranges) <= set(ranges) and found.again <= set(ranges)
    for key, (since, until) in ranges.items():
        pairs = found.found.get(key, ())
        assert all(p in tail_of[key] for p in pairs)  # copies read back, nothing made up
        for (u1, d1), (u2, d2) in itertools.pairwise(pairs):
            assert u1 < u2 and d1 < d2  # strictly increasing on both sides
        assert all(max(since, 0) <= u < until for u, _ in pairs)
        # copies at or past the range's end: read again, never the batch's
        assert (key in found.again) == any(u is not None and u >= until for u, _ in tail_of[key])
        if pairs:
            after = pairs[-1][0] + 1
            assert found.ranges.get(key, (after, until)) == (after, until)
            assert (key in found.ranges) == (after < until)
        else:
            assert found.ranges[key] == (since, until)
    assert found.reached(ranges) == {k: until for k, (_, until) in ranges.items() if k not in found.ranges}


@given(st.integers(0, 50), st.integers(1, 20), st.lists(st.integers(0, 30), min_size=1, max_size=10))
def test_copies_at_or_past_until_put_the_partition_in_again(since: int, n: int, past: list[int]) -> None:
    until = since + n
    tail: Tail = [(since, 1), *((until + extra, 2 + i) for i, extra in enumerate(past))]
    found = resume({("t", 0): (since, until)}, {("t", 0): tail})
    assert found.again == {("t", 0)}
    assert found.found[("t", 0)] == ((since, 1),)
    assert all(u < until for u, _ in found.found[("t", 0)])


# ------------------------------------------------------------------------------ a transaction's span


def test_a_copier_that_keeps_up_commits_at_its_base_whatever_a_commit_took() -> None:
    assert transaction_span(0.05, 0.0, behind=False) == 0.05
    assert transaction_span(0.05, 0.3, behind=False) == 0.05


def test_behind_a_transaction_stays_open_until_its_commit_is_a_tenth_of_the_time() -> None:
    # a 30 ms commit: open 270 ms, so the copying thread copies 270 of every 300 ms
    assert abs(transaction_span(0.05, 0.03, behind=True) - 0.27) < 1e-9
    assert transaction_span(0.05, 0.001, behind=True) == 0.05  # never shorter than the base
    assert transaction_span(0.05, 2.0, behind=True) == BEHIND_SPAN_SECONDS  # a slow commit: capped


@given(st.floats(0.0, 1.0), st.floats(0.0, 5.0), st.booleans())
def test_the_span_is_bounded_and_behind_the_commits_share_is_at_most_its_bound(
    base: float, last_commit: float, behind: bool
) -> None:
    span = transaction_span(base, last_commit, behind)
    assert base <= span <= max(base, BEHIND_SPAN_SECONDS)
    if not behind:
        assert span == base
    elif span < BEHIND_SPAN_SECONDS and last_commit > 0:
        assert last_commit / (span + last_commit) <= BEHIND_COMMIT_SHARE + 1e-9
