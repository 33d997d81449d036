"""The probe drill's account (drkit.core.probe): every record in one class, counted exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.drill import DrillVerdict
from drkit.core.probe import (
    DRILL_GROUP_PREFIX,
    PartitionEvidence,
    PartitionProbe,
    ProbeBudget,
    ProbeReason,
    ReadRecord,
    SourceRecord,
    drill_group,
    drill_group_prefix,
    judge_partition,
    judge_probe,
    partition_done,
    record_digest,
)


def source(start: int, end: int) -> tuple[SourceRecord, ...]:
    return tuple(SourceRecord(o, f"d{o}", 1_000 + o) for o in range(start, end))


def copies(origins: range | list[int], at: int = 100) -> tuple[ReadRecord, ...]:
    return tuple(ReadRecord(at + i, o, f"d{o}") for i, o in enumerate(origins))


def evidence(
    read: tuple[ReadRecord, ...], committed: int = 10, window_end: int = 20, mirrored: int = 20, low: int = 0
) -> PartitionEvidence:
    return PartitionEvidence("t", "A.t", 0, committed, 100, window_end, source(low, window_end), read, mirrored)


def test_a_correct_mirror_verifies_every_record_of_the_window() -> None:
    p = judge_partition(evidence(copies(range(10, 20))))
    assert (p.expected, p.verified, p.missed, p.reread, p.mismatched, p.not_mirrored) == (10, 10, 0, 0, 0, 0)


def test_records_before_the_committed_offset_are_re_reads() -> None:
    p = judge_partition(evidence(copies(range(7, 20))))
    assert (p.verified, p.reread, p.missed) == (10, 3, 0)


def test_records_deleted_on_the_target_are_missed_with_their_ranges() -> None:
    # The target lost the copies of 10..13: the drill group starts at the earliest copy left, of 14.
    p = judge_partition(evidence(copies(range(14, 20))))
    assert (p.verified, p.missed, p.not_mirrored, p.missed_offsets) == (6, 4, 0, ((10, 13),))


def test_records_the_group_went_past_are_missed_even_where_the_syncs_lag() -> None:
    # Copies are read past the synced end (syncs follow the copies): 10..13 are gone, and the group went past.
    p = judge_partition(evidence(copies(range(14, 20)), mirrored=12))
    assert (p.missed, p.not_mirrored, p.missed_offsets) == (4, 0, ((10, 13),))


def test_records_the_mirror_never_copied_are_not_mirrored_and_dated() -> None:
    # The mirror stopped after 15: 16..19 never arrived, and the syncs say so.
    p = judge_partition(evidence(copies(range(10, 16)), mirrored=16))
    assert (p.verified, p.missed, p.not_mirrored, p.not_mirrored_offsets) == (6, 0, 4, ((16, 19),))
    assert p.oldest_not_mirrored_ms == 1_016


def test_records_the_syncs_say_were_mirrored_and_were_not_read_are_missed() -> None:
    p = judge_partition(evidence(copies(range(10, 16)), mirrored=18))
    assert (p.missed, p.not_mirrored, p.missed_offsets) == (2, 2, ((16, 17),))


def test_a_copy_whose_content_differs_is_mismatched_and_its_record_missed() -> None:
    read = list(copies(range(10, 20)))
    read[3] = ReadRecord(read[3].offset, 13, "tampered")
    p = judge_partition(evidence(tuple(read)))
    assert (p.verified, p.mismatched, p.missed, p.missed_offsets) == (9, 1, 1, ((13, 13),))


def test_records_without_an_origin_are_placed_by_their_content() -> None:
    read = tuple(ReadRecord(100 + i, None, f"d{o}") for i, o in enumerate(range(8, 20)))
    p = judge_partition(evidence(read))
    assert (p.verified, p.reread, p.mismatched) == (10, 2, 0)
    stranger = judge_partition(evidence((*read, ReadRecord(200, None, "unknown"))))
    assert stranger.mismatched == 1


def test_a_second_copy_of_a_record_is_a_re_read() -> None:
    p = judge_partition(evidence(copies([*range(10, 15), 14, *range(15, 20)])))
    assert (p.verified, p.reread) == (10, 1)


def test_records_past_the_window_are_not_judged() -> None:
    p = judge_partition(evidence(copies(range(10, 25))))
    assert (p.verified, p.beyond, p.reread) == (10, 5, 0)


@given(
    committed=st.integers(0, 30),
    length=st.integers(0, 30),
    start=st.integers(0, 60),
    count=st.integers(0, 60),
    mirrored=st.integers(0, 80),
    tampered=st.sets(st.integers(0, 80), max_size=5),
)
def test_every_window_record_and_every_record_read_is_in_exactly_one_class(
    committed: int, length: int, start: int, count: int, mirrored: int, tampered: set[int]
) -> None:
    window_end = committed + length
    low = min(committed, start)
    read = tuple(
        ReadRecord(i, o, "bad" if o in tampered else f"d{o}") for i, o in enumerate(range(start, start + count))
    )
    e = PartitionEvidence("t", "A.t", 0, committed, 0, window_end, source(low, window_end), read, mirrored)
    p = judge_partition(e)
    assert p.expected == length
    assert p.verified + p.missed + p.not_mirrored == p.expected
    assert p.verified + p.reread + p.mismatched + p.beyond == p.read == count
    assert sum(b - a + 1 for a, b in p.missed_offsets) == p.missed
    assert sum(b - a + 1 for a, b in p.not_mirrored_offsets) == p.not_mirrored


def probe_of(**counts: int) -> PartitionProbe:
    base = dict(expected=10, read=10, verified=10, missed=0, reread=0, mismatched=0, not_mirrored=0, beyond=0)
    base.update(counts)
    return PartitionProbe("t", "A.t", 0, 10, 100, 20, **base)


def test_the_verdict_fails_on_every_loss_and_on_re_reads_past_the_budget() -> None:
    assert judge_probe([probe_of()], [], ProbeBudget()) == (DrillVerdict.PASSED, ())
    for field, reason in (
        ("missed", ProbeReason.MISSED),
        ("mismatched", ProbeReason.MISMATCHED),
        ("not_mirrored", ProbeReason.NOT_MIRRORED),
        ("reread", ProbeReason.REREAD),
    ):
        verdict, reasons = judge_probe([probe_of(**{field: 2})], [], ProbeBudget())
        assert verdict is DrillVerdict.FAILED and [r for r, _ in reasons] == [reason]
        assert "t/0: 2" in reasons[0][1]
    assert judge_probe([probe_of(reread=2)], [], ProbeBudget(reread=2))[0] is DrillVerdict.PASSED
    verdict, reasons = judge_probe([probe_of()], ["stale: too old"], ProbeBudget())
    assert verdict is DrillVerdict.FAILED and reasons == ((ProbeReason.REFUSED, "stale: too old"),)


def test_a_partition_is_done_at_its_window_s_last_copy_or_with_nothing_to_verify_at_its_end() -> None:
    assert not partition_done(10, 20, copies(range(10, 19)), at_end=True)
    assert partition_done(10, 20, copies(range(10, 20)), at_end=False)
    assert partition_done(10, 10, (), at_end=True) and not partition_done(10, 10, (), at_end=False)


def test_drill_groups_are_named_apart_from_the_group_and_from_other_groups() -> None:
    name = drill_group("A->B", "billing", "abc")
    assert name.startswith(DRILL_GROUP_PREFIX) and name.startswith(drill_group_prefix("A->B", "billing"))
    assert not drill_group("A->B", "billing2", "x").startswith(drill_group_prefix("A->B", "billing"))


def test_the_digest_ignores_drkit_s_headers_and_nothing_else() -> None:
    plain = record_digest(b"k", b"v", [("h", b"1")])
    assert record_digest(b"k", b"v", [("h", b"1"), ("drkit.origin", b"A:3"), ("drkit.epoch", b"2")]) == plain
    assert len({plain, record_digest(b"k", b"v", [("h", b"2")]), record_digest(None, b"v", [("h", b"1")])}) == 3
    assert record_digest(b"kv", b"", None) != record_digest(b"k", b"v", None)
