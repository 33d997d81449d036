"""The one door to drkit's Delta tables: open (with the schema-version guard), create, write, read.

Every table module (offset_syncs, checkpoints, operations, drills) declares its :class:`TableSpec`
(name, Arrow schema, partition columns) and goes through these functions only, so there is one way
to create a table, one version guard, one retry rule and one way a damaged table is reported.

delta-rs (``deltalake``) is the engine of every product path: no JVM is needed to read or write the
state, ``drkit maintain`` included. Spark reads the same tables (integration tests read with Spark
what delta-rs wrote, maintenance's rewrites too): only features both understand are used (no deletion vectors, no column
mapping). Every table carries the table property ``drkit.schema.version``; drkit refuses a table of
another version with a message that says what to do, instead of writing rows of the wrong shape.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from drkit.errors import FENCED_BY_NEWER_HOLDER, FencedError, StoreError
from drkit.layout import StatePath
from drkit.store.files import delta_location

#: Where a table is: a local path, or a path under the state root (local, or in an object store with its options).
Where = str | StatePath

if TYPE_CHECKING:
    from pyarrow.dataset import Expression

T = TypeVar("T")
A = TypeVar("A")
R = TypeVar("R")

SCHEMA_VERSION = "1"
VERSION_PROPERTY = "drkit.schema.version"

#: How long a writer whose creation of a table failed waits for another writer's creation of it to complete.
CREATED_MEANWHILE_SECONDS = 5.0
#: Attempts of one write that conflicts with a concurrent commit (another flow's compaction, maintenance).
COMMIT_ATTEMPTS = 10


@dataclass(frozen=True)
class TableSpec:
    """One Delta table: its name (in messages), its columns as an Arrow schema, its partition columns."""

    name: str
    schema: pa.Schema
    partitions: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)


_TYPES = {
    "STRING": pa.string(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "BOOLEAN": pa.bool_(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "DATE": pa.date32(),
    "ARRAY<STRING>": pa.list_(pa.string()),
}


def schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a column list in Spark SQL's words (``name TYPE [NOT NULL], ...``): each table
    declares its columns once this way, as Spark and Delta's docs write them."""
    fields = []
    for column in (c.strip() for c in ddl.split(",")):
        m = re.fullmatch(r"`?(\w+)`?\s+([A-Z<>]+)(\s+NOT NULL)?", column)
        if m is None or m.group(2) not in _TYPES:
            raise ValueError(f"cannot map column {column!r} to Arrow")
        fields.append(pa.field(m.group(1), _TYPES[m.group(2)], nullable=m.group(3) is None))
    return pa.schema(fields)


#: What to do about a damaged table: drkit never repairs one itself (a guessed repair could change
#: translations), and it stops before writing anything.
RESTORE = (
    "its _delta_log or a data file is missing or damaged. Restore the table folder (with _delta_log) from a "
    "backup, or stop every drkit job and move the folder away to start that table afresh; nothing was changed"
)


def cause(exc: BaseException) -> str:
    """The first line of a delta-rs/Arrow error, short: the rest is a Rust backtrace or a debug dump."""
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else type(exc).__name__
    if "found gap" in first:  # the debug dump of the paths that follow is hundreds of characters
        first = first[: first.index("found gap") + len("found gap")] + " (a commit file is missing)"
    return first if len(first) <= 200 else first[:200] + "..."


def _restore(path: Where) -> str:
    """What to do about a table that cannot be read: in an object store, first that the store is reachable."""
    if isinstance(path, StatePath) and path.remote:
        return (
            "check that the object store answers and that [state.storage] reaches it (endpoint, bucket, "
            f"credentials); if it does, {RESTORE}"
        )
    return RESTORE


def _writable(path: Where) -> str:
    if isinstance(path, StatePath) and path.remote:
        return (
            "check that the object store answers and that [state.storage] may write there (endpoint, bucket, "
            "credentials)"
        )
    return "check that [state] root is a folder this user can write"


def _has_data_files(path: Where) -> bool:
    if isinstance(path, StatePath) and path.remote:
        return False  # an object store has no folder to look into without listing it: read as "not created"
    folder = Path(path)
    return folder.is_dir() and any(folder.rglob("*.parquet"))


def _delta_table(path: Where, version: int | None = None) -> DeltaTable:
    uri, options = delta_location(path)
    return DeltaTable(uri, version=version, storage_options=options)


def open_table(path: Where, name: str, version: int | None = None) -> DeltaTable | None:
    """The table at ``path`` (None when it does not exist yet), its schema version checked."""
    try:
        table = _delta_table(path, version)
    except TableNotFoundError:
        if _has_data_files(path):
            raise StoreError(f"Delta table {name} at {path} has data files but no _delta_log: {RESTORE}") from None
        return None
    except Exception as exc:  # delta-rs raises a bare DeltaError for a version that does not exist
        if version is not None and "version" in str(exc).lower():
            raise StoreError(f"{name} table has no version {version}: {cause(exc)}") from None
        raise StoreError(f"Delta table {name} at {path} cannot be read ({cause(exc)}): {_restore(path)}") from None
    found = table.metadata().configuration.get(VERSION_PROPERTY)
    if found is None and table.version() == 0 and not table.file_uris():
        return None  # between the two commits of its creation (see ensure): nothing in it yet
    if found != SCHEMA_VERSION:
        raise StoreError(
            f"Delta table {name} at {path} has schema version {found or 'none'}, this drkit needs "
            f"{SCHEMA_VERSION}: point [state] root at a new folder, or migrate the table"
        )
    return table


def ensure(path: Where, spec: TableSpec) -> None:
    """Create the table if missing; check its schema version if present (another writer may create it)."""
    if open_table(path, spec.name) is not None:
        return
    uri, options = delta_location(path)
    try:
        DeltaTable.create(
            uri,
            schema=spec.schema,
            partition_by=list(spec.partitions) or None,
            configuration={"delta.appendOnly": "false"},
            mode="ignore",
            storage_options=options,
        )
        # delta-rs refuses unknown keys at creation, not in a later property change: two commits, and
        # open_table reads an empty table between them as not created yet.
        try:
            _delta_table(path).alter.set_table_properties({VERSION_PROPERTY: SCHEMA_VERSION}, raise_if_not_exists=False)
        except DeltaError:  # another process creating it at the same time set it first
            if _delta_table(path).metadata().configuration.get(VERSION_PROPERTY) is None:
                raise
    except (OSError, DeltaError) as exc:  # e.g. a folder of the state root that this user cannot write
        if isinstance(exc, DeltaError) and _created_meanwhile(path, spec.name):
            return
        raise StoreError(f"cannot write Delta table {spec.name} at {path} ({cause(exc)}): {_writable(path)}") from None
    open_table(path, spec.name)  # the version check, also when another writer created it at the same time


def _created_meanwhile(path: Where, name: str) -> bool:
    """Whether another writer created the table while this one tried (two processes' first writes at once: one
    commit of version 0 wins, the other's create fails): waited for until its schema version is set (its second
    commit), then checked like any table."""
    deadline = time.monotonic() + CREATED_MEANWHILE_SECONDS
    while time.monotonic() < deadline:
        if open_table(path, name) is not None:
            return True
        time.sleep(0.05)
    return open_table(path, name) is not None


def write(
    path: Where,
    spec: TableSpec,
    rows: pa.Table,
    *,
    app: tuple[str, int] | None = None,
    replace: str | None = None,
    done: Callable[[], bool] | None = None,
    what: str = "append",
    table: DeltaTable | None = None,
    metadata: Mapping[str, str] | None = None,
    fence: tuple[str, int] | None = None,
) -> bool:
    """Commit ``rows`` to the table (created first if missing): an append, or with ``replace`` (a SQL
    predicate) a replacement of exactly the rows it matches, in one commit.

    ``app`` is Delta's application transaction (``txnAppId``, ``txnVersion``) recorded with the commit,
    as Spark's streaming sinks write it: the idempotence key of a mirror batch. A commit refused for a
    concurrent one is tried again on the new snapshot, unless ``done()`` says the work was recorded
    meanwhile (then False is returned). Every failure is one line naming the table. ``table``: the
    table held open by a :class:`Writer` (it exists and was checked). ``metadata``: keys recorded in the
    commit's info (``history()`` shows them: the audit trail finds the version of an operation's rows).

    ``fence`` (an application id and this writer's epoch, with ``table``): the commit also records it, and is
    refused (:class:`FencedError`) when the table's version of that id is above the epoch. Checked before
    every attempt on the table brought up to date; a concurrent commit of the same id fails this one (delta-rs
    refuses two commits of one application id from one snapshot), so the check is made again on the winner:
    a fenced writer never commits after the commit that fenced it.
    """
    rows = rows.select(spec.columns).cast(spec.schema)
    if table is None:
        ensure(path, spec)
    uri, options = delta_location(path)
    target: str | DeltaTable = uri if table is None else table
    options = options if table is None else None  # an open table carries its own
    commit = None
    apps = [Transaction(*a) for a in (app, fence) if a is not None]
    if apps or metadata:
        commit = CommitProperties(
            app_transactions=apps or None,
            custom_metadata=dict(metadata) if metadata else None,
        )
    for attempt in range(COMMIT_ATTEMPTS):
        if fence is not None and table is not None:
            _check_fence(table, fence, spec.name)
        try:
            partitions = list(spec.partitions) or None
            if replace is None:
                write_deltalake(
                    target,
                    rows,
                    mode="append",
                    partition_by=partitions,
                    commit_properties=commit,
                    storage_options=options,
                )
            else:
                write_deltalake(
                    target,
                    rows,
                    mode="overwrite",
                    predicate=replace,
                    partition_by=partitions,
                    commit_properties=commit,
                    storage_options=options,
                )
            return True
        except CommitFailedError as exc:
            if done is not None and done():
                return False
            if attempt + 1 == COMMIT_ATTEMPTS:
                raise StoreError(
                    f"{spec.name} at {path}: {what} failed {COMMIT_ATTEMPTS} times for concurrent commits: {cause(exc)}"
                ) from None
            time.sleep(0.05 * (attempt + 1))
            if table is not None:
                table.update_incremental()  # the next attempt starts from the commit that won
        except (OSError, DeltaError) as exc:
            raise StoreError(
                f"cannot write Delta table {spec.name} at {path} ({cause(exc)}): {_writable(path)}"
            ) from None
        except Exception as exc:  # delta-rs raises its own error types; the operator needs one line
            raise StoreError(f"{spec.name} at {path}: {what} failed: {cause(exc)}") from None
    raise AssertionError("unreachable")


def _check_fence(table: DeltaTable, fence: tuple[str, int], name: str) -> None:
    app_id, epoch = fence
    recorded = table.transaction_version(app_id)
    if recorded is not None and recorded > epoch:
        raise FencedError(
            f"{name}: epoch {recorded} of {app_id} was {FENCED_BY_NEWER_HOLDER}; this process holds epoch {epoch} "
            "and writes nothing more"
        )


class Handle:
    """One table used many times by one process (a command, a job): opened once, then brought up to date
    incrementally (the commits since, about a millisecond) instead of opened again (its last checkpoint
    and every commit after it, tens of milliseconds). The results of reads are kept for the version they
    read (a version never changes), so a command that asks the same twice reads once."""

    def __init__(self, path: Where, spec: TableSpec) -> None:
        self.path = path
        self.spec = spec
        self._table: DeltaTable | None = None
        self._memo: dict[Any, Any] = {}
        self._memo_version: int | None = None

    def current(self) -> DeltaTable | None:
        """The table at its newest version (None while it does not exist)."""
        if self._table is None:
            self._table = open_table(self.path, self.spec.name)
        else:
            try:
                self._table.update_incremental()
            except Exception as exc:
                raise StoreError(
                    f"Delta table {self.spec.name} at {self.path} cannot be read ({cause(exc)}): {_restore(self.path)}"
                ) from None
        return self._table

    def at(self, version: int | None) -> DeltaTable | None:
        """The table now (``version`` None) or at a past version (time travel: opened for the call)."""
        if version is None:
            return self.current()
        if self._table is not None and self._table.version() == version:
            return self._table  # the newest version already held (the translator reads the one it just saw)
        return open_table(self.path, self.spec.name, version)

    def for_writing(self) -> DeltaTable:
        """The table at its newest version, created first if missing."""
        table = self.current()
        if table is None:
            ensure(self.path, self.spec)
            table = self._table = open_table(self.path, self.spec.name)
            assert table is not None  # ensure made it
        return table

    def memo(self, key: Any, compute: Callable[[], T]) -> T:
        """``compute()`` for the newest version, computed once per version and ``key``."""
        table = self.current()
        return self._kept(None if table is None else table.version(), key, compute)

    def _kept(self, version: int | None, key: Any, compute: Callable[[], T]) -> T:
        if version != self._memo_version:
            self._memo, self._memo_version = {}, version
        if key not in self._memo:
            self._memo[key] = compute()
        result: T = self._memo[key]
        return result

    def read(self, columns: Sequence[str], where: Expression | None = None, version: int | None = None) -> pa.Table:
        """The named columns of the rows matching ``where`` (pushed down to the Parquet scan), now or at a
        past ``version``; no rows while the table does not exist."""
        table = self.at(version)
        if table is None:
            return self.spec.schema.empty_table().select(list(columns))
        found = table  # for the closure: a narrowed name
        held = table is self._table  # the version held: its dataset is kept (not refreshed: ``version`` is pinned)
        dataset = self._kept(table.version(), "dataset", lambda: _dataset(found)) if held else _dataset(table)
        return _scan(dataset, table, columns, where)

    def write(
        self,
        rows: pa.Table,
        *,
        app: tuple[str, int] | None = None,
        replace: str | None = None,
        done: Callable[[], bool] | None = None,
        what: str = "append",
        metadata: Mapping[str, str] | None = None,
        fence: tuple[str, int] | None = None,
    ) -> bool:
        table = self.for_writing()
        return write(
            self.path,
            self.spec,
            rows,
            app=app,
            replace=replace,
            done=done,
            what=what,
            table=table,
            metadata=metadata,
            fence=fence,
        )

    def commit_versions(self, key: str, values: Iterable[str], window: int) -> dict[str, int]:
        """For each of ``values``, the first of the newest ``window`` commits whose info has ``key`` equal to it
        (see ``metadata`` of :func:`write`); values not found there are left out."""
        table = self.current()
        if table is None:
            return {}
        wanted = set(values)
        found: dict[str, int] = {}
        try:
            commits = table.history(window)
        except Exception as exc:
            raise StoreError(
                f"Delta table {self.spec.name} at {self.path} cannot be read ({cause(exc)}): {_restore(self.path)}"
            ) from None
        for c in commits:
            value = c.get(key)
            if isinstance(value, str) and value in wanted:
                version = int(c["version"])
                found[value] = min(version, found.get(value, version))
        return found


def _dataset(table: DeltaTable) -> Any:
    """The table's files as a pyarrow dataset; a local table through the native file system (a quarter
    faster to scan than delta-rs's Python file system handler)."""
    from pyarrow import fs

    uri = table.table_uri
    local = uri[len("file://") :] if uri.startswith("file://") else uri if uri.startswith("/") else None
    try:
        if local is not None:
            return table.to_pyarrow_dataset(filesystem=fs.SubTreeFileSystem(local, fs.LocalFileSystem()))
        return table.to_pyarrow_dataset()
    except (OSError, pa.ArrowException) as exc:
        raise StoreError(f"Delta table at {uri} cannot be read ({cause(exc)}): {RESTORE}") from None


def _scan(dataset: Any, table: DeltaTable, columns: Sequence[str], where: Expression | None) -> pa.Table:
    try:
        result: pa.Table = dataset.to_table(columns=list(columns), filter=where)
        return result
    except (OSError, pa.ArrowException) as exc:  # a data file missing or damaged under a readable log
        raise StoreError(f"Delta table at {table.table_uri} cannot be read ({cause(exc)}): {RESTORE}") from None


class RowLog(Generic[A, R]):
    """A table of records appended one at a time (``A``) and listed newest first (``R``): the audit
    trail, the drills. Its spec, its mapping both ways and its time column are all that differ."""

    def __init__(
        self,
        path: Where,
        spec: TableSpec,
        to_row: Callable[[A], dict[str, Any]],
        from_row: Callable[[dict[str, Any]], R],
        time_column: str = "started_at",
    ) -> None:
        self.path = path
        self.spec = spec
        self._to_row, self._from_row, self._time = to_row, from_row, time_column
        self._handle = Handle(path, spec)

    def append(self, record: A, metadata: Mapping[str, str] | None = None) -> None:
        self._handle.write(pa.Table.from_pylist([self._to_row(record)], schema=self.spec.schema), metadata=metadata)

    def newest(self, limit: int, where: Expression | None = None, columns: Sequence[str] | None = None) -> list[R]:
        """The latest ``limit`` records (matching ``where``; only ``columns`` read), newest first."""
        rows = self._handle.read(columns or self.spec.columns, where)
        rows = rows.sort_by([(self._time, "descending")]).slice(0, limit)
        return [self._from_row(r) for r in rows.to_pylist()]


def check_readable(tables: Sequence[tuple[Where, str]]) -> None:
    """Open each (path, name) table and check that every data file of its current version is there.

    For maintain: called before any table is rewritten, so a damaged second table is one line (exit 6)
    and the first is left as it was. Local paths only are stat-ed (the state root is a local folder).
    """
    for path, name in tables:
        table = open_table(path, name)
        if table is None:
            continue
        missing = [uri for uri in table.file_uris() if uri.startswith("/") and not os.path.exists(uri)]
        if missing:
            raise StoreError(
                f"Delta table {name} at {path}: {len(missing)} data file(s) of version {table.version()} are "
                f"missing (e.g. {Path(missing[0]).name}): {RESTORE}"
            )


def ms(value: datetime | None) -> int | None:
    """A timestamp column's value as epoch milliseconds."""
    return None if value is None else int(value.timestamp() * 1000)


def sql_str(value: str) -> str:
    """A SQL string literal for a delta-rs predicate."""
    return "'" + value.replace("'", "''") + "'"


_SQL = {arrow: sql for sql, arrow in _TYPES.items()}


def spark_ddl(arrow: pa.Schema) -> str:
    """The Spark DDL of an Arrow schema (``name TYPE [NOT NULL], ...``): for Spark's ``mapInArrow``."""
    return ", ".join(f"`{f.name}` {_SQL[f.type]}{'' if f.nullable else ' NOT NULL'}" for f in arrow)
