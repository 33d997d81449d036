"""The Delta tables read (and the audit trail written) without a JVM, through delta-rs and pyarrow.

The operator commands (status, offsets, failover, failback, history) and the translator use these;
Spark stays what runs the mirror and maintenance. Both read and write the same tables: only
features both understand are used (no deletion vectors, no column mapping; plain appends), and
integration tests check that each side reads what the other wrote, row for row, at every
version. Every read names exactly the columns it needs and pushes the flow (and group) predicate
down to the Parquet scan, so a failover reads what it moves, not whole tables.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError

from drkit.core.audit import Action, OperationRecord
from drkit.core.checkpoints import Checkpoint, RecordedCheckpoint
from drkit.core.offsets import SyncRange
from drkit.core.ports import SyncProgress, TopicPartition
from drkit.core.translate import Position
from drkit.errors import StoreError
from drkit.layout import StateLayout
from drkit.store.tables import CHECKPOINTS_DDL, OPERATIONS_DDL, SCHEMA_VERSION, arrow_schema

if TYPE_CHECKING:
    from pyarrow.dataset import Expression


def open_table(path: str, name: str, version: int | None = None) -> DeltaTable | None:
    """The table at ``path`` (None when it does not exist yet), its schema version checked."""
    try:
        table = DeltaTable(path, version=version) if version is not None else DeltaTable(path)
    except TableNotFoundError:
        if _has_data_files(path):
            raise StoreError(f"Delta table {name} at {path} has data files but no _delta_log: {_RESTORE}") from None
        return None
    except Exception as exc:  # delta-rs raises a bare DeltaError for a version that does not exist
        if version is not None and "version" in str(exc).lower():
            raise StoreError(f"{name} table has no version {version}: {_cause(exc)}") from None
        raise StoreError(f"Delta table {name} at {path} cannot be read ({_cause(exc)}): {_RESTORE}") from None
    found = table.metadata().configuration.get("drkit.schema.version")
    if found != SCHEMA_VERSION:
        raise StoreError(
            f"Delta table {name} at {path} has schema version {found or 'none'}, this drkit needs "
            f"{SCHEMA_VERSION}: point [state] root at a new folder, or migrate the table"
        )
    return table


#: What to do about a damaged table: drkit never repairs one itself (a guessed repair could change
#: translations), and it stops before writing anything.
_RESTORE = (
    "its _delta_log or a data file is missing or damaged. Restore the table folder (with _delta_log) from a "
    "backup, or stop every drkit job and move the folder away to start that table afresh; nothing was changed"
)


def _cause(exc: BaseException) -> str:
    """The first line of a delta-rs/Arrow error, short: the rest is a Rust backtrace or a debug dump."""
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else type(exc).__name__
    if "found gap" in first:  # the debug dump of the paths that follow is hundreds of characters
        first = first[: first.index("found gap") + len("found gap")] + " (a commit file is missing)"
    return first if len(first) <= 200 else first[:200] + "..."


def _has_data_files(path: str) -> bool:
    folder = Path(path)
    return folder.is_dir() and any(folder.rglob("*.parquet"))


def check_readable(tables: Sequence[tuple[str, str]]) -> None:
    """Open each (path, name) table and check that every data file of its current version is there.

    For jobs that write with Spark (mirror, maintain): called before Spark starts, so a damaged table is
    one line (exit 6) instead of a Java trace, and ``maintain`` does not rewrite one table and then die on
    the next. Local paths only are stat-ed (the state root is a local folder).
    """
    for path, name in tables:
        table = open_table(path, name)
        if table is None:
            continue
        missing = [uri for uri in table.file_uris() if uri.startswith("/") and not os.path.exists(uri)]
        if missing:
            raise StoreError(
                f"Delta table {name} at {path}: {len(missing)} data file(s) of version {table.version()} are "
                f"missing (e.g. {Path(missing[0]).name}): {_RESTORE}"
            )


def _read(table: DeltaTable, columns: Sequence[str], where: Expression | None) -> pa.Table:
    try:
        return table.to_pyarrow_dataset().to_table(columns=list(columns), filter=where)
    except (OSError, pa.ArrowException) as exc:  # a data file missing or damaged under a readable log
        raise StoreError(f"Delta table at {table.table_uri} cannot be read ({_cause(exc)}): {_RESTORE}") from None


def _flow_is(flow: str) -> Expression:
    return pc.field("flow") == flow


def _one_of(column: str, values: Sequence[str]) -> Expression:
    # Typed, so that an empty list is "no row" rather than a type error in the scan.
    return pc.field(column).isin(pa.array(list(values), pa.string()))


def _append(path: str, name: str, ddl: str, rows: pa.Table) -> None:
    """Append ``rows``; create the table first if it is missing (the schema version as Spark sets it)."""
    exists = open_table(path, name) is not None
    try:
        if not exists:
            DeltaTable.create(
                path, schema=arrow_schema(ddl), configuration={"delta.appendOnly": "false"}, mode="ignore"
            )
            # delta-rs refuses unknown keys at creation, not in a later property change.
            DeltaTable(path).alter.set_table_properties(
                {"drkit.schema.version": SCHEMA_VERSION}, raise_if_not_exists=False
            )
        write_deltalake(path, rows, mode="append")
    except (OSError, DeltaError) as exc:  # e.g. a folder of the state root that this user cannot write
        raise StoreError(
            f"cannot write Delta table {name} at {path} ({_cause(exc)}): check that [state] root is a folder "
            "this user can write"
        ) from None


_RANGE = ["upstream_first", "upstream_last", "downstream_first", "downstream_last"]


@dataclass(frozen=True)
class SyncRow:
    """One ``offset_syncs`` row as the mirror wrote it (one range of one micro-batch), for inspection."""

    flow: str
    source_topic: str
    target_topic: str
    partition: int
    upstream_first: int
    upstream_last: int
    downstream_first: int
    downstream_last: int
    record_count: int
    batch_id: int
    stream_id: str
    written_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The columns of a :class:`SyncRow`, read by name: a renamed table column fails the read (and its tests).
_SYNC_ROW_COLUMNS = [
    "flow",
    "source_topic",
    "target_topic",
    "partition",
    *_RANGE,
    "record_count",
    "batch_id",
    "stream_id",
    "written_at",
]


@dataclass(frozen=True)
class TableVersion:
    """One commit of a Delta table: its version, when, and what wrote it (for time travel)."""

    version: int
    timestamp: datetime
    operation: str
    parameters: Mapping[str, str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "timestamp": self.timestamp,
            "operation": self.operation,
            "parameters": dict(self.parameters),
        }


def table_versions(path: str, name: str) -> list[TableVersion]:
    """Every commit of the table at ``path``, oldest first (none when the table does not exist yet)."""
    table = open_table(path, name)
    if table is None:
        return []
    out = [
        TableVersion(
            int(c["version"]),
            datetime.fromtimestamp(int(c["timestamp"]) / 1000, UTC),
            str(c.get("operation", "")),
            {str(k): str(v) for k, v in (c.get("operationParameters") or {}).items()},
        )
        for c in table.history()
    ]
    return sorted(out, key=lambda v: v.version)


class FastOffsetSyncs:
    """``offset_syncs`` through delta-rs: implements ``SyncReader``; incremental reads for the translator."""

    def __init__(self, layout: StateLayout) -> None:
        self.path = layout.offset_syncs

    def _table(self, version: int | None = None) -> DeltaTable | None:
        return open_table(self.path, "offset_syncs", version)

    def version(self) -> int | None:
        table = self._table()
        return None if table is None else table.version()

    def ranges(self, flow: str, topics: list[str] | None = None) -> dict[TopicPartition, list[SyncRange]]:
        table = self._table()
        if table is None:
            return {}
        where = _flow_is(flow)
        if topics is not None:
            where = where & _one_of("source_topic", topics)
        return _coalesced(_read(table, ["source_topic", "partition", *_RANGE], where))

    def ranges_since(
        self, flow: str, seen: dict[str, int], version: int
    ) -> tuple[dict[TopicPartition, list[SyncRange]], dict[str, int]]:
        """Ranges in rows above each stream's batch mark (see OffsetSyncStore.ranges_since), at ``version``."""
        table = self._table(version)
        if table is None:
            return {}, dict(seen)
        where = _flow_is(flow)
        if seen:
            newer = ~_one_of("stream_id", list(seen))
            for stream_id, batch_id in seen.items():
                newer = newer | ((pc.field("stream_id") == stream_id) & (pc.field("batch_id") > batch_id))
            where = where & newer
        rows = _read(table, ["stream_id", "batch_id", "source_topic", "partition", *_RANGE], where)
        marks = dict(seen)
        if rows.num_rows:
            for r in rows.group_by("stream_id").aggregate([("batch_id", "max")]).to_pylist():
                marks[r["stream_id"]] = max(marks.get(r["stream_id"], -1), int(r["batch_id_max"]))
        return (_coalesced(rows) if marks != seen else {}), marks

    def progress(self, flow: str) -> dict[TopicPartition, SyncProgress]:
        table = self._table()
        if table is None:
            return {}
        rows = _read(
            table, ["source_topic", "partition", "upstream_last", "downstream_last", "written_at"], _flow_is(flow)
        )
        if not rows.num_rows:
            return {}
        # The greatest upstream offset of each partition (the greatest downstream among equals, as the
        # Spark reader), vectorised: a day of batches before maintenance is millions of rows.
        keys = ["source_topic", "partition"]
        rows = rows.sort_by(
            [*((k, "ascending") for k in keys), ("upstream_last", "ascending"), ("downstream_last", "ascending")]
        )
        last = rows.take(pa.array(np.flatnonzero(~_same_key_as_next(rows, keys))))
        written = rows.group_by(keys).aggregate([("written_at", "max")])
        at = {(r["source_topic"], r["partition"]): r["written_at_max"] for r in written.to_pylist()}
        return {
            (r["source_topic"], r["partition"]): SyncProgress(
                r["upstream_last"], r["downstream_last"], _ms(at[(r["source_topic"], r["partition"])])
            )
            for r in last.select([*keys, "upstream_last", "downstream_last"]).to_pylist()
        }

    def target_topics(self, flow: str) -> dict[str, str]:
        table = self._table()
        if table is None:
            return {}
        rows = _read(table, ["source_topic", "target_topic"], _flow_is(flow))
        pairs = rows.group_by(["source_topic", "target_topic"]).aggregate([]).to_pylist()
        return {r["source_topic"]: r["target_topic"] for r in pairs}

    def history(self, flow: str, topic: str, partition: int | None = None, version: int | None = None) -> list[SyncRow]:
        """The raw rows of one source topic (one partition, or all) as written, at ``version`` (None: now),
        sorted by partition, write time and batch; the flow/topic/partition predicate is pushed into the scan."""
        table = self._table(version)
        if table is None:
            return []
        where = _flow_is(flow) & (pc.field("source_topic") == topic)
        if partition is not None:
            where = where & (pc.field("partition") == partition)
        rows = _read(table, _SYNC_ROW_COLUMNS, where).sort_by(
            [
                ("partition", "ascending"),
                ("written_at", "ascending"),
                ("batch_id", "ascending"),
                ("upstream_first", "ascending"),
            ]
        )
        return [SyncRow(**r) for r in rows.to_pylist()]

    def versions(self) -> list[TableVersion]:
        return table_versions(self.path, "offset_syncs")


def _ms(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


def _coalesced(rows: pa.Table) -> dict[TopicPartition, list[SyncRange]]:
    """Ranges per (source topic, partition), those continuing each other on both sides merged.

    Vectorised gaps-and-islands (the same rule as ``drkit.core.offsets.coalesce``): a day of
    one-second batches is millions of rows, too many to fold one Python object at a time.
    """
    if not rows.num_rows:
        return {}
    keys = ["source_topic", "partition"]
    rows = rows.select([*keys, *_RANGE]).group_by([*keys, *_RANGE]).aggregate([])  # drop repeats
    rows = rows.sort_by([(k, "ascending") for k in [*keys, "upstream_first", "downstream_first"]])
    uf, ul, df, dl = (rows.column(c).to_numpy() for c in _RANGE)
    n = rows.num_rows
    continues = np.zeros(n, dtype=bool)
    continues[1:] = _same_key_as_next(rows, keys)[:-1] & (uf[1:] == ul[:-1] + 1) & (df[1:] == dl[:-1] + 1)
    starts = np.flatnonzero(~continues)
    ends = np.append(starts[1:], n) - 1
    topics = rows.column("source_topic").take(pa.array(starts)).to_pylist()
    parts = rows.column("partition").to_numpy()[starts]
    out: dict[TopicPartition, list[SyncRange]] = {}
    for topic, part, s, e in zip(topics, parts.tolist(), starts.tolist(), ends.tolist(), strict=True):
        out.setdefault((topic, part), []).append(SyncRange(int(uf[s]), int(ul[e]), int(df[s]), int(dl[e])))
    return out


def _same_key_as_next(rows: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """For sorted ``rows``: True where a row has the same ``keys`` as the row after it (the last: False)."""
    same = np.zeros(rows.num_rows, dtype=bool)
    same[:-1] = True
    for k in keys:
        column = rows.column(k).combine_chunks()
        codes = (
            pc.dictionary_encode(column).indices.to_numpy() if pa.types.is_string(column.type) else column.to_numpy()
        )
        same[:-1] &= codes[1:] == codes[:-1]
    return same


_CHECKPOINT_COLUMNS = [
    "group",
    "source_topic",
    "target_topic",
    "partition",
    "upstream_offset",
    "downstream_offset",
    "position",
    "metadata",
    "checkpointed_at",
]


class FastCheckpoints:
    """``checkpoints`` through delta-rs: implements ``CheckpointReader``, appends for the translator."""

    def __init__(self, layout: StateLayout) -> None:
        self.path = layout.checkpoints

    def ensure(self) -> None:
        """Nothing to do: the first append creates the table."""

    def append(self, rows: list[Checkpoint], at: datetime | None = None) -> int:
        if not rows:
            return 0
        when = (at or datetime.now(UTC)).astimezone(UTC)
        data = [
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
                "checkpointed_at": when,
            }
            for c in rows
        ]
        _append(
            self.path, "checkpoints", CHECKPOINTS_DDL, pa.Table.from_pylist(data, schema=arrow_schema(CHECKPOINTS_DDL))
        )
        return len(data)

    def latest(
        self, flow: str, groups: list[str] | None = None, as_of: datetime | None = None, version: int | None = None
    ) -> list[RecordedCheckpoint]:
        """The latest checkpoint per (group, topic, partition) of ``flow``, now or back in time."""
        table = open_table(self.path, "checkpoints", version)
        if table is None:
            return []
        where = _flow_is(flow)
        if groups is not None:
            where = where & _one_of("group", groups)
        if as_of is not None:
            where = where & (
                pc.field("checkpointed_at") <= pa.scalar(as_of.astimezone(UTC), pa.timestamp("us", tz="UTC"))
            )
        rows = _last_per_key(_read(table, _CHECKPOINT_COLUMNS, where))
        return [
            RecordedCheckpoint(
                Checkpoint(
                    flow,
                    r["group"],
                    r["source_topic"],
                    r["target_topic"],
                    r["partition"],
                    r["upstream_offset"],
                    r["downstream_offset"],
                    Position(r["position"]),
                    r["metadata"],
                ),
                _ms(r["checkpointed_at"]) or 0,
            )
            for r in rows.to_pylist()
        ]

    def history(
        self, flow: str, group: str, as_of: datetime | None = None, version: int | None = None
    ) -> list[RecordedCheckpoint]:
        """Every checkpoint row of ``group`` in ``flow`` (up to ``as_of``, at ``version``), oldest first,
        then by topic and partition; the flow/group/time predicate is pushed into the scan."""
        table = open_table(self.path, "checkpoints", version)
        if table is None:
            return []
        where = _flow_is(flow) & (pc.field("group") == group)
        if as_of is not None:
            where = where & (
                pc.field("checkpointed_at") <= pa.scalar(as_of.astimezone(UTC), pa.timestamp("us", tz="UTC"))
            )
        rows = _read(table, _CHECKPOINT_COLUMNS, where).sort_by(
            [
                ("checkpointed_at", "ascending"),
                ("source_topic", "ascending"),
                ("partition", "ascending"),
                ("upstream_offset", "ascending"),
            ]
        )
        return [
            RecordedCheckpoint(
                Checkpoint(
                    flow,
                    r["group"],
                    r["source_topic"],
                    r["target_topic"],
                    r["partition"],
                    r["upstream_offset"],
                    r["downstream_offset"],
                    Position(r["position"]),
                    r["metadata"],
                ),
                _ms(r["checkpointed_at"]) or 0,
            )
            for r in rows.to_pylist()
        ]

    def versions(self) -> list[TableVersion]:
        return table_versions(self.path, "checkpoints")


def _last_per_key(rows: pa.Table) -> pa.Table:
    """The latest row per (group, source_topic, partition): greatest time, then greatest offset (as the
    Spark reader's max_by), sorted by key. Vectorised: a group's history can be long."""
    keys = ["group", "source_topic", "partition"]
    rows = rows.sort_by(
        [*((k, "ascending") for k in keys), ("checkpointed_at", "ascending"), ("upstream_offset", "ascending")]
    )
    n = rows.num_rows
    if n == 0:
        return rows
    return rows.take(pa.array(np.flatnonzero(~_same_key_as_next(rows, keys))))


class FastOperations:
    """``operations`` through delta-rs: implements ``OperationLog``."""

    def __init__(self, layout: StateLayout) -> None:
        self.path = layout.operations

    def append(self, record: OperationRecord) -> None:
        row = {
            "id": record.id,
            "action": record.action.value,
            "flow": record.flow,
            "groups": list(record.groups),
            "as_of": record.as_of,
            "dry_run": record.dry_run,
            "plan": json.dumps(record.plan, default=str),
            "result": json.dumps(record.result, default=str),
            "user": record.user,
            "host": record.host,
            "drkit_version": record.drkit_version,
            "started_at": record.started_at.astimezone(UTC),
            "finished_at": None if record.finished_at is None else record.finished_at.astimezone(UTC),
        }
        _append(
            self.path, "operations", OPERATIONS_DDL, pa.Table.from_pylist([row], schema=arrow_schema(OPERATIONS_DDL))
        )

    def list(self, flow: str | None = None, limit: int = 50) -> list[OperationRecord]:
        table = open_table(self.path, "operations")
        if table is None:
            return []
        rows = _read(table, arrow_schema(OPERATIONS_DDL).names, None if flow is None else _flow_is(flow))
        rows = rows.sort_by([("started_at", "descending")]).slice(0, limit)
        return [
            OperationRecord(
                id=r["id"],
                action=Action(r["action"]),
                flow=r["flow"],
                groups=tuple(r["groups"] or ()),
                as_of=r["as_of"],
                dry_run=r["dry_run"],
                plan=json.loads(r["plan"]) if r["plan"] else {},
                result=json.loads(r["result"]) if r["result"] else {},
                user=r["user"],
                host=r["host"],
                drkit_version=r["drkit_version"],
                started_at=r["started_at"],
                finished_at=r["finished_at"],
            )
            for r in rows.to_pylist()
        ]
