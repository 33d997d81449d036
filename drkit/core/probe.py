"""A probe drill's account: what a failover of one group now would make it read on the target, record by record.

Pure. The probe (drkit.drill.probe) plans the group's failover as ``drkit failover`` would, commits the planned
offsets to a drill group on the target (never the group itself, never a record to a data topic), reads from
there as the group would, and reads the source. This module judges what was read, per partition:

- The **window** is the source's records from the group's committed offset C on the source (read when the
  probe starts) up to the source's end then, at most ``max_records`` of them: what the group has not processed
  and a failover must give it.
- Every record the drill group reads lands in exactly one class: **verified** (a copy of a window record,
  content equal), **re-read** (a copy of a record before C: the group had processed it), **mismatched** (its
  content differs from the source record its origin names, or no source record matches it), or **beyond** the
  window (read after it; not judged).
- Every window record lands in exactly one class: **verified** (a copy was read), **missed** (no copy was read,
  and the consumer went past it, or the offset-syncs say it was mirrored: the group would never read it), or
  **not mirrored** (no copy arrived before the probe's wait ended, past everything mirrored: the RPO of a
  failover now).
- A record is placed by its last ``drkit.origin`` header (drkit.core.origin); a record without one (another
  tool's copy) by its content: the lowest unclaimed source record with the same :func:`record_digest`.

Missed, mismatched and not-mirrored records fail the probe; so do re-reads beyond the budget (0 by default: a
group whose checkpoint lags its commits re-reads what it committed since, as a failover now would) and a plan
``drkit failover`` would refuse.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from drkit.core.drill import DrillVerdict

#: The ``disaster`` of a probe's row in the ``drills`` table (the destructive drills name a DisasterKind).
PROBE_DISASTER = "probe"
#: The prefix of every drill group: ``drkit.drill.<flow>.<group>.<probe id>``. A group with it is drkit's own.
DRILL_GROUP_PREFIX = "drkit.drill."
#: Headers drkit adds to a copy (origin, epoch): not part of a record's content.
DRKIT_HEADER_PREFIX = "drkit."


def drill_group_prefix(flow: str, group: str) -> str:
    """The prefix of the drill groups of ``group`` in ``flow`` (an interrupted probe's are deleted by the next)."""
    return f"{DRILL_GROUP_PREFIX}{flow}.{group}."


def drill_group(flow: str, group: str, probe_id: str) -> str:
    """The target group one probe commits the planned offsets to and reads as."""
    return f"{drill_group_prefix(flow, group)}{probe_id}"


def record_digest(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | str | None]] | None
) -> str:
    """A record's content as one string: key, value and the headers drkit did not add, in order."""
    h = hashlib.sha256()
    for part in (key, value):
        h.update(b"-" if part is None else b"+%d:" % len(part) + part)
    for name, v in headers or ():
        if name.startswith(DRKIT_HEADER_PREFIX):
            continue
        raw = v.encode() if isinstance(v, str) else v
        h.update(b"h%d:" % len(name) + name.encode())
        h.update(b"-" if raw is None else b"+%d:" % len(raw) + raw)
    return h.hexdigest()


@dataclass(frozen=True)
class SourceRecord:
    """A record read at ``offset``: its content (:func:`record_digest`), its timestamp, and the source offset its
    ``drkit.origin`` header names (None: not asked for, or none)."""

    offset: int
    digest: str
    timestamp_ms: int
    origin: int | None = None


@dataclass(frozen=True)
class ReadRecord:
    """A record the drill group read on the target: its offset there, its origin offset (None: no header of the
    flow's source), its content."""

    offset: int
    origin: int | None
    digest: str


class ProbeReason(StrEnum):
    MISSED = "missed"  # window records the group would never read on the target
    REREAD = "reread"  # records read that the group had processed on the source, beyond the budget
    MISMATCHED = "mismatched"  # records read whose content is not the source's
    NOT_MIRRORED = "not_mirrored"  # window records not on the target by the end of the wait (the RPO)
    REFUSED = "refused"  # drkit failover would refuse the group now


@dataclass(frozen=True)
class PartitionEvidence:
    """What the probe gathered for one partition of the group."""

    source_topic: str
    target_topic: str
    partition: int
    committed: int  # the group's committed offset on the source when the probe started
    resume: int  # the offset failover would commit on the target (the drill group's start)
    window_end: int  # exclusive: min(the source's end when the probe started, committed + max_records)
    source: tuple[SourceRecord, ...]  # the source's records from min(committed, lowest origin read) to window_end
    read: tuple[ReadRecord, ...]  # as the drill group read them, in order
    mirrored_through: int  # one past the greatest source offset the offset-syncs say is copied, at the end


@dataclass(frozen=True)
class PartitionProbe:
    source_topic: str
    target_topic: str
    partition: int
    committed: int
    resume: int
    window_end: int
    expected: int  # window records on the source
    read: int
    verified: int
    missed: int
    reread: int
    mismatched: int
    not_mirrored: int
    beyond: int
    missed_offsets: tuple[tuple[int, int], ...] = ()  # source offset ranges, inclusive
    not_mirrored_offsets: tuple[tuple[int, int], ...] = ()
    oldest_not_mirrored_ms: int | None = None  # the source timestamp of the first not-mirrored record


def offset_ranges(offsets: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """``offsets`` as inclusive ranges of consecutive offsets, in order."""
    out: list[tuple[int, int]] = []
    for o in sorted(offsets):
        if out and out[-1][1] == o - 1:
            out[-1] = (out[-1][0], o)
        else:
            out.append((o, o))
    return tuple(out)


def judge_partition(e: PartitionEvidence) -> PartitionProbe:
    """The account of one partition (module invariants)."""
    by_offset = {r.offset: r for r in e.source}
    by_digest: dict[str, list[int]] = {}
    for r in sorted(e.source, key=lambda r: r.offset):
        by_digest.setdefault(r.digest, []).append(r.offset)
    window = {r.offset for r in e.source if e.committed <= r.offset < e.window_end}
    verified: set[int] = set()
    reread = mismatched = beyond = 0
    passed = -1  # the greatest source offset a record read was a copy of
    for rec in e.read:
        origin = rec.origin
        if origin is None:  # placed by content: the lowest source record with it not placed yet
            candidates = [o for o in by_digest.get(rec.digest, ()) if o not in verified]
            if not candidates:
                mismatched += 1
                continue
            origin = candidates[0]
        elif origin < e.window_end and (origin not in by_offset or by_offset[origin].digest != rec.digest):
            mismatched += 1
            passed = max(passed, origin)
            continue
        passed = max(passed, origin)
        if origin < e.committed:
            reread += 1
        elif origin >= e.window_end:
            beyond += 1
        elif origin in verified:
            reread += 1  # a second copy of one record: the group would process it twice
        else:
            verified.add(origin)
    unread = window - verified
    through = max(e.mirrored_through, passed + 1)
    missed = {o for o in unread if o < through}
    not_mirrored = unread - missed
    first = min(not_mirrored, default=None)
    return PartitionProbe(
        e.source_topic,
        e.target_topic,
        e.partition,
        e.committed,
        e.resume,
        e.window_end,
        len(window),
        len(e.read),
        len(verified),
        len(missed),
        reread,
        mismatched,
        len(not_mirrored),
        beyond,
        offset_ranges(missed),
        offset_ranges(not_mirrored),
        None if first is None else by_offset[first].timestamp_ms,
    )


def partition_done(committed: int, window_end: int, read: Sequence[ReadRecord], at_end: bool) -> bool:
    """Whether the drill group has read all it needs of a partition: a copy of the window's last record (or
    past it), or, with nothing to verify, the target partition's end (``at_end``: anything there is a re-read)."""
    if window_end <= committed:
        return at_end
    return any(r.origin is not None and r.origin >= window_end - 1 for r in read)


@dataclass(frozen=True)
class ProbeBudget:
    reread: int = 0  # re-read records allowed over the whole group (a lagging checkpoint's commits)


@dataclass(frozen=True)
class ProbeTimings:
    """Milliseconds of each step, as a failover would take them (None: never reached)."""

    plan_ms: int
    commit_ms: int
    first_record_ms: int | None  # from the commit to the first record the drill group read
    verified_ms: int | None  # from the commit to every window record read (None: some never were)

    @property
    def rto_ms(self) -> int | None:
        """From the start of the plan to the first record read on the target."""
        return None if self.first_record_ms is None else self.plan_ms + self.commit_ms + self.first_record_ms


def judge_probe(
    partitions: Sequence[PartitionProbe], refusals: Sequence[str], budget: ProbeBudget
) -> tuple[DrillVerdict, tuple[tuple[ProbeReason, str], ...]]:
    """Pass, or fail with every reason that applies (module docstring)."""
    reasons: list[tuple[ProbeReason, str]] = [(ProbeReason.REFUSED, r) for r in refusals]

    def total(name: str) -> int:
        return sum(int(getattr(p, name)) for p in partitions)

    def where(name: str) -> str:
        return ", ".join(f"{p.source_topic}/{p.partition}: {getattr(p, name)}" for p in partitions if getattr(p, name))

    if total("missed"):
        reasons.append(
            (ProbeReason.MISSED, f"{total('missed')} records the group would never read ({where('missed')})")
        )
    if total("mismatched"):
        detail = f"{total('mismatched')} records read differ from the source ({where('mismatched')})"
        reasons.append((ProbeReason.MISMATCHED, detail))
    if total("not_mirrored"):
        detail = f"{total('not_mirrored')} records not on the target by the end of the wait ({where('not_mirrored')})"
        reasons.append((ProbeReason.NOT_MIRRORED, detail))
    if total("reread") > budget.reread:
        detail = f"{total('reread')} records re-read, {budget.reread} allowed ({where('reread')})"
        reasons.append((ProbeReason.REREAD, detail))
    return (DrillVerdict.FAILED if reasons else DrillVerdict.PASSED), tuple(reasons)


@dataclass(frozen=True)
class ProbeReport:
    """One probe of one group: every partition's account, the verdict, and the time of each step."""

    id: str
    flow: str
    group: str
    drill_group: str
    verdict: DrillVerdict
    reasons: tuple[tuple[ProbeReason, str], ...]
    partitions: tuple[PartitionProbe, ...]
    timings: ProbeTimings
    started_ms: int
    finished_ms: int
    drkit_version: str
    warnings: tuple[str, ...] = field(default=())

    def total(self, name: str) -> int:
        return sum(int(getattr(p, name)) for p in self.partitions)

    @property
    def rpo_ms(self) -> int:
        """The age of the oldest window record not mirrored, when the probe ended (0: none)."""
        oldest = [p.oldest_not_mirrored_ms for p in self.partitions if p.oldest_not_mirrored_ms is not None]
        return max(0, self.finished_ms - min(oldest)) if oldest else 0

    def as_dict(self) -> dict[str, Any]:
        counts = ("expected", "read", "verified", "missed", "reread", "mismatched", "not_mirrored", "beyond")
        return {
            "id": self.id,
            "flow": self.flow,
            "group": self.group,
            "drill_group": self.drill_group,
            "verdict": self.verdict.value,
            "reasons": [{"reason": r.value, "detail": d} for r, d in self.reasons],
            "records": {name: self.total(name) for name in counts},
            "rpo": {"records": self.total("not_mirrored"), "ms": self.rpo_ms},
            "timings_ms": {**asdict(self.timings), "rto_ms": self.timings.rto_ms},
            "partitions": [asdict(p) for p in self.partitions],
            "warnings": list(self.warnings),
            "started_ms": self.started_ms,
            "finished_ms": self.finished_ms,
            "drkit_version": self.drkit_version,
        }
