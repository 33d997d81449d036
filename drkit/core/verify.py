"""``drkit verify``: a topic's offset-syncs proven record by record over a range of source offsets.

Pure. The offset-syncs claim that source offset u landed at target offset d (drkit.core.offsets.SyncRange);
failover and failback translate with that claim. For every source record in the range this module checks the
claim against the records themselves (read by drkit.operate.verify), and places the record in exactly one
class:

- **verified**: the target holds a record at d, a copy of u (its ``drkit.origin`` header names u, or it has
  none: another tool's copy) with the same content (drkit.core.probe.record_digest: key, value, the headers
  drkit did not add);
- **missing**: no record at d (deleted or truncated on the target, or past its end);
- **misplaced**: the record at d is a copy of another source offset (its origin header says which);
- **different**: the record at d is u's copy by its header, or has none, and its content is not u's;
- **unsynced**: u is below the syncs' end but no sync describes it (a hole in the offset-syncs);
- **not mirrored**: u is at or past the syncs' end (not copied yet: the flow's lag, not an error).

A **sample** (``drkit verify --sample N``) judges the same way the records of a few windows of consecutive offsets
spread at random over the partition's whole log (:func:`sample_windows`; its seed is reported, so a run can be
repeated exactly): a pass says those records are right, not the records between them.

Copies of u at another target offset than d are counted apart (``duplicates``: an at-least-once retry leaves
them; translation never lands on them). Missing, misplaced, different and unsynced records fail the verify,
each reported as exact ranges of source offsets.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from drkit.core.offsets import SyncRange
from drkit.core.probe import SourceRecord, offset_ranges


class Finding(StrEnum):
    VERIFIED = "verified"
    MISSING = "missing"
    MISPLACED = "misplaced"
    DIFFERENT = "different"
    UNSYNCED = "unsynced"
    NOT_MIRRORED = "not_mirrored"


#: The findings that fail a verify.
FAILING = (Finding.MISSING, Finding.MISPLACED, Finding.DIFFERENT, Finding.UNSYNCED)
#: ``drkit verify``'s exit code when a record fails (0 when every record passes).
VERIFY_FAILED_EXIT = 31


@dataclass(frozen=True)
class PartitionEvidence:
    """What was read for one partition: the source's records in ``[start, end)``, the syncs describing any of
    them, the syncs' end (one past the greatest source offset they describe), and the target's records over
    the syncs' target offsets (``SourceRecord.origin`` read from their origin headers)."""

    source_topic: str
    target_topic: str
    partition: int
    start: int
    end: int
    source: tuple[SourceRecord, ...]
    syncs: tuple[SyncRange, ...]
    synced_through: int
    target: tuple[SourceRecord, ...]
    #: A sample's windows ``[lo, hi)`` inside ``[start, end)``: only their records are judged (empty: all).
    windows: tuple[tuple[int, int], ...] = ()

    def judged(self, offset: int) -> bool:
        if not self.start <= offset < self.end:
            return False
        return not self.windows or any(lo <= offset < hi for lo, hi in self.windows)


Window = tuple[int, int]


def sample_windows(start: int, end: int, records: int, window: int, seed: int) -> tuple[Window, ...]:
    """About ``records`` offsets of ``[start, end)`` as windows ``[lo, hi)`` of ``window`` consecutive offsets,
    drawn without overlap from ``seed`` and returned in order; the whole of ``[start, end)`` when it is not
    longer than ``records``. The same arguments give the same windows."""
    if end - start <= records:
        return ((start, end),) if end > start else ()
    slots = -(-(end - start) // window)  # the last slot may be shorter
    chosen = sorted(random.Random(seed).sample(range(slots), min(slots, -(-records // window))))
    return tuple((start + s * window, min(end, start + (s + 1) * window)) for s in chosen)


def downstream(syncs: Sequence[SyncRange], upstream: int) -> int | None:
    """Where the syncs say ``upstream`` landed (None: no sync describes it)."""
    for r in syncs:
        if r.upstream_first <= upstream <= r.upstream_last:
            return r.downstream_of(upstream)
    return None


def target_span(syncs: Iterable[SyncRange], start: int, end: int) -> tuple[int, int] | None:
    """The target offsets ``[first, last + 1)`` the syncs give the source offsets in ``[start, end)`` (None: none)."""
    lows, highs = [], []
    for r in syncs:
        lo, hi = max(start, r.upstream_first), min(end - 1, r.upstream_last)
        if lo <= hi:
            lows.append(r.downstream_of(lo))
            highs.append(r.downstream_of(hi))
    return (min(lows), max(highs) + 1) if lows else None


@dataclass(frozen=True)
class PartitionVerify:
    source_topic: str
    target_topic: str
    partition: int
    start: int
    end: int
    records: int  # source records in the range (offsets with no record, markers or compacted, are not counted)
    counts: dict[Finding, int]
    ranges: dict[Finding, tuple[tuple[int, int], ...]]  # the failing findings' source offsets, inclusive
    duplicates: int  # copies of a range record at another target offset than the syncs give
    windows: tuple[Window, ...] = ()  # a sample's windows (empty: the whole range was judged)

    @property
    def ok(self) -> bool:
        return not any(self.counts[f] for f in FAILING)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source_topic": self.source_topic,
            "target_topic": self.target_topic,
            "partition": self.partition,
            "start": self.start,
            "end": self.end,
            "records": self.records,
            **{f.value: self.counts[f] for f in Finding},
            "duplicates": self.duplicates,
            "ranges": {f.value: [list(r) for r in rs] for f, rs in self.ranges.items() if rs},
            "ok": self.ok,
            **({"windows": [list(w) for w in self.windows]} if self.windows else {}),
        }


def judge_partition(e: PartitionEvidence) -> PartitionVerify:
    """Every source record of the range in exactly one class (module docstring)."""
    at = {r.offset: r for r in e.target}
    placed: dict[Finding, list[int]] = {f: [] for f in Finding}
    records = [r for r in e.source if e.judged(r.offset)]
    for s in records:
        d = downstream(e.syncs, s.offset)
        if d is None:
            placed[Finding.NOT_MIRRORED if s.offset >= e.synced_through else Finding.UNSYNCED].append(s.offset)
            continue
        copy = at.get(d)
        if copy is None:
            finding = Finding.MISSING
        elif copy.origin is not None and copy.origin != s.offset:
            finding = Finding.MISPLACED
        elif copy.digest != s.digest:
            finding = Finding.DIFFERENT
        else:
            finding = Finding.VERIFIED
        placed[finding].append(s.offset)
    wanted = {s.offset for s in records}
    duplicates = sum(
        1 for r in e.target if r.origin is not None and r.origin in wanted and downstream(e.syncs, r.origin) != r.offset
    )
    return PartitionVerify(
        e.source_topic,
        e.target_topic,
        e.partition,
        e.start,
        e.end,
        len(records),
        {f: len(offsets) for f, offsets in placed.items()},
        {f: offset_ranges(placed[f]) for f in FAILING},
        duplicates,
        e.windows,
    )


@dataclass(frozen=True)
class VerifyReport:
    """``drkit verify``: per partition, every source record of the range accounted for."""

    flow: str
    source_topic: str
    target_topic: str
    partitions: tuple[PartitionVerify, ...]
    #: A sample's seed (``--seed`` repeats it); None: whole ranges were verified.
    sample_seed: int | None = None

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else VERIFY_FAILED_EXIT

    def total(self, finding: Finding) -> int:
        return sum(p.counts[finding] for p in self.partitions)

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "source_topic": self.source_topic,
            "target_topic": self.target_topic,
            "verdict": "pass" if self.ok else "fail",
            "records": sum(p.records for p in self.partitions),
            **{f.value: self.total(f) for f in Finding},
            "duplicates": sum(p.duplicates for p in self.partitions),
            "sample_seed": self.sample_seed,
            "partitions": [p.as_dict() for p in self.partitions],
        }
