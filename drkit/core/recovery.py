"""The records a failover left behind on the source, and how many of them have reached the target since.

Pure. The gap of a failover is, per source partition, the offsets from the first one the mirror had not
copied when the failover was planned (its RPO report: ``mirrored_up_to``) to the source's end. Which end:

* the failover reached the source: its end then (``GapEnd.AT_FAILOVER``), exact. Records the source took
  after that are not the failover's loss; they are counted apart (``produced_since``): a producer still
  writing to the old source (not fenced) is a split brain the operator must see;
* it did not: the failover knew a lower bound only, so the end is the source's end when it answers again
  (``GapEnd.ON_RETURN``), which also holds whatever was produced there after the failover;
* the source does not answer now either: the end is unknown (``GapEnd.UNKNOWN``), never taken as 0.

The gap closes by copying, through the flow's own mirror (its Spark checkpoint and offset-syncs resume
exactly where it stopped, so nothing is copied twice and the copies land after the records written on
the target since). A record counts as recovered once the target holds its copy: its offset is below the
syncs' next upstream offset, or below the one past the greatest origin header on the target past the
synced end (drkit.core.origin.copied_through). The gap of a flow is that of the first failover that moved
groups after its last failback: the moment the producers moved. After a failback there is none: the
records are where the producers and consumers are. An operator may give the gap up (``drkit recover
--dismiss``: an audit row, ``Action.DISMISS``): it is then ``DISMISSED``, still shown, no longer counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from drkit.core.audit import Action, OperationRecord
from drkit.core.ports import SyncProgress, TopicPartition

#: ``drkit recover``'s exit codes: records of the gap not on the target yet; the gap not known (source down, or
#: the failover recorded no RPO). 0: nothing left behind, or all of it recovered.
RECOVERY_PENDING_EXIT = 32
RECOVERY_UNKNOWN_EXIT = 33


class GapEnd(StrEnum):
    """Where a partition's gap ends, and how that is known."""

    AT_FAILOVER = "at_failover"  # the source answered the failover: its end offset then (exact)
    ON_RETURN = "on_return"  # the source did not answer the failover: its end offset now that it answers
    UNKNOWN = "unknown"  # the source did not answer the failover and does not answer now


class RecoveryVerdict(StrEnum):
    """A flow's gap, as a whole."""

    NO_FAILOVER = "no_failover"  # no failover moved groups since the last failback: nothing was left behind
    NO_RECORD = "no_record"  # the failover recorded no RPO (an earlier drkit): the gap cannot be placed
    UNKNOWN = "unknown"  # the source does not answer: the gap's end is not known
    PENDING = "pending"  # records of the gap are not on the target yet
    RECOVERED = "recovered"  # every record of the gap is on the target
    DISMISSED = "dismissed"  # an operator gave up what was not on the target (drkit recover --dismiss)


@dataclass(frozen=True)
class GapPartition:
    """One source partition's gap: ``[start, end)`` left behind, the target holding copies below
    ``copied_through`` now."""

    topic: str
    partition: int
    start: int
    end: int | None
    copied_through: int
    produced_since: int | None = None  # AT_FAILOVER: records the source took after the failover

    @property
    def left_behind(self) -> int | None:
        """Offsets of the gap (transaction markers count: an upper bound on records); None when unknown."""
        return None if self.end is None else max(0, self.end - self.start)

    @property
    def remaining(self) -> tuple[int, int] | None:
        """The offsets ``[first, end)`` of the gap not on the target yet; None when none are (or unknown)."""
        if self.end is None:
            return None
        first = max(self.start, self.copied_through)
        return (first, self.end) if first < self.end else None

    @property
    def unrecovered(self) -> int | None:
        if self.end is None:
            return None
        remaining = self.remaining
        return 0 if remaining is None else remaining[1] - remaining[0]

    def as_dict(self) -> dict[str, Any]:
        remaining = self.remaining
        return asdict(self) | {
            "left_behind": self.left_behind,
            "unrecovered": self.unrecovered,
            "remaining": None if remaining is None else list(remaining),
        }


@dataclass(frozen=True)
class RecoveryReport:
    """``drkit recover``: the gap the flow's failover left on its source, per partition, and what is left."""

    flow: str
    verdict: RecoveryVerdict
    end_from: GapEnd | None
    source_reachable: bool
    failover_id: str | None = None
    failover_at: str | None = None
    partitions: tuple[GapPartition, ...] = ()
    #: DISMISSED: who gave the gap up, and when (``user@host``, ISO time).
    dismissed_by: str | None = None
    dismissed_at: str | None = None

    @property
    def unrecovered(self) -> int | None:
        """Offsets of the gap not on the target yet; None when that is not known (never a guessed 0)."""
        if self.verdict in (RecoveryVerdict.NO_FAILOVER, RecoveryVerdict.RECOVERED, RecoveryVerdict.DISMISSED):
            return 0
        if self.verdict is not RecoveryVerdict.PENDING:
            return None
        return sum(p.unrecovered or 0 for p in self.partitions)

    @property
    def exit_code(self) -> int:
        if self.verdict is RecoveryVerdict.PENDING:
            return RECOVERY_PENDING_EXIT
        if self.verdict in (RecoveryVerdict.UNKNOWN, RecoveryVerdict.NO_RECORD):
            return RECOVERY_UNKNOWN_EXIT
        return 0

    @property
    def produced_since(self) -> int | None:
        known = [p.produced_since for p in self.partitions if p.produced_since is not None]
        return sum(known) if known else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "verdict": self.verdict.value,
            "end_from": None if self.end_from is None else self.end_from.value,
            "source_reachable": self.source_reachable,
            "failover_id": self.failover_id,
            "failover_at": self.failover_at,
            "dismissed_by": self.dismissed_by,
            "dismissed_at": self.dismissed_at,
            "unrecovered": self.unrecovered,
            "produced_since": self.produced_since,
            "partitions": [p.as_dict() for p in self.partitions],
        }


@dataclass(frozen=True)
class OpenGap:
    """The failover whose gap is open (:func:`open_gap`), and the dismissal that gave it up, if any."""

    failover: OperationRecord
    dismissal: OperationRecord | None = None


def open_gap(records: Iterable[OperationRecord], flow: str) -> OpenGap | None:
    """The failover whose gap is open: the first that moved groups after ``flow``'s last failback that did
    (``records`` newest first, folded); None when the newest such move is a failback, or there is none. With
    the newest dismissal made after that failover."""
    found: OperationRecord | None = None
    dismissals: list[OperationRecord] = []
    for r in records:
        if r.flow != flow:
            continue
        if r.action is Action.DISMISS and not r.dry_run:
            dismissals.append(r)
        if not r.moved_groups:
            continue
        if r.action is Action.FAILBACK:
            break
        found = r  # older failovers replace newer ones: the first after the failback is kept
    if found is None:
        return None
    after = [d for d in dismissals if d.started_at >= found.started_at]
    return OpenGap(found, after[0] if after else None)


def recovery_report(
    flow: str,
    gap: OpenGap | None,
    progress: Mapping[TopicPartition, SyncProgress],
    copied: Mapping[TopicPartition, int],
    source_ends: Mapping[TopicPartition, int] | None,
) -> RecoveryReport:
    """The gap ``gap``'s failover left (:func:`open_gap`) and what of it the target holds now.

    ``progress``: the offset-syncs now; ``copied``: per partition, one past the greatest source offset
    copied past the synced end (origin headers); ``source_ends``: the source's end offsets now, None
    when it does not answer."""
    reachable = source_ends is not None
    if gap is None:
        return RecoveryReport(flow, RecoveryVerdict.NO_FAILOVER, None, reachable)
    failover, dismissal = gap.failover, gap.dismissal
    at = failover.started_at.isoformat()
    by = None if dismissal is None else f"{dismissal.user}@{dismissal.host}"
    when = None if dismissal is None else dismissal.started_at.isoformat()
    rpo = failover.result.get("rpo") or {}
    recorded = rpo.get("partitions")
    if not recorded:
        verdict = RecoveryVerdict.NO_RECORD if dismissal is None else RecoveryVerdict.DISMISSED
        return RecoveryReport(flow, verdict, None, reachable, failover.id, at, (), by, when)
    exact = bool(rpo.get("source_reachable"))
    end_from = GapEnd.AT_FAILOVER if exact else GapEnd.ON_RETURN if reachable else GapEnd.UNKNOWN
    partitions = []
    for row in sorted(recorded, key=lambda r: (str(r["topic"]), int(r["partition"]))):
        key: TopicPartition = (str(row["topic"]), int(row["partition"]))
        start = int(row["mirrored_up_to"])
        now = None if source_ends is None else source_ends.get(key)
        end: int | None
        since: int | None = None
        if exact and row.get("source_end") is not None:
            end = int(row["source_end"])
            since = None if now is None else max(0, now - end)
        else:
            end = now if end_from is GapEnd.ON_RETURN else None
        sync = progress.get(key)
        through = max(sync.next_upstream if sync is not None else 0, copied.get(key, 0))
        partitions.append(GapPartition(key[0], key[1], start, end, through, since))
    if dismissal is not None:
        return RecoveryReport(
            flow, RecoveryVerdict.DISMISSED, end_from, reachable, failover.id, at, tuple(partitions), by, when
        )
    if any(p.end is None for p in partitions):
        verdict = RecoveryVerdict.UNKNOWN
    elif any(p.remaining is not None for p in partitions):
        verdict = RecoveryVerdict.PENDING
    else:
        verdict = RecoveryVerdict.RECOVERED
    return RecoveryReport(flow, verdict, end_from, reachable, failover.id, at, tuple(partitions))


def failback_note(report: RecoveryReport, origin: str, leaving: str) -> str | None:
    """The failback plan's line for the gap of the failover it ends (None: nothing of it is missing on
    ``leaving``). Records of the gap not on ``leaving`` stay on ``origin`` and were never read on ``leaving``: a
    group moved back resumes there at the first record not copied (its offset on ``leaving`` lies past
    everything copied, which translates back to it) or further, at what it had processed on ``origin`` before
    the failover; so it reads on ``origin`` those it had not processed, once. Recovered ones it read on
    ``leaving`` are not read again."""
    if report.verdict in (RecoveryVerdict.NO_FAILOVER, RecoveryVerdict.RECOVERED):
        return None
    read_there = f"the groups moved back read on {origin} those of them they had not processed there"
    if report.verdict in (RecoveryVerdict.NO_RECORD, RecoveryVerdict.UNKNOWN):
        return (
            f"the records failover {report.failover_id} left on {origin} are not known ({report.verdict.value}); "
            f"any not copied to {leaving} are still on {origin}: {read_there}"
        )
    left = [p for p in report.partitions if p.remaining is not None]
    if not left:
        return None
    shown = ", ".join(f"{p.topic}/{p.partition} {p.remaining[0]}-{p.remaining[1] - 1}" for p in left[:5] if p.remaining)
    more = f" and {len(left) - 5} more partitions" if len(left) > 5 else ""
    count = sum(p.unrecovered or 0 for p in left)
    given_up = f"dismissed by {report.dismissed_by}; " if report.verdict is RecoveryVerdict.DISMISSED else ""
    return (
        f"{count} offsets failover {report.failover_id} left on {origin} are not on {leaving} ({shown}{more}): "
        f"{given_up}{read_there}"
    )
