"""The sync-gap rule (drkit.core.sync_gaps) over rows shaped as the mirror writes them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.sync_gaps import GapKind, SyncGap, sync_gaps

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Row:
    partition: int
    upstream_first: int
    upstream_last: int
    downstream_first: int
    downstream_last: int
    written_at: datetime = T0
    stream_id: str = "s1"
    batch_id: int = 0


def test_contiguous_ranges_have_no_gap() -> None:
    assert sync_gaps([Row(0, 0, 9, 100, 109), Row(0, 10, 19, 110, 119)]) == ()


def test_a_hole_on_each_side_and_a_replay_are_named_by_the_range_after_them() -> None:
    later = T0 + timedelta(seconds=5)
    rows = [
        Row(0, 0, 4, 0, 4),
        Row(0, 11, 14, 5, 8, later, "s1", 1),  # source 5..10 never copied
        Row(0, 15, 16, 13, 14, later, "s2", 2),  # target 9..12 described by no range
        Row(0, 15, 18, 15, 18, later, "s2", 3),  # source 15..16 copied again
    ]
    assert sync_gaps(rows) == (
        SyncGap(GapKind.DOWNSTREAM, 0, 9, 12, later, "s2", 2),
        SyncGap(GapKind.REPLAY, 0, 15, 16, later, "s2", 3),
        SyncGap(GapKind.UPSTREAM, 0, 5, 10, later, "s1", 1),
    )
    assert sync_gaps(rows)[0].as_dict() | {"kind": "downstream", "size": 4} == sync_gaps(rows)[0].as_dict()


def test_partitions_are_apart_and_in_order() -> None:
    rows = [Row(1, 0, 0, 0, 0), Row(1, 5, 5, 1, 1), Row(0, 0, 0, 0, 0), Row(0, 2, 2, 1, 1)]
    assert [(g.partition, g.kind, g.first, g.last) for g in sync_gaps(rows)] == [
        (0, GapKind.UPSTREAM, 1, 1),
        (1, GapKind.UPSTREAM, 1, 4),
    ]


@st.composite
def ranges(draw: st.DrawFn) -> list[Row]:
    """Ranges of one partition, each copying its source offsets to as many target offsets, in any order."""
    out: list[Row] = []
    for _ in range(draw(st.integers(0, 8))):
        up, down, size = draw(st.integers(0, 50)), draw(st.integers(0, 50)), draw(st.integers(1, 5))
        out.append(Row(0, up, up + size - 1, down, down + size - 1))
    return draw(st.permutations(out))


@given(ranges())
def test_gaps_cover_exactly_the_offsets_no_range_covers(rows: list[Row]) -> None:
    """Property: the upstream holes plus the covered offsets are every source offset from the first to the
    last; the same on the target side; whatever the order the rows come in."""
    gaps = sync_gaps(rows)
    for kind, first, last in (
        (GapKind.UPSTREAM, "upstream_first", "upstream_last"),
        (GapKind.DOWNSTREAM, "downstream_first", "downstream_last"),
    ):
        covered = {o for r in rows for o in range(getattr(r, first), getattr(r, last) + 1)}
        holes = [o for g in gaps if g.kind is kind for o in range(g.first, g.last + 1)]
        assert len(holes) == len(set(holes)) and not covered & set(holes)
        if covered:
            assert covered | set(holes) == set(range(min(covered), max(covered) + 1))
        assert all(g.size > 0 for g in gaps)
    assert sync_gaps(rows) == sync_gaps(list(reversed(rows)))


@given(ranges())
def test_a_replay_names_source_offsets_an_earlier_range_covered(rows: list[Row]) -> None:
    for g in sync_gaps(rows):
        if g.kind is GapKind.REPLAY:
            assert any(r.upstream_first <= g.first and g.last <= r.upstream_last for r in rows)
