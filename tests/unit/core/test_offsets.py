"""SyncRange, RangeBuilder / ranges_from_pairs, and the one coalesce rule (islands, coalesce, the cutoff)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.offsets import RangeBuilder, SyncRange, coalesce, coalesce_cutoff, islands, ranges_from_pairs
from drkit.core.translate import SyncIndex

# --------------------------------------------------------------------------- SyncRange


def test_valid_range_and_record_count() -> None:
    r = SyncRange(10, 14, 100, 104)
    assert r.record_count == 5
    assert list(r.pairs()) == [(10, 100), (11, 101), (12, 102), (13, 103), (14, 104)]


def test_single_record_range() -> None:
    r = SyncRange(0, 0, 0, 0)
    assert r.record_count == 1
    assert list(r.pairs()) == [(0, 0)]


@pytest.mark.parametrize(
    "args",
    [
        (-1, 0, 0, 1),  # negative upstream
        (0, 1, -1, 0),  # negative downstream
        (-5, -5, -5, -5),  # both negative
    ],
)
def test_negative_offsets_rejected(args: tuple[int, int, int, int]) -> None:
    with pytest.raises(ValueError, match="negative"):
        SyncRange(*args)


@pytest.mark.parametrize(
    "args",
    [
        (0, 5, 0, 4),
        (0, 4, 10, 15),
        (3, 3, 7, 8),
    ],
)
def test_unequal_lengths_rejected(args: tuple[int, int, int, int]) -> None:
    with pytest.raises(ValueError, match="same length"):
        SyncRange(*args)


@pytest.mark.parametrize("args", [(5, 4, 5, 4), (10, 0, 20, 10)])
def test_empty_range_rejected(args: tuple[int, int, int, int]) -> None:
    with pytest.raises(ValueError, match="at least one record"):
        SyncRange(*args)


def test_downstream_of_and_upstream_of() -> None:
    r = SyncRange(10, 19, 1000, 1009)
    assert r.downstream_of(10) == 1000
    assert r.downstream_of(15) == 1005
    assert r.downstream_of(19) == 1009
    assert r.upstream_of(1000) == 10
    assert r.upstream_of(1007) == 17
    assert r.upstream_of(1009) == 19


@given(
    uf=st.integers(0, 10**12),
    df=st.integers(0, 10**12),
    n=st.integers(1, 1000),
    data=st.data(),
)
def test_downstream_upstream_are_inverse(uf: int, df: int, n: int, data: st.DataObject) -> None:
    r = SyncRange(uf, uf + n - 1, df, df + n - 1)
    u = data.draw(st.integers(uf, uf + n - 1))
    d = r.downstream_of(u)
    assert r.downstream_first <= d <= r.downstream_last
    assert r.upstream_of(d) == u


def test_range_is_frozen() -> None:
    r = SyncRange(0, 1, 0, 1)
    with pytest.raises(AttributeError):
        r.upstream_first = 5  # type: ignore[misc]


# --------------------------------------------------------------------------- RangeBuilder


def test_builder_empty() -> None:
    assert RangeBuilder().build() == []
    assert ranges_from_pairs([]) == []


def test_contiguous_on_both_sides_extends() -> None:
    assert ranges_from_pairs([(5, 50), (6, 51), (7, 52)]) == [SyncRange(5, 7, 50, 52)]


def test_gap_on_upstream_side_starts_new_range() -> None:
    # upstream 7 missing (compaction / marker), downstream contiguous
    assert ranges_from_pairs([(5, 50), (6, 51), (8, 52), (9, 53)]) == [
        SyncRange(5, 6, 50, 51),
        SyncRange(8, 9, 52, 53),
    ]


def test_gap_on_downstream_side_starts_new_range() -> None:
    # downstream 52 taken by something else (marker, orphan), upstream contiguous
    assert ranges_from_pairs([(5, 50), (6, 51), (7, 53), (8, 54)]) == [
        SyncRange(5, 6, 50, 51),
        SyncRange(7, 8, 53, 54),
    ]


def test_gap_on_both_sides_starts_new_range() -> None:
    assert ranges_from_pairs([(0, 0), (2, 2)]) == [SyncRange(0, 0, 0, 0), SyncRange(2, 2, 2, 2)]


def test_upstream_rewind_starts_new_range() -> None:
    # a replayed batch: upstream goes back while downstream continues
    assert ranges_from_pairs([(0, 0), (1, 1), (2, 2), (1, 3), (2, 4), (3, 5)]) == [
        SyncRange(0, 2, 0, 2),
        SyncRange(1, 3, 3, 5),
    ]


def test_builder_is_incremental_and_build_is_repeatable() -> None:
    b = RangeBuilder()
    b.add(0, 10)
    b.add(1, 11)
    assert b.build() == [SyncRange(0, 1, 10, 11)]
    # build() closes the open range; later pairs start a new one
    b.add(2, 12)
    assert b.build() == [SyncRange(0, 1, 10, 11), SyncRange(2, 2, 12, 12)]


@st.composite
def increasing(draw: st.DrawFn, n: int) -> list[int]:
    """``n`` strictly increasing non-negative offsets with random gaps (gap of 0 = contiguous)."""
    out = [draw(st.integers(0, 1000))]
    for _ in range(n - 1):
        out.append(out[-1] + 1 + draw(st.integers(0, 2)))
    return out


@st.composite
def monotone_pairs(draw: st.DrawFn) -> list[tuple[int, int]]:
    n = draw(st.integers(1, 60))
    return list(zip(draw(increasing(n)), draw(increasing(n)), strict=True))


@given(pairs=monotone_pairs())
def test_ranges_from_pairs_preserves_pairs_and_is_maximal(pairs: list[tuple[int, int]]) -> None:
    ranges = ranges_from_pairs(pairs)
    assert [p for r in ranges for p in r.pairs()] == pairs
    # every boundary between consecutive ranges is a real gap on at least one side
    for a, b in itertools.pairwise(ranges):
        assert not (b.upstream_first == a.upstream_last + 1 and b.downstream_first == a.downstream_last + 1)
    # number of ranges == 1 + number of breaks in the pair sequence
    breaks = sum(1 for (u0, d0), (u1, d1) in itertools.pairwise(pairs) if not (u1 == u0 + 1 and d1 == d0 + 1))
    assert len(ranges) == 1 + breaks


# --------------------------------------------------------------------------- coalesce


def test_coalesce_empty() -> None:
    assert coalesce([]) == []


def test_coalesce_merges_adjacent_on_both_sides() -> None:
    assert coalesce([SyncRange(0, 4, 100, 104), SyncRange(5, 9, 105, 109), SyncRange(10, 10, 110, 110)]) == [
        SyncRange(0, 10, 100, 110)
    ]


def test_coalesce_merges_regardless_of_input_order() -> None:
    assert coalesce([SyncRange(5, 9, 105, 109), SyncRange(0, 4, 100, 104)]) == [SyncRange(0, 9, 100, 109)]


def test_coalesce_keeps_upstream_gap() -> None:
    rs = [SyncRange(0, 4, 100, 104), SyncRange(6, 9, 105, 108)]
    assert coalesce(rs) == rs


def test_coalesce_keeps_downstream_gap() -> None:
    rs = [SyncRange(0, 4, 100, 104), SyncRange(5, 9, 106, 110)]
    assert coalesce(rs) == rs


def test_coalesce_keeps_replayed_range() -> None:
    rs = [SyncRange(0, 4, 0, 4), SyncRange(2, 6, 5, 9)]
    assert coalesce(rs) == rs


def _pair_set(ranges: list[SyncRange]) -> set[tuple[int, int]]:
    return {p for r in ranges for p in r.pairs()}


@st.composite
def delivery_pairs(draw: st.DrawFn) -> list[tuple[int, int]]:
    """(upstream, downstream) pairs in delivery order, with gaps on both sides and replays."""
    n = draw(st.integers(0, 80))
    u = draw(st.integers(0, 50))
    d = draw(st.integers(0, 50))
    out: list[tuple[int, int]] = []
    for _ in range(n):
        out.append((u, d))
        d += draw(st.integers(1, 3))
        move = draw(st.integers(-4, 3))
        u = max(0, u + (move if move != 0 else 1))
    return out


@st.composite
def batched_ranges(draw: st.DrawFn) -> tuple[list[tuple[int, int]], list[SyncRange]]:
    """The pairs, and the ranges a sequence of micro-batches over them would have written."""
    pairs = draw(delivery_pairs())
    cuts = sorted(draw(st.sets(st.integers(0, max(len(pairs), 1)), max_size=10)))
    bounds = [0, *cuts, len(pairs)]
    ranges: list[SyncRange] = []
    for lo, hi in itertools.pairwise(bounds):
        ranges.extend(ranges_from_pairs(pairs[lo:hi]))
    return pairs, draw(st.permutations(ranges))


@given(data=batched_ranges())
def test_coalesce_preserves_mapping(data: tuple[list[tuple[int, int]], list[SyncRange]]) -> None:
    pairs, ranges = data
    merged = coalesce(ranges)
    assert _pair_set(merged) == _pair_set(ranges) == set(pairs)
    assert sum(r.record_count for r in merged) == sum(r.record_count for r in ranges)
    assert len(merged) <= len(ranges)


@given(data=batched_ranges())
def test_coalesce_of_batches_equals_ranges_of_whole_stream(
    data: tuple[list[tuple[int, int]], list[SyncRange]],
) -> None:
    # downstream strictly increases in delivery order, so coalescing the per-batch ranges
    # gives back exactly what one builder over the whole stream would have produced
    pairs, ranges = data
    assert coalesce(ranges) == ranges_from_pairs(pairs)


@given(data=batched_ranges())
def test_coalesce_is_idempotent(data: tuple[list[tuple[int, int]], list[SyncRange]]) -> None:
    _, ranges = data
    once = coalesce(ranges)
    assert coalesce(once) == once


# ------------------------------------------------------------------ the coalesce rule, on any ranges


@st.composite
def any_ranges(draw: st.DrawFn) -> list[SyncRange]:
    """Ranges as a table may hold them: replays, overlaps on either side, the same range recorded twice."""
    made = draw(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(1, 6)), max_size=25))
    ranges = [SyncRange(u, u + n - 1, d, d + n - 1) for u, d, n in made]
    repeats = draw(st.lists(st.sampled_from(ranges), max_size=5)) if ranges else []
    return draw(st.permutations(ranges + repeats))


def _answers(ranges: list[SyncRange]) -> list[tuple[object, object]]:
    index = SyncIndex(ranges)
    return [(index.translate(c), index.inverse(c)) for c in range(45)]


@given(ranges=any_ranges())
def test_coalescing_never_changes_a_translation(ranges: list[SyncRange]) -> None:
    merged = coalesce(ranges)
    assert _pair_set(merged) == _pair_set(ranges)
    assert _answers(merged) == _answers(ranges)


@given(ranges=any_ranges())
def test_coalescing_any_ranges_is_idempotent(ranges: list[SyncRange]) -> None:
    once = coalesce(ranges)
    assert coalesce(once) == once


@given(ranges=any_ranges(), data=st.data())
def test_coalescing_does_not_depend_on_the_order_rows_are_read_in(ranges: list[SyncRange], data: st.DataObject) -> None:
    assert coalesce(data.draw(st.permutations(ranges))) == coalesce(ranges)


@given(ranges=any_ranges())
def test_an_island_stands_for_exactly_its_members(ranges: list[SyncRange]) -> None:
    found = islands(ranges)
    members = sorted(i for island in found for i in island.members)
    assert members == list(range(len(ranges)))  # every row in exactly one island
    for island in found:
        assert _pair_set([island.range]) == _pair_set([ranges[i] for i in island.members])
        assert sum(ranges[i].record_count for i in set(island.members)) >= island.range.record_count


@given(data=batched_ranges(), cut=st.data())
def test_coalescing_in_steps_is_coalescing_at_once(
    data: tuple[list[tuple[int, int]], list[SyncRange]], cut: st.DataObject
) -> None:
    # Where it must hold: a target offset is written once. The writer coalesces a day every few batches,
    # maintenance coalesces again, the translator's cache coalesces what it had with what is new.
    _, ranges = data
    split = cut.draw(st.integers(0, len(ranges)))
    assert coalesce([*coalesce(ranges[:split]), *ranges[split:]]) == coalesce(ranges)


def test_the_cutoff_is_the_greatest_batch_id_not_kept() -> None:
    assert coalesce_cutoff([5, 1, 3, 3, 9], keep=2) == 3
    assert coalesce_cutoff([5, 1, 3, 9], keep=1) == 5
    assert coalesce_cutoff([5, 1], keep=2) is None
    assert coalesce_cutoff([], keep=1) is None


@given(ids=st.sets(st.integers(0, 50)), keep=st.integers(1, 10))
def test_the_cutoff_keeps_exactly_the_newest_batches(ids: set[int], keep: int) -> None:
    cutoff = coalesce_cutoff(ids, keep)
    kept = {i for i in ids if cutoff is None or i > cutoff}
    assert kept == set(sorted(ids)[-keep:])
