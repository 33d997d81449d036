"""Translation never crosses the incarnations of a re-created topic (drkit.core.incarnation)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.incarnation import EraIndexes, Renewal, era_indexes, era_ranges
from drkit.core.offsets import SyncRange
from drkit.core.plan import CheckpointFact, failover_plan
from drkit.core.translate import Position, SyncIndex

OLD = [SyncRange(0, 199, 0, 199)]  # the first incarnation: 200 records, copied to 0..199
NEW = [SyncRange(0, 299, 205, 504)]  # created again: 300 records, copied after 5 unsynced copies
RENEWAL = Renewal("t", 0, "id2", at_ms=1_000, boundary=200)


def test_an_offset_read_before_the_renewal_stays_in_the_old_copies() -> None:
    eras = EraIndexes(OLD + NEW, [RENEWAL])
    # Caught up on the old incarnation: past its end, never into the new one's copies (which hold upstream 200+).
    assert eras.at(500).translate(200).offset == 200
    assert eras.at(500).translate(50).offset == 50
    # Read after the renewal: an offset of the new incarnation, translated with its syncs only.
    assert eras.at(2_000).translate(50).offset == 255
    assert eras.at(None).translate(0).offset == 205
    # Without eras the earliest copy would win, and the caught-up group would skip 200 new records.
    assert SyncIndex(OLD + NEW).translate(200).offset == 405


def test_failover_places_a_group_of_the_old_incarnation_before_the_new_copies() -> None:
    ranges = {("t", 0): OLD + NEW}
    eras = era_indexes(ranges, [RENEWAL])
    indexes = {k: eras[k].at(None) for k in eras}
    checkpoints = [
        CheckpointFact("old", "t", "A.t", 0, 200, 1.0, checkpointed_at_ms=900),
        CheckpointFact("new", "t", "A.t", 0, 100, 1.0, checkpointed_at_ms=1_500),
    ]
    plan = failover_plan("A->B", "B", ["old", "new"], checkpoints, indexes, {}, 300.0, eras=eras)
    moves = {m.group: m for m in plan.moves}
    assert moves["old"].new == 200 and moves["old"].position is Position.PAST_END
    assert moves["new"].new == 305 and moves["new"].position is Position.MIRRORED


@st.composite
def two_incarnations(draw: st.DrawFn) -> tuple[list[SyncRange], list[SyncRange], int]:
    old_n = draw(st.integers(1, 50))
    gap = draw(st.integers(0, 10))
    new_n = draw(st.integers(1, 50))
    new_start = draw(st.integers(0, 20))
    old = [SyncRange(0, old_n - 1, 0, old_n - 1)]
    new = [SyncRange(new_start, new_start + new_n - 1, old_n + gap, old_n + gap + new_n - 1)]
    return old, new, old_n + gap


@given(two_incarnations(), st.integers(0, 120))
def test_an_old_offset_never_lands_among_the_new_copies_and_a_new_one_never_among_the_old(
    incarnations: tuple[list[SyncRange], list[SyncRange], int], committed: int
) -> None:
    old, new, boundary = incarnations
    renewal = Renewal("t", 0, "x", at_ms=10, boundary=boundary)
    before = SyncIndex(era_ranges(old + new, [renewal], 5)).translate(committed)
    after = SyncIndex(era_ranges(old + new, [renewal], 10)).translate(committed)
    assert before.offset is not None and before.offset <= boundary  # at most the first new copy: none skipped
    assert after.offset is not None and after.offset >= boundary
