"""drkit.core.verify's account: every source record of the range in exactly one class, the failing ones as
exact ranges of source offsets; a target that holds exactly the copies the syncs describe verifies whole."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.offsets import SyncRange
from drkit.core.probe import SourceRecord
from drkit.core.verify import Finding, PartitionEvidence, judge_partition, target_span


def src(offset: int, digest: str | None = None) -> SourceRecord:
    return SourceRecord(offset, digest or f"d{offset}", 0)


def copy(at: int, origin: int | None, digest: str) -> SourceRecord:
    return SourceRecord(at, digest, 0, origin)


def evidence(
    source: list[SourceRecord], syncs: list[SyncRange], target: list[SourceRecord], **kw: int
) -> PartitionEvidence:
    start, end = kw.get("start", 0), kw.get("end", 100)
    return PartitionEvidence(
        "t", "A.t", 0, start, end, tuple(source), tuple(syncs), kw.get("through", 100), tuple(target)
    )


def test_each_failure_is_named_with_its_exact_source_offsets() -> None:
    source = [src(o) for o in range(20)]
    syncs = [SyncRange(0, 9, 100, 109), SyncRange(12, 14, 110, 112)]  # 10-11 synced by nothing: a hole
    target = [copy(100 + o, o, f"d{o}") for o in range(10)]
    target[3] = copy(103, None, "d3")  # another tool's copy (no header): placed by content, equal
    target[4] = copy(104, None, "tampered")  # no header, other content
    target[5] = copy(105, 6, "d6")  # a copy of 6 where 5 should be
    del target[7:9]  # 7, 8 gone (deleted on the target)
    target += [copy(110, 12, "d12"), copy(111, 13, "x"), copy(112, 14, "d14"), copy(150, 2, "d2")]  # 2 again
    p = judge_partition(evidence(source, syncs, target, start=0, end=20, through=15))
    assert p.records == 20 and sum(p.counts.values()) == 20
    assert p.counts == {
        Finding.VERIFIED: 8,  # 0-3, 6, 9, 12, 14
        Finding.MISSING: 2,
        Finding.MISPLACED: 1,
        Finding.DIFFERENT: 2,  # 4 (by content), 13 (by header and content)
        Finding.UNSYNCED: 2,
        Finding.NOT_MIRRORED: 5,  # 15-19: past the syncs' end
    }
    assert p.ranges == {
        Finding.MISSING: ((7, 8),),
        Finding.MISPLACED: ((5, 5),),
        Finding.DIFFERENT: ((4, 4), (13, 13)),
        Finding.UNSYNCED: ((10, 11),),
    }
    assert p.duplicates == 2 and not p.ok  # 2 at 150, and the copy of 6 at 105 (6 is at 106 too)


def test_the_range_limits_what_is_judged_and_what_is_read() -> None:
    syncs = [SyncRange(0, 49, 1000, 1049), SyncRange(50, 99, 2000, 2049)]
    assert target_span(syncs, 40, 60) == (1040, 2010)
    assert target_span(syncs, 100, 120) is None
    source = [src(o) for o in range(100)]
    target = [copy(1000 + o, o, f"d{o}") for o in range(50)] + [copy(2000 + o - 50, o, f"d{o}") for o in range(50, 100)]
    p = judge_partition(evidence(source, syncs, target, start=40, end=60))
    assert (p.records, p.counts[Finding.VERIFIED], p.ok) == (20, 20, True)


@given(
    st.integers(1, 60),
    st.sets(st.integers(0, 79)),
    st.sets(st.integers(0, 79)),
    st.integers(0, 80),
    st.integers(0, 80),
)
def test_every_record_is_in_one_class_and_a_faithful_copy_verifies(
    length: int, lost: set[int], gaps: set[int], start: int, span: int
) -> None:
    source = [src(o) for o in range(80) if o not in gaps]  # gaps: offsets with no record (markers, compaction)
    offsets = [r.offset for r in source]
    syncs = [SyncRange(o, o, 500 + o, 500 + o) for o in offsets[:length]]
    faithful = [copy(500 + o, o, f"d{o}") for o in offsets[:length]]
    end = start + span
    p = judge_partition(
        evidence(
            source, syncs, faithful, start=start, end=end, through=offsets[length - 1] + 1 if offsets[:length] else 0
        )
    )
    in_range = [o for o in offsets if start <= o < end]
    assert p.records == len(in_range) and sum(p.counts.values()) == len(in_range)
    assert p.ok and p.counts[Finding.VERIFIED] == len([o for o in in_range if o in offsets[:length]])
    damaged = [c for c in faithful if c.origin not in lost]
    q = judge_partition(
        evidence(
            source, syncs, damaged, start=start, end=end, through=offsets[length - 1] + 1 if offsets[:length] else 0
        )
    )
    gone = sorted(o for o in in_range if o in lost and o in offsets[:length])
    assert q.counts[Finding.MISSING] == len(gone) and sum(b - a + 1 for a, b in q.ranges[Finding.MISSING]) == len(gone)


@given(
    st.integers(0, 1000),
    st.integers(0, 5000),
    st.integers(1, 400),
    st.integers(1, 50),
    st.integers(0, 2**31),
)
def test_a_sample_is_whole_windows_inside_the_log_in_order_and_the_same_for_a_seed(
    start: int, length: int, records: int, window: int, seed: int
) -> None:
    from drkit.core.verify import sample_windows

    end = start + length
    windows = sample_windows(start, end, records, window, seed)
    assert windows == sample_windows(start, end, records, window, seed)
    if length <= records:
        assert windows == (((start, end),) if length else ())
        return
    assert all(start <= lo < hi <= end and hi - lo <= window for lo, hi in windows)
    assert all(a[1] <= b[0] for a, b in pairwise(windows))  # ordered, no overlap
    slots = -(-length // window)
    assert len(windows) == min(slots, -(-records // window))
    assert all((lo - start) % window == 0 for lo, _ in windows)


def test_a_sample_judges_only_its_windows_records() -> None:
    from dataclasses import replace

    source = [src(o) for o in range(100)]
    target = [copy(o, o, f"d{o}") for o in range(100) if o != 15]  # the copy of 15 is gone
    e = evidence(source, [SyncRange(0, 99, 0, 99)], target)
    v = judge_partition(replace(e, windows=((0, 10), (40, 50))))
    assert v.records == 20 and v.ok and v.counts[Finding.VERIFIED] == 20 and v.windows == ((0, 10), (40, 50))
    assert v.as_dict()["windows"] == [[0, 10], [40, 50]]
    v = judge_partition(replace(e, windows=((10, 20),)))
    assert v.ranges[Finding.MISSING] == ((15, 15),) and v.records == 10
    assert not judge_partition(e).ok  # the whole range sees it too
