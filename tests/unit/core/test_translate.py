"""Exact offset translation, checked by example and against a brute-force replay of records."""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.offsets import SyncRange, ranges_from_pairs
from drkit.core.translate import Position, SyncIndex, Translation, inverse_translate, translate

# --------------------------------------------------------------------------- examples

# upstream 10..14 -> downstream 100..104, then a gap on both sides, then 20..24 -> 110..114
EXAMPLE = [SyncRange(10, 14, 100, 104), SyncRange(20, 24, 110, 114)]


@pytest.mark.parametrize(
    ("committed", "offset", "position"),
    [
        (10, 100, Position.MIRRORED),
        (12, 102, Position.MIRRORED),
        (14, 104, Position.MIRRORED),
        (24, 114, Position.MIRRORED),
        (15, 110, Position.IN_GAP),
        (17, 110, Position.IN_GAP),
        (19, 110, Position.IN_GAP),
        (0, 100, Position.BEFORE_FIRST),
        (9, 100, Position.BEFORE_FIRST),
        (25, 115, Position.PAST_END),
        (1000, 115, Position.PAST_END),
    ],
)
def test_forward_examples(committed: int, offset: int, position: Position) -> None:
    t = SyncIndex(EXAMPLE).translate(committed)
    assert t == Translation(offset, position)
    assert t.provisional is (position is Position.PAST_END)
    assert translate(EXAMPLE, committed) == offset


@pytest.mark.parametrize(
    ("committed", "offset", "position"),
    [
        (100, 10, Position.MIRRORED),
        (103, 13, Position.MIRRORED),
        (114, 24, Position.MIRRORED),
        (105, 20, Position.IN_GAP),
        (109, 20, Position.IN_GAP),
        (0, 10, Position.BEFORE_FIRST),
        (99, 10, Position.BEFORE_FIRST),
        (115, 25, Position.PAST_END),
        (5000, 25, Position.PAST_END),
    ],
)
def test_inverse_examples(committed: int, offset: int, position: Position) -> None:
    t = SyncIndex(EXAMPLE).inverse(committed)
    assert t == Translation(offset, position)
    assert t.provisional is (position is Position.PAST_END)
    assert inverse_translate(EXAMPLE, committed) == offset


@pytest.mark.parametrize("committed", [0, 5, 1_000_000])
def test_unmirrored_both_ways(committed: int) -> None:
    index = SyncIndex([])
    assert len(index) == 0
    assert index.translate(committed) == Translation(None, Position.UNMIRRORED)
    assert index.inverse(committed) == Translation(None, Position.UNMIRRORED)
    assert not index.translate(committed).provisional
    assert translate([], committed) is None
    assert inverse_translate([], committed) is None


def test_input_order_does_not_matter() -> None:
    forward = SyncIndex(EXAMPLE)
    backward = SyncIndex(list(reversed(EXAMPLE)))
    assert len(forward) == len(backward) == 2
    for c in range(0, 130):
        assert forward.translate(c) == backward.translate(c)
        assert forward.inverse(c) == backward.inverse(c)


def test_single_record() -> None:
    index = SyncIndex([SyncRange(7, 7, 3, 3)])
    assert index.translate(7) == Translation(3, Position.MIRRORED)
    assert index.translate(6) == Translation(3, Position.BEFORE_FIRST)
    assert index.translate(8) == Translation(4, Position.PAST_END)
    assert index.inverse(3) == Translation(7, Position.MIRRORED)
    assert index.inverse(0) == Translation(7, Position.BEFORE_FIRST)
    assert index.inverse(4) == Translation(8, Position.PAST_END)


# --------------------------------------------------------------------------- overlapping ranges

# upstream 0..9 -> 0..9; a replay wrote upstream 5..9 again at 12..16 (10, 11: orphans on the
# target); then upstream 10..14 -> 17..21.
REPLAYED = [SyncRange(0, 9, 0, 9), SyncRange(5, 9, 12, 16), SyncRange(10, 14, 17, 21)]


@pytest.mark.parametrize(
    ("committed", "offset", "position"),
    [
        (4, 4, Position.MIRRORED),
        (5, 5, Position.MIRRORED),  # earliest of the copies at 5 and 12
        (7, 7, Position.MIRRORED),  # earliest of the copies at 7 and 14
        (9, 9, Position.MIRRORED),
        (10, 17, Position.MIRRORED),
        (15, 22, Position.PAST_END),
    ],
)
def test_overlap_forward_chooses_earliest_copy(committed: int, offset: int, position: Position) -> None:
    for ranges in (REPLAYED, list(reversed(REPLAYED))):
        assert SyncIndex(ranges).translate(committed) == Translation(offset, position)


@pytest.mark.parametrize(
    ("committed", "offset", "position"),
    [
        (3, 3, Position.MIRRORED),
        (10, 5, Position.IN_GAP),  # target 10, 11 are orphans; next mirrored target record is 12
        (11, 5, Position.IN_GAP),
        (14, 7, Position.MIRRORED),
        (17, 10, Position.MIRRORED),
        (22, 15, Position.PAST_END),
    ],
)
def test_overlap_inverse(committed: int, offset: int, position: Position) -> None:
    assert SyncIndex(REPLAYED).inverse(committed) == Translation(offset, position)


def test_overlap_past_end_uses_earliest_copy_of_last_record() -> None:
    # the last upstream record was mirrored twice (9 -> 9 and 9 -> 11): resuming after the
    # earliest copy re-delivers the replayed copies, never loses anything
    ranges = [SyncRange(0, 9, 0, 9), SyncRange(8, 9, 10, 11)]
    assert SyncIndex(ranges).translate(10) == Translation(10, Position.PAST_END)
    assert SyncIndex(ranges).inverse(12) == Translation(10, Position.PAST_END)


def test_duplicate_sync_rows_change_nothing() -> None:
    once = SyncIndex(EXAMPLE)
    twice = SyncIndex(EXAMPLE + EXAMPLE)
    assert len(twice) == 4
    for c in range(0, 130):
        assert once.translate(c) == twice.translate(c)
        assert once.inverse(c) == twice.inverse(c)


def test_overlap_fully_contained_range() -> None:
    # an earlier, longer range contains the committed offset while a later-starting one does
    # not: the lookup must scan back past the later range
    ranges = [SyncRange(0, 100, 0, 100), SyncRange(50, 52, 200, 202), SyncRange(60, 60, 300, 300)]
    index = SyncIndex(ranges)
    assert index.translate(55) == Translation(55, Position.MIRRORED)
    assert index.translate(51) == Translation(51, Position.MIRRORED)
    assert index.translate(60) == Translation(60, Position.MIRRORED)
    assert index.translate(101) == Translation(101, Position.PAST_END)
    assert index.inverse(201) == Translation(51, Position.MIRRORED)
    assert index.inverse(150) == Translation(50, Position.IN_GAP)
    assert index.inverse(301) == Translation(61, Position.PAST_END)


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Mirror:
    """A source partition log, what of it was mirrored, and where each mirrored record landed.

    ``pairs`` is in delivery order: downstream offsets strictly increase.
    """

    log: list[int]  # upstream offsets that exist
    pairs: list[tuple[int, int]]  # (upstream, downstream), delivery order
    ranges: list[SyncRange]  # as the mirror would have written them (split in batches, any order)

    @property
    def mirrored(self) -> list[int]:
        return sorted({u for u, _ in self.pairs})


def _increasing(draw: st.DrawFn, n: int, start_max: int = 20, gap_max: int = 3) -> list[int]:
    out: list[int] = []
    if n:
        out.append(draw(st.integers(0, start_max)))
    for _ in range(n - 1):
        out.append(out[-1] + 1 + draw(st.integers(0, gap_max)))
    return out


def _batched(draw: st.DrawFn, pairs: list[tuple[int, int]]) -> list[SyncRange]:
    """Ranges as a mirror writing micro-batches over ``pairs`` would store them."""
    cuts = sorted(draw(st.sets(st.integers(0, len(pairs)), max_size=6)))
    bounds = [0, *cuts, len(pairs)]
    ranges: list[SyncRange] = []
    for lo, hi in itertools.pairwise(bounds):
        ranges.extend(ranges_from_pairs(pairs[lo:hi]))
    return draw(st.permutations(ranges))


@st.composite
def mirrors(draw: st.DrawFn) -> Mirror:
    """In-order mirroring, no replays: gaps on both sides."""
    log = _increasing(draw, draw(st.integers(0, 60)))
    keep = draw(st.lists(st.booleans(), min_size=len(log), max_size=len(log)))
    m = [u for u, k in zip(log, keep, strict=True) if k]
    downs = _increasing(draw, len(m), start_max=50)
    pairs = list(zip(m, downs, strict=True))
    return Mirror(log, pairs, _batched(draw, pairs))


@st.composite
def replaying_mirrors(draw: st.DrawFn) -> Mirror:
    """Mirroring with replays: the mirror may rewind to an earlier mirrored record and write the
    records from there again (a batch retried after a crash), but it never skips forward."""
    log = _increasing(draw, draw(st.integers(0, 50)))
    keep = draw(st.lists(st.booleans(), min_size=len(log), max_size=len(log)))
    m = [u for u, k in zip(log, keep, strict=True) if k]
    pairs: list[tuple[int, int]] = []
    d = draw(st.integers(0, 30))
    i = 0
    frontier = 0  # next index of m never delivered yet
    steps = 0
    while i < len(m) and steps < 200:
        steps += 1
        pairs.append((m[i], d))
        frontier = max(frontier, i + 1)
        d += 1 + draw(st.integers(0, 2))
        if draw(st.integers(0, 9)) == 0:
            i = draw(st.integers(0, i))  # rewind: replay from an earlier record
        else:
            i += 1
        assert i <= frontier
    return Mirror(log, pairs, _batched(draw, pairs))


def _draw_committed(data: st.DataObject, offsets: list[int]) -> int:
    """A committed offset: often one of ``offsets``, otherwise anywhere from 0 to past the end."""
    top = (max(offsets) if offsets else 0) + 6
    if offsets:
        return data.draw(st.one_of(st.sampled_from(offsets), st.integers(0, top)), label="committed")
    return data.draw(st.integers(0, top), label="committed")


# --------------------------------------------------------------------------- references


def ref_forward(pairs: list[tuple[int, int]], committed: int) -> int | None:
    """Brute force: earliest copy of the smallest mirrored u >= C; else after the last one."""
    mirrored = {u for u, _ in pairs}
    if not mirrored:
        return None
    later = [u for u in mirrored if u >= committed]
    if later:
        target = min(later)
        return min(d for u, d in pairs if u == target)
    top = max(mirrored)
    return min(d for u, d in pairs if u == top) + 1


def ref_inverse(pairs: list[tuple[int, int]], committed: int) -> int | None:
    return ref_forward([(d, u) for u, d in pairs], committed)


def ref_position(mirrored: list[int], committed: int) -> Position:
    if not mirrored:
        return Position.UNMIRRORED
    if committed in mirrored:
        return Position.MIRRORED
    if committed > max(mirrored):
        return Position.PAST_END
    if committed < min(mirrored):
        return Position.BEFORE_FIRST
    return Position.IN_GAP


# --------------------------------------------------------------------------- properties


@given(data=st.data(), mirror=mirrors())
def test_forward_matches_brute_force_and_replay(data: st.DataObject, mirror: Mirror) -> None:
    committed = _draw_committed(data, mirror.log)
    index = SyncIndex(mirror.ranges)
    t = index.translate(committed)
    m = mirror.mirrored

    assert t.offset == ref_forward(mirror.pairs, committed)
    assert t.offset == translate(mirror.ranges, committed)
    assert t.position is ref_position(m, committed)
    assert t.provisional is (t.position is Position.PAST_END)

    if t.offset is None:
        assert m == []
        return
    # replay: a consumer on the target starting at t.offset reads every mirrored record stored
    # at or after it; it must get exactly the mirrored records at or after C, in order
    received = [u for u, d in mirror.pairs if d >= t.offset]
    assert received == [u for u in m if u >= committed]


@given(data=st.data(), mirror=mirrors())
def test_inverse_matches_brute_force_and_replay(data: st.DataObject, mirror: Mirror) -> None:
    # the target log: mirrored records plus orphans / markers in the downstream gaps
    downs = [d for _, d in mirror.pairs]
    target_log = list(range(downs[-1] + 3)) if downs else [0, 1, 2]
    committed = _draw_committed(data, target_log)
    index = SyncIndex(mirror.ranges)
    t = index.inverse(committed)

    assert t.offset == ref_inverse(mirror.pairs, committed)
    assert t.offset == inverse_translate(mirror.ranges, committed)
    assert t.position is ref_position(downs, committed)

    if t.offset is None:
        assert downs == []
        return
    # replay on the source: a consumer starting at t.offset reads exactly the mirrored records
    # that sit at or after target offset D
    received = [d for u, d in mirror.pairs if u >= t.offset]
    assert received == [d for d in downs if d >= committed]


@given(mirror=mirrors())
def test_round_trip(mirror: Mirror) -> None:
    index = SyncIndex(mirror.ranges)
    for u, d in mirror.pairs:
        assert index.translate(u) == Translation(d, Position.MIRRORED)
        assert index.inverse(d) == Translation(u, Position.MIRRORED)
        assert index.inverse(index.translate(u).offset) == Translation(u, Position.MIRRORED)  # type: ignore[arg-type]


@given(data=st.data(), mirror=replaying_mirrors())
def test_replays_never_lose_a_record(data: st.DataObject, mirror: Mirror) -> None:
    committed = _draw_committed(data, mirror.log)
    index = SyncIndex(mirror.ranges)
    t = index.translate(committed)
    m = mirror.mirrored

    assert t.offset == ref_forward(mirror.pairs, committed)
    assert t.position is ref_position(m, committed)
    if t.offset is None:
        assert m == []
        return
    received = [u for u, d in mirror.pairs if d >= t.offset]
    wanted = [u for u in m if u >= committed]
    # no loss: every mirrored record at or after C is read (replays may re-deliver some)
    assert set(wanted) <= set(received)
    if wanted:
        # the consumer starts exactly at the first record it needs
        assert received[0] == wanted[0]
        # and at its earliest copy: nothing earlier holds that record
        assert all(u != wanted[0] for u, d in mirror.pairs if d < t.offset)
    else:
        # past the end: the group has processed everything; only replayed copies can follow
        assert all(u < committed for u in received)


@given(data=st.data(), mirror=replaying_mirrors())
def test_replays_inverse_and_round_trip(data: st.DataObject, mirror: Mirror) -> None:
    index = SyncIndex(mirror.ranges)
    downs = [d for _, d in mirror.pairs]
    target_log = list(range(downs[-1] + 3)) if downs else [0, 1, 2]
    committed = _draw_committed(data, target_log)
    t = index.inverse(committed)
    assert t.offset == ref_inverse(mirror.pairs, committed)
    assert t.position is ref_position(downs, committed)

    for u in mirror.mirrored:
        earliest = min(d for uu, d in mirror.pairs if uu == u)
        forward = index.translate(u)
        assert forward == Translation(earliest, Position.MIRRORED)
        assert index.inverse(earliest) == Translation(u, Position.MIRRORED)
    for u, d in mirror.pairs:
        assert index.inverse(d) == Translation(u, Position.MIRRORED)


# --------------------------------------------------------------------------- scale


def test_hundred_thousand_ranges() -> None:
    rng = random.Random(20240601)
    ups: list[int] = []
    downs: list[int] = []
    ranges: list[SyncRange] = []
    u, d = 0, 0
    for _ in range(100_000):
        n = rng.randint(1, 4)
        ranges.append(SyncRange(u, u + n - 1, d, d + n - 1))
        ups.extend(range(u, u + n))
        downs.extend(range(d, d + n))
        u += n + rng.randint(1, 3)
        d += n + rng.randint(0, 3)
    rng.shuffle(ranges)
    index = SyncIndex(ranges)
    assert len(index) == 100_000

    def expect(src: list[int], dst: list[int], c: int) -> int:
        i = bisect.bisect_left(src, c)
        return dst[i] if i < len(src) else dst[-1] + 1

    for _ in range(5_000):
        c = rng.randint(0, ups[-1] + 5)
        assert index.translate(c).offset == expect(ups, downs, c)
        c = rng.randint(0, downs[-1] + 5)
        assert index.inverse(c).offset == expect(downs, ups, c)
