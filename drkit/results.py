"""The facade's own results: the frozen, typed values :class:`~drkit.service.Drkit` returns beyond core's.

Every one is immutable and renders itself as JSON-ready data (``as_dict``), the shape ``--json`` prints.
The results of the decisions (plans, status, operation outcomes) are core's; these gather what the facade
reads for inspection (the tables as written, the audit trail, the drills) and what it changed (topics).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from drkit.core.sync_gaps import SyncGap, sync_gaps
from drkit.core.topology import TopologyPlan

if TYPE_CHECKING:
    from drkit.config.mm2 import Mm2Mapping
    from drkit.core.audit import OperationRecord
    from drkit.core.checkpoints import RecordedCheckpoint
    from drkit.core.drill import DrillRecord
    from drkit.core.status import GroupOffsets
    from drkit.kafka.topology import AppliedTopology
    from drkit.store.offset_syncs import SyncRow
    from drkit.store.table_history import TableVersion


@dataclass(frozen=True)
class OffsetsReport:
    """A group's offsets in each selected flow."""

    groups: tuple[GroupOffsets, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"flows": [g.as_dict() for g in self.groups]}


@dataclass(frozen=True)
class History:
    """The audit trail, newest first."""

    operations: tuple[OperationRecord, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"operations": [o.as_dict() for o in self.operations]}


@dataclass(frozen=True)
class SyncHistory:
    """The raw ``offset_syncs`` rows of a source topic's partition (or all its partitions), as written."""

    flow: str
    topic: str
    partition: int | None
    version: int | None  # the Delta version read (None: the latest)
    rows: tuple[SyncRow, ...]

    def gaps(self) -> tuple[SyncGap, ...]:
        """Gaps on either side of each partition's ranges, and source offsets copied more than once."""
        return sync_gaps(self.rows)

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "topic": self.topic,
            "partition": self.partition,
            "version": self.version,
            "rows": [r.as_dict() for r in self.rows],
            "gaps": [g.as_dict() for g in self.gaps()],
        }


@dataclass(frozen=True)
class CheckpointRow:
    """One ``checkpoints`` row: the group's committed offset on the source and its translation."""

    group: str
    source_topic: str
    target_topic: str
    partition: int
    upstream_offset: int  # the group's committed offset on the source
    downstream_offset: int | None  # its translation on the target (None: not mirrored yet)
    position: str
    checkpointed_at: datetime

    @classmethod
    def of(cls, recorded: RecordedCheckpoint) -> CheckpointRow:
        c = recorded.checkpoint
        at = datetime.fromtimestamp(recorded.checkpointed_at_ms / 1000, UTC)
        return cls(
            c.group,
            c.source_topic,
            c.target_topic,
            c.partition,
            c.upstream_offset,
            c.downstream_offset,
            c.position.value,
            at,
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CheckpointHistory:
    """A group's checkpoint rows in one flow, oldest first (up to ``as_of``, at Delta ``version``)."""

    flow: str
    group: str
    as_of: datetime | None
    version: int | None
    rows: tuple[CheckpointRow, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "group": self.group,
            "as_of": self.as_of,
            "version": self.version,
            "rows": [r.as_dict() for r in self.rows],
        }


@dataclass(frozen=True)
class TableVersions:
    """The commits of one Delta table (``offset_syncs``, ``checkpoints`` or ``operations``), oldest first."""

    table: str
    versions: tuple[TableVersion, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "versions": [v.as_dict() for v in self.versions]}


@dataclass(frozen=True)
class FlowTopology:
    """One flow's reconciliation: the plan, and what was changed on the target (nothing on a dry run)."""

    plan: TopologyPlan
    dry_run: bool
    created: tuple[str, ...] = ()
    grown: tuple[str, ...] = ()
    configured: tuple[str, ...] = ()
    acls_created: int = 0

    @classmethod
    def from_applied(cls, applied: AppliedTopology) -> FlowTopology:
        """What a reconciliation (not a dry run) changed."""
        a = applied
        return cls(a.plan, False, a.created, a.grown, a.configured, a.acls_created)

    def as_dict(self) -> dict[str, Any]:
        applied = {"created": list(self.created), "grown": list(self.grown), "configured": list(self.configured)}
        return self.plan.as_dict() | {"dry_run": self.dry_run, "applied": applied | {"acls": self.acls_created}}


@dataclass(frozen=True)
class TopicsSyncReport:
    """``drkit topics sync``: the reconciliation of each selected flow."""

    flows: tuple[FlowTopology, ...]

    @classmethod
    def of(cls, done: Iterable[TopologyPlan | AppliedTopology]) -> TopicsSyncReport:
        """Per flow, a plan alone (a dry run) or what its reconciliation changed (drkit.operate.topics)."""
        return cls(
            tuple(FlowTopology(d, True) if isinstance(d, TopologyPlan) else FlowTopology.from_applied(d) for d in done)
        )

    def as_dict(self) -> dict[str, Any]:
        return {"flows": [f.as_dict() for f in self.flows]}


@dataclass(frozen=True)
class DrillHistory:
    drills: tuple[DrillRecord, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"drills": [d.as_dict() for d in self.drills]}


@dataclass(frozen=True)
class Mm2Import:
    """A MirrorMaker 2 file imported as a drkit config: the TOML (validated; secrets as ``${env:...}``), where
    it was written (None: not written), and what became of every MM2 property."""

    source: str
    written: str | None
    toml: str
    mapping: Mm2Mapping

    def as_dict(self) -> dict[str, Any]:
        m = self.mapping
        return {
            "source": self.source,
            "written": self.written,
            "toml": self.toml,
            "clusters": sorted(m.config["clusters"]),
            "flows": [f"{f['source']}->{f['target']}" for f in m.config.get("flows", [])],
            "env": [s.as_dict() for s in m.secrets],
            "carried": [c.as_dict() for c in m.carried],
            "dropped": [d.as_dict() for d in m.dropped],
            "notes": list(m.notes),
        }
