"""The ``checkpoints`` Delta table: the append-only history of translated group offsets.

Each row is one (flow, group, source topic, partition) at one time. Only changes are appended, so the
latest state per key is the row with the greatest ``checkpointed_at`` (then the greatest offset). Two
ways back in time: ``as_of`` (a wall-clock time: the latest row per key written at or before it, read
from the history itself, so it survives VACUUM) and ``version`` (Delta time travel to a table version).
Every read names the columns it needs and pushes the flow (and group) predicate into the scan.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from drkit.core.checkpoints import Checkpoint, RecordedCheckpoint
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.store import delta
from drkit.store.delta import TableSpec
from drkit.store.offset_syncs import last_of_each_key
from drkit.store.table_history import TableVersion, table_versions

SPEC = TableSpec(
    "checkpoints",
    delta.schema(
        "flow STRING NOT NULL, `group` STRING NOT NULL, source_topic STRING NOT NULL, target_topic STRING NOT NULL, "
        "partition INT NOT NULL, upstream_offset BIGINT NOT NULL, downstream_offset BIGINT, "
        "position STRING NOT NULL, metadata STRING, checkpointed_at TIMESTAMP NOT NULL"
    ),
)

_KEYS = ["group", "source_topic", "partition"]


def _to_table(rows: list[Checkpoint], at: datetime) -> pa.Table:
    """The one mapping of checkpoints to table rows."""
    return pa.Table.from_pylist(
        [
            {
                "flow": c.flow,
                "group": c.group,
                "source_topic": c.source_topic,
                "target_topic": c.target_topic,
                "partition": c.partition,
                "upstream_offset": c.upstream_offset,
                "downstream_offset": c.downstream_offset,
                "position": c.position.value,
                "metadata": c.metadata,
                "checkpointed_at": at,
            }
            for c in rows
        ],
        schema=SPEC.schema,
    )


def _from_rows(rows: pa.Table) -> list[RecordedCheckpoint]:
    """The one mapping of table rows back to recorded checkpoints (column-wise: thousands of groups)."""
    micros = rows.column("checkpointed_at").cast(pa.int64())  # Python datetimes cost more than the rest
    c = rows.drop_columns(["checkpointed_at"]).to_pydict()
    positions = {p.value: p for p in Position}
    return [
        RecordedCheckpoint(Checkpoint(flow, group, source, target, part, up, down, positions[pos], meta), ms or 0)
        for flow, group, source, target, part, up, down, pos, meta, ms in zip(
            c["flow"],
            c["group"],
            c["source_topic"],
            c["target_topic"],
            c["partition"],
            c["upstream_offset"],
            c["downstream_offset"],
            c["position"],
            c["metadata"],
            pc.divide(micros, 1000).to_pylist(),
            strict=True,
        )
    ]


class CheckpointTable:
    """``checkpoints``: implements ``CheckpointLog`` (appends for the translator, reads for the operations)."""

    def __init__(self, layout: StateLayout) -> None:
        self.path = layout.checkpoints
        self._handle = delta.Handle(self.path, SPEC)

    def ensure(self) -> None:
        self._handle.for_writing()

    def append(self, rows: list[Checkpoint], at: datetime | None = None) -> int:
        if not rows:
            return 0
        self._handle.write(_to_table(rows, (at or datetime.now(UTC)).astimezone(UTC)))
        return len(rows)

    def _rows(self, flow: str, where: pc.Expression, as_of: datetime | None, version: int | None) -> pa.Table:
        where = (pc.field("flow") == flow) & where
        if as_of is not None:
            where = where & (
                pc.field("checkpointed_at") <= pa.scalar(as_of.astimezone(UTC), pa.timestamp("us", tz="UTC"))
            )
        return self._handle.read(SPEC.columns, where, version)

    def latest(
        self, flow: str, groups: list[str] | None = None, as_of: datetime | None = None, version: int | None = None
    ) -> list[RecordedCheckpoint]:
        """The latest checkpoint per (group, topic, partition) of ``flow``, now or back in time, by key."""
        where = pc.field("flow").is_valid() if groups is None else pc.field("group").isin(pa.array(groups, pa.string()))
        rows = self._rows(flow, where, as_of, version)
        if not rows.num_rows:
            return []
        # Greatest time, then greatest offset, per key; vectorised: a group's history can be long.
        rows = rows.sort_by(
            [*((k, "ascending") for k in _KEYS), ("checkpointed_at", "ascending"), ("upstream_offset", "ascending")]
        )
        return _from_rows(rows.take(last_of_each_key(rows, _KEYS)))

    def history(
        self, flow: str, group: str, as_of: datetime | None = None, version: int | None = None
    ) -> list[RecordedCheckpoint]:
        """Every checkpoint row of ``group`` in ``flow`` (up to ``as_of``, at ``version``), oldest first,
        then by topic and partition."""
        rows = self._rows(flow, pc.field("group") == group, as_of, version)
        rows = rows.sort_by(
            [
                ("checkpointed_at", "ascending"),
                ("source_topic", "ascending"),
                ("partition", "ascending"),
                ("upstream_offset", "ascending"),
            ]
        )
        return _from_rows(rows)

    def versions(self) -> list[TableVersion]:
        return table_versions(self.path, SPEC.name)
