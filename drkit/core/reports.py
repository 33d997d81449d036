"""What the long-running jobs report back: a mirror's figures per flow, a translator run's figures.

Frozen values the facade returns to the CLI, notebooks and drills; the jobs build them.
"""

from __future__ import annotations

from dataclasses import dataclass
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "batches": self.batches,
            "skipped_batches": self.skipped_batches,
            "records": self.records,
            "bytes": self.bytes,
            "sync_ranges": self.sync_ranges,
            "created_topics": list(self.created_topics),
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "groups": self.groups,
            "checkpoints": self.checkpoints,
            "appended": self.appended,
            "synced_groups": list(self.synced_groups),
            "seconds": round(self.seconds, 3),
            "finished_at_ms": self.finished_at_ms,
            "findings": [
                {"kind": f.kind.value, "group": f.group, "topic": f.topic, "partition": f.partition, "detail": f.detail}
                for f in self.findings
            ],
        }
