"""The origin header and the unsynced tail: the group resumes at the first copy it has not processed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.offsets import SyncRange
from drkit.core.origin import (
    ORIGIN_HEADER,
    TailRecord,
    TargetTail,
    copied_below,
    copied_through,
    has_been_on,
    origin_of,
    origin_prefix,
    resolve_tail,
    resolve_tail_back,
    tail_reads,
    tail_spans,
)
from drkit.core.translate import Position, SyncIndex, Translation


def test_the_header_names_the_source_and_the_offset_and_the_last_hop_wins() -> None:
    assert origin_prefix("A") + b"%d" % 1234 == b"A:1234"
    assert origin_of([(ORIGIN_HEADER, b"A:1234")], "A") == 1234
    # A record mirrored A->B then B->A: the last header is the hop that wrote it.
    assert origin_of([(ORIGIN_HEADER, b"A:7"), ("x", None), (ORIGIN_HEADER, b"B:3")], "B") == 3
    assert origin_of([(ORIGIN_HEADER, b"A:7"), (ORIGIN_HEADER, b"B:3")], "A") is None
    assert origin_of([(ORIGIN_HEADER, b"us-east:1:9")], "us-east:1") == 9  # the offset is after the last ':'


def test_records_without_a_usable_origin_have_none() -> None:
    for headers in (
        None,
        [],
        [("trace", b"1")],
        [(ORIGIN_HEADER, None)],
        [(ORIGIN_HEADER, b"A:")],
        [(ORIGIN_HEADER, b"A:-1")],
    ):
        assert origin_of(headers, "A") is None, headers


def test_only_offsets_past_the_synced_end_need_the_tail() -> None:
    indexes = {("t", 0): SyncIndex([SyncRange(0, 99, 0, 99)]), ("t", 1): SyncIndex([SyncRange(0, 9, 0, 9)])}
    committed = [(("t", 0), 50), (("t", 0), 130), (("t", 1), 10), (("t", 2), 5)]
    assert tail_reads(committed, indexes) == {("t", 0): 100, ("t", 1): 10}
    assert tail_spans({("t", 0): 100, ("t", 1): 10}, {("t", 0): 136, ("t", 1): 10}) == {("t", 0): (100, 136)}


def past_end(offset: int) -> Translation:
    return Translation(offset, Position.PAST_END)


def test_the_group_resumes_at_the_first_copy_at_or_after_its_offset() -> None:
    # Synced 0..99 -> 0..99; a batch that then failed delivered 100..135 to 100..135 with no sync.
    tail = TargetTail(100, 136, tuple(TailRecord(100 + i, 100 + i) for i in range(36)))
    assert resolve_tail(130, past_end(100), tail) == Translation(130, Position.UNSYNCED)
    assert resolve_tail(100, past_end(100), tail) == Translation(100, Position.UNSYNCED)
    # Past everything copied: after the tail, still provisional.
    assert resolve_tail(200, past_end(100), tail) == Translation(136, Position.PAST_END)


def test_a_record_of_unknown_origin_is_where_certainty_ends() -> None:
    tail = TargetTail(10, 14, (TailRecord(10, 50), TailRecord(11, None), TailRecord(12, 52), TailRecord(13, 53)))
    assert resolve_tail(53, past_end(10), tail) == Translation(11, Position.UNKNOWN_ORIGIN)
    assert resolve_tail(50, past_end(10), tail) == Translation(10, Position.UNSYNCED)


def test_answers_that_are_not_past_the_end_or_from_another_start_are_kept() -> None:
    tail = TargetTail(100, 101, (TailRecord(100, 100),))
    for t in (Translation(40, Position.MIRRORED), Translation(None, Position.UNMIRRORED), past_end(90)):
        assert resolve_tail(100, t, tail) == t
    assert resolve_tail(100, past_end(100), None) == past_end(100)


@st.composite
def tails(draw: st.DrawFn) -> tuple[int, TargetTail]:
    start = draw(st.integers(0, 1000))
    n = draw(st.integers(0, 40))
    downs = sorted(draw(st.sets(st.integers(start, start + 200), min_size=n, max_size=n)))
    ups = [draw(st.one_of(st.none(), st.integers(0, 300))) for _ in downs]
    end = (downs[-1] + 1 if downs else start) + draw(st.integers(0, 5))
    return draw(st.integers(0, 300)), TargetTail(start, end, tuple(map(TailRecord, downs, ups)))


@given(tails())
def test_never_skips_a_copy_the_group_has_not_processed_nor_one_it_cannot_place(case: tuple[int, TargetTail]) -> None:
    committed, tail = case
    t = resolve_tail(committed, past_end(tail.start), tail)
    assert t.offset is not None and tail.start <= t.offset <= tail.end
    skipped = [r for r in tail.records if r.downstream < t.offset]
    # No loss: every record before the answer is a copy of a record the group had processed.
    assert all(r.upstream is not None and r.upstream < committed for r in skipped)
    # No needless re-read: the answer is a copy it had not processed, one of unknown origin, or the end.
    at = [r for r in tail.records if r.downstream == t.offset]
    if at:
        assert at[0].upstream is None or at[0].upstream >= committed
    else:
        assert t.offset == tail.end and t.position is Position.PAST_END


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["drkit.origin", "other"]), st.sampled_from(["A", "B", "AB", "C"]), st.integers(0, 9)
        ),
        max_size=5,
    ),
    st.sampled_from(["A", "B", "AB", "C"]),
)
def test_a_record_has_been_on_a_cluster_exactly_when_an_origin_header_names_it(
    hops: list[tuple[str, str, int]], alias: str
) -> None:
    headers = [(key, f"{a}:{o}".encode()) for key, a, o in hops]
    assert has_been_on(headers, alias) == any(key == "drkit.origin" and a == alias for key, a, _ in hops)


def test_what_a_tail_copies_reaches_one_past_its_greatest_origin() -> None:
    # Copies made ahead of their batch, then dropped and made again from 100: the greatest counts.
    tail = TargetTail(
        50, 58, tuple(TailRecord(50 + i, u) for i, u in enumerate([100, 101, 102, 103, None, 100, 101, 102]))
    )
    assert copied_through(tail) == 104
    assert copied_through(TargetTail(50, 51, (TailRecord(50, None),))) is None
    assert copied_through(TargetTail(50, 50, ())) is None


def test_a_group_on_the_copy_processed_the_originals_of_the_copies_below_its_offset() -> None:
    tail = TargetTail(50, 56, tuple(TailRecord(50 + i, u) for i, u in enumerate([100, 101, 102, 100, 101, None])))
    assert copied_below(tail, 53) == 103  # read 100..102
    assert copied_below(tail, 55) == 103  # and copies of 100, 101 made again: nothing more of the original
    assert copied_below(tail, 50) is None


def test_failback_past_the_synced_end_resumes_after_the_copies_the_group_read() -> None:
    past = Translation(100, Position.PAST_END)
    assert resolve_tail_back(past, 103) == Translation(103, Position.UNSYNCED)
    assert resolve_tail_back(past, None) == past
    assert resolve_tail_back(past, 100) == past
    inside = Translation(40, Position.MIRRORED)
    assert resolve_tail_back(inside, 103) == inside


def test_the_index_knows_where_the_unsynced_tail_starts() -> None:
    assert SyncIndex([SyncRange(0, 9, 100, 109), SyncRange(12, 14, 110, 112)]).next_downstream() == 113
    assert SyncIndex([]).next_downstream() is None
