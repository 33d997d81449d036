"""What the long-running jobs report back: a mirror's figures per flow, a translator run's figures,
what a ``maintain`` run did.

Frozen values the facade returns to the CLI, notebooks and drills; the jobs build them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from drkit.core.checkpoints import Finding


@dataclass(frozen=True)
class MirrorSummary:
    """One flow's mirror run so far."""

    flow: str
    batches: int
    skipped_batches: int  # batches recorded before a restart, not produced again
    records: int
    bytes: int
    sync_ranges: int
    created_topics: tuple[str, ...]
    #: Spark executor ids whose copy tasks copied batches (``driver`` in local mode, whose one executor is
    #: the driver's JVM; the copying processes are still Spark's Python workers)
    copy_executors: frozenset[str] = frozenset()
    #: batches with records whose copy the driver made itself, without a Spark job (local mode only)
    driver_batches: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "batches": self.batches,
            "skipped_batches": self.skipped_batches,
            "records": self.records,
            "bytes": self.bytes,
            "sync_ranges": self.sync_ranges,
            "created_topics": list(self.created_topics),
            "copy_executors": sorted(self.copy_executors),
            "driver_batches": self.driver_batches,
        }


@dataclass(frozen=True)
class TranslationRun:
    """One run of a flow's translator."""

    flow: str
    groups: int
    checkpoints: int
    appended: int
    synced_groups: tuple[str, ...]
    findings: tuple[Finding, ...]
    seconds: float
    finished_at_ms: int
    #: When the run began reading the groups' committed offsets: its checkpoints hold what was committed by
    #: then (a commit after it may be missing), so they are dated by it, never by the later write.
    read_at_ms: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "groups": self.groups,
            "checkpoints": self.checkpoints,
            "appended": self.appended,
            "synced_groups": list(self.synced_groups),
            "seconds": round(self.seconds, 3),
            "finished_at_ms": self.finished_at_ms,
            "read_at_ms": self.read_at_ms,
            "findings": [
                {"kind": f.kind.value, "group": f.group, "topic": f.topic, "partition": f.partition, "detail": f.detail}
                for f in self.findings
            ],
        }


@dataclass
class TableFigures:
    """Before/after figures of one table; None where the table does not exist."""

    rows_before: int | None = None
    rows_after: int | None = None
    files_before: int | None = None
    files_after: int | None = None
    optimize_files_removed: int = 0
    optimize_files_added: int = 0
    optimize_seconds: float = 0.0
    vacuumed: bool = False
    vacuum_seconds: float = 0.0


@dataclass
class CoalesceFigures:
    """What the offset_syncs rewrite did."""

    version_read: int | None = None
    before_date: str | None = None  # only rows of earlier UTC days were considered
    attempts: int = 0
    streams: int = 0  # streams in the table
    streams_rewritten: int = 0  # streams with something to merge (one predicate term each)
    rows_eligible: int = 0  # rows of completed days, older than the kept batches
    ranges_merged: int = 0  # old rows that were merged into longer ones
    merged_into: int = 0  # the longer rows they became
    rows_rewritten: int = 0  # rows written by the overwrite (merged ones and unchanged neighbours)
    seconds: float = 0.0
    cutoffs: dict[str, int] = field(default_factory=dict)  # "flow/stream_id" -> highest rewritten batch id


@dataclass(frozen=True)
class MaintenanceReport:
    """What one ``drkit maintain`` run did: per table, rows and files before and after, OPTIMIZE and
    VACUUM; for ``offset_syncs`` the coalescing too."""

    state_root: str
    keep_recent_batches: int
    vacuum_retention_hours: float
    offset_syncs: TableFigures
    coalesce: CoalesceFigures
    checkpoints: TableFigures
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "state_root": self.state_root,
            "keep_recent_batches": self.keep_recent_batches,
            "vacuum_retention_hours": self.vacuum_retention_hours,
            "offset_syncs": asdict(self.offset_syncs) | {"coalesce": asdict(self.coalesce)},
            "checkpoints": asdict(self.checkpoints),
            "seconds": self.seconds,
        }
