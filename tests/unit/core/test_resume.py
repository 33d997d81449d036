"""Where a group resumes on the origin of a failback (drkit.core.resume): never before what it is known to
have processed there, unless it was set back on the copy before that point.

By example, and against a record-by-record model: a group that processed origin records before the failover
and copies after it must resume on the origin at exactly the first record it has not processed, unless it
was set back on the copy (then the plan follows it and warns).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.offsets import SyncRange, ranges_from_pairs
from drkit.core.resume import Basis, Processed, known_processed, translate_back
from drkit.core.translate import Position, SyncIndex

# origin orders/0: 0..999 mirrored to 0..999; the origin went on to 1100 before the disaster.
INDEX = SyncIndex([SyncRange(0, 999, 0, 999)])


def test_known_processed_is_the_greater_of_the_checkpoint_and_the_held_offset() -> None:
    assert known_processed(None, None) is None
    assert known_processed(1100, None) == Processed(1100, Basis.CHECKPOINT)
    assert known_processed(None, 1100) == Processed(1100, Basis.ORIGIN_OFFSET)
    assert known_processed(1100, 1050) == Processed(1100, Basis.CHECKPOINT)
    assert known_processed(1050, 1100) == Processed(1100, Basis.ORIGIN_OFFSET)
    assert known_processed(1100, 1100) == Processed(1100, Basis.ORIGIN_OFFSET)  # the origin's own word


@pytest.mark.parametrize(
    ("on_copy", "known", "offset", "position", "basis"),
    [
        # The case: committed 1100 on A, the mirror at 1000, finished on B at the end of the copy.
        (1000, Processed(1100, Basis.CHECKPOINT), 1100, Position.PAST_END, Basis.CHECKPOINT),
        (1000, Processed(1100, Basis.ORIGIN_OFFSET), 1100, Position.PAST_END, Basis.ORIGIN_OFFSET),
        # Nothing known on the origin: the inverse, as before.
        (1000, None, 1000, Position.PAST_END, Basis.TRANSLATION),
        (600, None, 600, Position.MIRRORED, Basis.TRANSLATION),
        # The group went on on B past what it had processed on A: the inverse.
        (700, Processed(500, Basis.CHECKPOINT), 700, Position.MIRRORED, Basis.TRANSLATION),
        (500, Processed(500, Basis.CHECKPOINT), 500, Position.MIRRORED, Basis.TRANSLATION),
        # Set back on B (reset offsets) before what it had processed on A: followed (the plan warns).
        (400, Processed(1100, Basis.CHECKPOINT), 400, Position.MIRRORED, Basis.TRANSLATION),
        (999, Processed(1100, Basis.CHECKPOINT), 999, Position.MIRRORED, Basis.TRANSLATION),
        (400, Processed(500, Basis.ORIGIN_OFFSET), 400, Position.MIRRORED, Basis.TRANSLATION),
        # Known within the mirrored range, the group past the copy's end: the inverse is already ahead.
        (1000, Processed(500, Basis.CHECKPOINT), 1000, Position.PAST_END, Basis.TRANSLATION),
    ],
)
def test_translate_back(on_copy: int, known: Processed | None, offset: int, position: Position, basis: Basis) -> None:
    t, got_basis = translate_back(on_copy, INDEX, known)
    assert (t.offset, t.position, got_basis) == (offset, position, basis)


def test_translate_back_with_nothing_mirrored_uses_what_is_known_or_nothing() -> None:
    t, basis = translate_back(0, None, Processed(50, Basis.CHECKPOINT))
    assert (t.offset, t.position, basis) == (50, Position.UNMIRRORED, Basis.CHECKPOINT)
    t, basis = translate_back(0, None, None)
    assert (t.offset, t.position, basis) == (None, Position.UNMIRRORED, Basis.TRANSLATION)


def test_translate_back_in_a_gap() -> None:
    # 0..9 -> 0..9, 20..29 -> 10..19 (origin 10..19 compacted away); the group had processed up to 15.
    index = SyncIndex([SyncRange(0, 9, 0, 9), SyncRange(20, 29, 10, 19)])
    t, basis = translate_back(10, index, Processed(15, Basis.CHECKPOINT))  # placed at 10 (= origin 20)
    assert (t.offset, basis) == (20, Basis.TRANSLATION)
    t, basis = translate_back(9, index, Processed(15, Basis.CHECKPOINT))  # set back before that point
    assert (t.offset, basis) == (9, Basis.TRANSLATION)


def test_where_a_known_offset_came_from_is_named() -> None:
    assert Processed(5, Basis.CHECKPOINT).known_from == "its last checkpoint"
    assert Processed(5, Basis.ORIGIN_OFFSET).known_from == "the offset it holds there"


# --------------------------------------------------------------------------- record by record


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int, int, int]:
    """A mirrored origin partition (pairs, gaps on both sides), the origin's end, what the group processed
    on the origin (K) and where it is on the copy (at or after where failover put it: it was not set back)."""
    pairs: list[tuple[int, int]] = []
    up, down = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    for _ in range(draw(st.integers(1, 30))):
        pairs.append((up, down))
        up += 1 + draw(st.sampled_from([0, 0, 0, 1, 3]))  # a gap upstream: compaction, markers
        down += 1 + draw(st.sampled_from([0, 0, 0, 2]))  # a gap downstream: markers of the target
    origin_end = pairs[-1][0] + 1 + draw(st.integers(0, 10))  # records the mirror never copied
    known = draw(st.integers(0, origin_end))
    placed = SyncIndex(ranges_from_pairs(pairs)).translate(known).offset
    assert placed is not None
    on_copy = draw(st.integers(placed, pairs[-1][1] + 3))
    return pairs, origin_end, known, on_copy


@given(histories())
def test_failback_resumes_at_the_first_record_not_processed(
    history: tuple[list[tuple[int, int]], int, int, int],
) -> None:
    pairs, origin_end, known, on_copy = history
    downstream_of = dict(pairs)
    last = pairs[-1][0]
    # The records on the origin: the mirrored ones and those after them that the mirror never copied (an
    # offset inside the mirrored span that was not mirrored is a gap: no record; the mirror started at the
    # origin's log start, so nothing exists before its first record).
    exists = [u for u in range(origin_end) if u in downstream_of or u > last]
    processed = {u for u in exists if u < known or (u in downstream_of and downstream_of[u] < on_copy)}
    t, _ = translate_back(on_copy, SyncIndex(ranges_from_pairs(pairs)), known_processed(known, None))
    assert t.offset is not None
    assert {u for u in exists if u >= t.offset} == {u for u in exists if u not in processed}
