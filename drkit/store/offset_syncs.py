"""The ``offset_syncs`` Delta table: which upstream offsets became which downstream offsets.

Invariants:

* **Idempotent per batch.** Each mirror batch is one commit carrying Delta's application transaction
  (``txnAppId = drkit-mirror-<stream id>``, ``txnVersion = <batch id>``), so a replayed batch is never
  recorded twice. The stream id is the Spark streaming query id: a deleted checkpoint is a new stream.
* **Kept coalesced as written.** Every ``compact_every`` batches of a stream, its commit replaces the
  stream's rows of the current UTC day with the same pairs, coalesced by the one rule
  (``drkit.core.offsets.islands``, transcribed to Arrow here), in the same commit as the new batch.
  So a day of one-second batches costs one row per real gap plus at most ``compact_every`` batches
  of rows, at any time of day, without ``drkit maintain``. A merged row carries the greatest batch id
  and ``written_at`` of its rows; the set of (upstream, downstream) pairs never changes, and rows of
  different streams, partitions, target topics or days are never merged. The replacement's predicate
  names the flow, the stream and the day (the partition), so it conflicts neither with another flow's
  appends nor with maintenance, which rewrites completed days only.
* **One shape.** A batch's ranges travel as an Arrow table of :data:`RANGE_SCHEMA` columns from the
  copier (drkit.mirror.deliver) to this table, where the batch's columns are added.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from drkit.core.incarnation import Renewal, by_partition, era_ranges
from drkit.core.offsets import SyncRange, coalesce
from drkit.core.ports import SyncLog, SyncProgress, TopicPartition
from drkit.core.translate import SyncIndex
from drkit.errors import StoreError
from drkit.layout import StateLayout
from drkit.store import delta
from drkit.store.delta import TableSpec
from drkit.store.table_history import TableVersion, table_versions

#: The offset columns of a range.
OFFSETS = ("upstream_first", "upstream_last", "downstream_first", "downstream_last")

#: One contiguous range of one partition's copies: what a copy returns and the middle of a table row.
RANGE_SCHEMA = delta.schema(
    "source_topic STRING NOT NULL, target_topic STRING NOT NULL, partition INT NOT NULL, "
    "upstream_first BIGINT NOT NULL, upstream_last BIGINT NOT NULL, downstream_first BIGINT NOT NULL, "
    "downstream_last BIGINT NOT NULL, record_count BIGINT NOT NULL"
)

#: ``offset_syncs`` is partitioned by the UTC date of ``written_at``. Why: open-source Delta checks a
#: concurrent append against a rewrite's *partition* predicates; with the date as partition, maintenance
#: rewrites completed days while the mirror appends to today.
SPEC = TableSpec(
    "offset_syncs",
    pa.schema(
        [
            *delta.schema("flow STRING NOT NULL"),
            *RANGE_SCHEMA,
            *delta.schema(
                "batch_id BIGINT NOT NULL, stream_id STRING NOT NULL, written_at TIMESTAMP NOT NULL, "
                "sync_date DATE NOT NULL"
            ),
        ]
    ),
    partitions=("sync_date",),
)

#: A stream's rows of the day are coalesced every this many batches (see the module docstring).
COMPACT_EVERY = 60


def range_table(ranges: Iterable[tuple[str, str, int, SyncRange]]) -> pa.Table:
    """Ranges given as (source topic, target topic, partition, range) in the one shape (tests, benchmarks)."""
    items = list(ranges)
    return pa.Table.from_pydict(
        {
            "source_topic": [i[0] for i in items],
            "target_topic": [i[1] for i in items],
            "partition": [i[2] for i in items],
            **{name: [getattr(i[3], name) for i in items] for name in OFFSETS},
            "record_count": [i[3].record_count for i in items],
        },
        schema=RANGE_SCHEMA,
    )


@dataclass(frozen=True)
class SyncRow:
    """One ``offset_syncs`` row as stored (one range of one batch, or of several merged), for inspection."""

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


_ROW_COLUMNS = [name for name in SPEC.columns if name != "sync_date"]


def _flow_is(flow: str) -> pc.Expression:
    return pc.field("flow") == flow


def _one_of(column: str, values: Sequence[str]) -> pc.Expression:
    # Typed, so that an empty list is "no row" rather than a type error in the scan.
    return pc.field(column).isin(pa.array(list(values), pa.string()))


def _app_id(stream_id: str) -> str:
    """Delta's application id of a mirror stream's commits (the same one Spark's ``txnAppId`` writes)."""
    return f"drkit-mirror-{stream_id}"


def lease_app_id(flow: str) -> str:
    """Delta's application id of a flow's lease epochs (drkit.core.mirror_lease): its version is the epoch of
    the newest process that took the flow's mirror over."""
    return f"drkit-lease-{flow}"


class SyncTable:
    """``offset_syncs``: implements ``SyncLog`` (the readers of the operations and the translator) and the
    mirror's idempotent, self-coalescing writes."""

    def __init__(self, layout: StateLayout, compact_every: int = COMPACT_EVERY) -> None:
        self.path = layout.offset_syncs
        #: 0: never coalesce on write (tests of maintenance, which need rows as batches wrote them).
        self.compact_every = compact_every
        self._since_compaction: dict[tuple[str, str], int] = {}
        self._handle = delta.Handle(self.path, SPEC)

    # -- the mirror's writes ----------------------------------------------------------------------

    def ensure(self) -> None:
        """Create the table if missing, check its schema version if present (milliseconds: delta-rs)."""
        self._handle.for_writing()

    def batch_written(self, stream_id: str, batch_id: int) -> bool:
        """True when this stream's batch was recorded already (its records are on the target).

        Every commit of a stream carries its application transaction and a stream records its batches
        in order, so the answer is in the table's log: no data file is read. Rewrites (coalescing,
        maintenance) keep the log's transaction records, so the answer survives them.
        """
        table = self._handle.current()
        if table is None:
            return False
        recorded = table.transaction_version(_app_id(stream_id))
        return recorded is not None and recorded >= batch_id

    def epoch(self, flow: str) -> int:
        """The epoch of the newest process that took ``flow``'s mirror over (0: none yet)."""
        table = self._handle.current()
        recorded = None if table is None else table.transaction_version(lease_app_id(flow))
        return recorded or 0

    def fence(self, flow: str) -> int:
        """Take ``flow``'s next epoch, one above the newest, in a commit of its own (no rows): from then on the
        sync appends of every older epoch are refused (``write``'s ``epoch``). Two processes fencing at once
        both read the same newest epoch: delta-rs commits one and refuses the other, which reads again and
        takes the next. Returns the epoch taken."""
        for _ in range(delta.COMMIT_ATTEMPTS):
            # The epoch is read from the snapshot the commit is made on (not brought up to date between).
            table = self._handle.for_writing()
            epoch = (table.transaction_version(lease_app_id(flow)) or 0) + 1
            empty = SPEC.schema.empty_table()
            if delta.write(
                self.path,
                SPEC,
                empty,
                app=(lease_app_id(flow), epoch),
                done=lambda: True,
                what=f"fencing epoch {epoch} of {flow}",
                table=table,
            ):
                return epoch
        raise StoreError(f"offset_syncs at {self.path}: fencing flow {flow}: every attempt met a concurrent fence")

    def write(
        self,
        flow: str,
        stream_id: str,
        batch_id: int,
        ranges: pa.Table,
        at: datetime | None = None,
        epoch: int | None = None,
    ) -> int:
        """Record the batch's ``ranges`` (:data:`RANGE_SCHEMA`); a second write of a (stream, batch) is skipped.

        ``at`` (default: now) is the ``written_at`` time; its UTC date is the row's partition. ``epoch``: this
        process's lease epoch (:meth:`fence`); the append is refused (:class:`~drkit.errors.FencedError`) once a
        newer epoch was taken, and records its own. Every
        ``compact_every`` batches of the stream (and on its first write in this process), the commit also
        coalesces the stream's rows of that day. Returns the rows of the batch (0 when recorded before).
        """
        if not ranges.num_rows:
            return 0
        if self.batch_written(stream_id, batch_id):
            return 0
        now = (at or datetime.now(UTC)).astimezone(UTC)
        # Spark's collected Arrow (nullable, maybe large strings) or the copier's own: the one range schema.
        rows = _with_batch(ranges.select(RANGE_SCHEMA.names).cast(RANGE_SCHEMA), flow, stream_id, batch_id, now)
        key = (flow, stream_id)
        # Plain appends since the stream's last coalescing write (the first write of a process coalesces).
        since = self._since_compaction.get(key, self.compact_every - 1)
        replace = None
        if self.compact_every and since + 1 >= self.compact_every:
            rows, replace = self._coalesced_day(flow, stream_id, now.date(), rows)
        written = self._handle.write(
            rows,
            app=(_app_id(stream_id), batch_id),
            replace=replace,
            done=lambda: self.batch_written(stream_id, batch_id),
            what=f"recording batch {batch_id} of stream {stream_id}",
            fence=None if epoch is None else (lease_app_id(flow), epoch),
        )
        self._since_compaction[key] = 0 if replace is not None else since + 1
        return ranges.num_rows if written else 0

    def _coalesced_day(self, flow: str, stream_id: str, day: date, new: pa.Table) -> tuple[pa.Table, str]:
        """The stream's rows of ``day`` and ``new``, coalesced, and the predicate of the rows they replace."""
        flow_sql, stream_sql = delta.sql_str(flow), delta.sql_str(stream_id)
        predicate = f"sync_date = '{day.isoformat()}' AND flow = {flow_sql} AND stream_id = {stream_sql}"
        old = self._handle.read(
            SPEC.columns,
            (pc.field("sync_date") == pa.scalar(day, pa.date32()))
            & _flow_is(flow)
            & (pc.field("stream_id") == stream_id),
        )
        return merge_rows(pa.concat_tables([old.cast(SPEC.schema), new])), predicate

    # -- readers ----------------------------------------------------------------------------------

    def version(self) -> int | None:
        table = self._handle.current()
        return None if table is None else int(table.version())

    def ranges(self, flow: str, topics: list[str] | None = None) -> dict[TopicPartition, list[SyncRange]]:
        where = _flow_is(flow)
        if topics is not None:
            where = where & _one_of("source_topic", topics)
        return self._handle.memo(
            ("ranges", flow, None if topics is None else tuple(topics)),
            lambda: coalesced(self._handle.read(["source_topic", "partition", *OFFSETS], where)),
        )

    def ranges_since(
        self, flow: str, seen: dict[str, int], version: int
    ) -> tuple[dict[TopicPartition, list[SyncRange]], dict[str, int]]:
        """The flow's ranges in rows newer than ``seen`` (stream id -> highest batch id read), at ``version``.

        Returns the new ranges (coalesced) and the updated high-water marks. Why this is complete: a
        stream's batch ids only grow, and a merged row carries the greatest batch id it holds, so any
        pair not yet read is in a row above its stream's mark. A merged row may repeat pairs already
        read; repeats do not change a translation.
        """
        where = _flow_is(flow)
        if seen:
            newer = ~_one_of("stream_id", list(seen))
            for stream_id, batch_id in seen.items():
                newer = newer | ((pc.field("stream_id") == stream_id) & (pc.field("batch_id") > batch_id))
            where = where & newer
        rows = self._handle.read(["stream_id", "batch_id", "source_topic", "partition", *OFFSETS], where, version)
        marks = dict(seen)
        if rows.num_rows:
            for r in rows.group_by("stream_id").aggregate([("batch_id", "max")]).to_pylist():
                marks[r["stream_id"]] = max(marks.get(r["stream_id"], -1), int(r["batch_id_max"]))
        return (coalesced(rows) if marks != seen else {}), marks

    def progress(self, flow: str) -> dict[TopicPartition, SyncProgress]:
        """Per (source topic, partition): the last mirrored upstream offset, its downstream offset and
        when the last sync was written. What the mirror had done when it last recorded."""
        columns = ["source_topic", "partition", "upstream_last", "downstream_last", "written_at"]
        return self._handle.memo(("progress", flow), lambda: _progress(self._handle.read(columns, _flow_is(flow))))

    def target_topics(self, flow: str) -> dict[str, str]:
        """source topic -> target topic, for every topic the flow has mirrored."""

        def read() -> dict[str, str]:
            rows = self._handle.read(["source_topic", "target_topic"], _flow_is(flow))
            pairs = rows.group_by(["source_topic", "target_topic"]).aggregate([]).to_pylist()
            return {r["source_topic"]: r["target_topic"] for r in pairs}

        return self._handle.memo(("target_topics", flow), read)

    def history(self, flow: str, topic: str, partition: int | None = None, version: int | None = None) -> list[SyncRow]:
        """The stored rows of one source topic (one partition, or all) at ``version`` (None: now), sorted
        by partition, write time and batch; the flow/topic/partition predicate is pushed into the scan."""
        where = _flow_is(flow) & (pc.field("source_topic") == topic)
        if partition is not None:
            where = where & (pc.field("partition") == partition)
        rows = self._handle.read(_ROW_COLUMNS, where, version).sort_by(
            [
                ("partition", "ascending"),
                ("written_at", "ascending"),
                ("batch_id", "ascending"),
                ("upstream_first", "ascending"),
            ]
        )
        return [SyncRow(**r) for r in rows.to_pylist()]

    def versions(self) -> list[TableVersion]:
        return table_versions(self.path, SPEC.name)


def _progress(rows: pa.Table) -> dict[TopicPartition, SyncProgress]:
    """Per (source topic, partition): the greatest upstream offset synced (the greatest downstream among
    equals) and when the partition's last sync was written; vectorised."""
    if not rows.num_rows:
        return {}
    keys = ["source_topic", "partition"]
    rows = rows.sort_by(
        [*((k, "ascending") for k in keys), ("upstream_last", "ascending"), ("downstream_last", "ascending")]
    )
    last = rows.take(last_of_each_key(rows, keys))
    written = rows.group_by(keys).aggregate([("written_at", "max")])
    at = {(r["source_topic"], r["partition"]): r["written_at_max"] for r in written.to_pylist()}
    return {
        (r["source_topic"], r["partition"]): SyncProgress(
            r["upstream_last"], r["downstream_last"], delta.ms(at[(r["source_topic"], r["partition"])])
        )
        for r in last.select([*keys, "upstream_last", "downstream_last"]).to_pylist()
    }


def _with_batch(ranges: pa.Table, flow: str, stream_id: str, batch_id: int, at: datetime) -> pa.Table:
    """The batch's rows: its ranges with the flow, batch, stream and time columns added."""
    n = ranges.num_rows
    columns = {
        "flow": pa.array([flow] * n, pa.string()),
        **{name: ranges.column(name) for name in RANGE_SCHEMA.names},
        "batch_id": pa.array([batch_id] * n, pa.int64()),
        "stream_id": pa.array([stream_id] * n, pa.string()),
        "written_at": pa.array([at] * n, pa.timestamp("us", tz="UTC")),
        "sync_date": pa.array([at.date()] * n, pa.date32()),
    }
    return pa.Table.from_pydict(columns, schema=SPEC.schema)


#: Rows are merged only within one flow, stream, source partition, target topic and day.
MERGE_KEYS = ["flow", "stream_id", "source_topic", "partition", "target_topic", "sync_date"]


def merge_rows(rows: pa.Table) -> pa.Table:
    """``rows`` coalesced per :data:`MERGE_KEYS` (see :func:`merge_rows_counted`)."""
    return merge_rows_counted(rows)[0]


def merge_rows_counted(rows: pa.Table) -> tuple[pa.Table, pa.Array]:
    """``rows`` coalesced per :data:`MERGE_KEYS` by ``drkit.core.offsets.islands``, and how many rows each
    merged row stands for.

    A merged row carries the greatest batch id and ``written_at`` of its island. Checked, not assumed:
    a merged row whose sides differ in length fails (nothing is written).
    """
    if not rows.num_rows:
        return rows, pa.array([], pa.int64())
    rows, (uf, ul, df, dl), starts, ends, island = _islands(rows, MERGE_KEYS)
    first_up, last_up = uf.take(starts), ul.take(ends)
    if pc.any(pc.not_equal(pc.subtract(dl.take(ends), df.take(starts)), pc.subtract(last_up, first_up))).as_py():
        raise StoreError(
            "offset_syncs: a merged range would not stand for exactly its rows' pairs (please report this)"
        )
    newest = (
        pa.table({"island": island, "batch_id": rows.column("batch_id"), "written_at": rows.column("written_at")})
        .group_by("island", use_threads=False)
        .aggregate([("batch_id", "max"), ("written_at", "max")])
        .sort_by("island")
    )
    merged = {
        "upstream_last": last_up,
        "downstream_last": dl.take(ends),
        "record_count": pc.add(pc.subtract(last_up, first_up), 1),
        "batch_id": newest.column("batch_id_max"),
        "written_at": newest.column("written_at_max"),
    }
    out = rows.take(starts)
    for name, values in merged.items():
        out = out.set_column(out.schema.get_field_index(name), name, values)
    counts = pc.add(pc.subtract(pc.cast(ends, pa.int64()), pc.cast(starts, pa.int64())), 1)
    return out.cast(SPEC.schema), counts


def coalesced(rows: pa.Table) -> dict[TopicPartition, list[SyncRange]]:
    """Ranges per (source topic, partition), coalesced by ``drkit.core.offsets.islands``, vectorised: a
    table not yet coalesced holds up to millions of rows, too many to fold one Python object at a time."""
    if not rows.num_rows:
        return {}
    keys = ["source_topic", "partition"]
    rows, (uf, ul, df, dl), starts, ends, _ = _islands(rows.select([*keys, *OFFSETS]), keys)
    topics = rows.column("source_topic").take(starts).to_pylist()
    parts = rows.column("partition").take(starts).to_pylist()
    first_up, last_up = uf.take(starts).to_pylist(), ul.take(ends).to_pylist()
    first_down, last_down = df.take(starts).to_pylist(), dl.take(ends).to_pylist()
    out: dict[TopicPartition, list[SyncRange]] = {}
    for topic, part, u0, u1, d0, d1 in zip(topics, parts, first_up, last_up, first_down, last_down, strict=True):
        out.setdefault((topic, part), []).append(SyncRange(u0, u1, d0, d1))
    return out


#: :func:`drkit.core.offsets.coalesce_order` as sort keys.
_COALESCE_ORDER = ["downstream_first", "upstream_first", "downstream_last"]


def _islands(rows: pa.Table, keys: list[str]) -> tuple[pa.Table, tuple[pa.Array, ...], pa.Array, pa.Array, pa.Array]:
    """``drkit.core.offsets.islands`` per ``keys``, as array operations: ``rows`` sorted by ``keys`` and
    the rule's order, their four offset columns, the indexes of the first and last row of each island,
    and each row's island number. A row joins the island of the row before it (same key) when it is the
    same range or starts right after it ends on both sides; after a repeat, the row before ends where the
    island does, so comparing neighbours is the rule."""
    rows = rows.sort_by([(k, "ascending") for k in [*keys, *_COALESCE_ORDER]])
    uf, ul, df, dl = (rows.column(c).combine_chunks() for c in OFFSETS)
    n = rows.num_rows

    def after(column: pa.Array) -> pa.Array:
        return column.slice(1)

    def before(column: pa.Array) -> pa.Array:
        return column.slice(0, n - 1)

    continues = pc.and_(pc.equal(after(uf), pc.add(before(ul), 1)), pc.equal(after(df), pc.add(before(dl), 1)))
    repeats = pc.and_(
        pc.and_(pc.equal(after(uf), before(uf)), pc.equal(after(df), before(df))),
        pc.equal(after(dl), before(dl)),
    )
    # joins[i] (i >= 1): row i has row i-1's key and continues or repeats it.
    joins = pc.and_(_same_as_next(rows, keys).slice(0, n - 1), pc.or_(continues, repeats))
    first = pa.concat_arrays([pa.array([True]), pc.invert(joins)])
    starts = pc.indices_nonzero(first)
    ends = pc.subtract(pa.concat_arrays([starts.slice(1), pa.array([n], pa.uint64())]), 1)
    island = pc.subtract(pc.cumulative_sum(pc.cast(first, pa.int64())), 1)
    return rows, (uf, ul, df, dl), starts, ends, island


def _same_as_next(rows: pa.Table, keys: Sequence[str]) -> pa.Array:
    """For sorted ``rows``: True where a row has the same ``keys`` as the row after it (the last: False)."""
    n = rows.num_rows
    same = pa.array([True] * max(n - 1, 0), pa.bool_())
    for k in keys:
        column = rows.column(k).combine_chunks()
        same = pc.and_(same, pc.equal(column.slice(1), column.slice(0, n - 1)))
    return pa.concat_arrays([same, pa.array([False])])


def last_of_each_key(rows: pa.Table, keys: Sequence[str]) -> pa.Array:
    """For ``rows`` sorted by ``keys``: the indexes of the last row of each key."""
    return pc.indices_nonzero(pc.invert(_same_as_next(rows, keys)))


class SyncIndexCache:
    """A flow's sync indexes kept in memory and updated incrementally as the mirror appends.

    The checkpoint translator re-translates every few seconds while the mirror commits a batch
    every second or so: only rows above each stream's batch high-water mark are read, at a pinned
    table version.
    """

    def __init__(self, store: SyncLog, flow: str, renewals: Callable[[], Sequence[Renewal]] | None = None) -> None:
        self.store = store
        self.flow = flow
        #: Re-created topics (drkit.core.incarnation): their partitions are indexed with the newest
        #: incarnation's syncs only, the one a committed offset read now belongs to.
        self._renewals = renewals or (lambda: ())
        self.version: int | None = None
        self._seen: dict[str, int] = {}
        self._ranges: dict[TopicPartition, list[SyncRange]] = {}
        self._indexes: dict[TopicPartition, SyncIndex] = {}

    def indexes(self) -> dict[TopicPartition, SyncIndex]:
        version = self.store.version()
        if version is None or version == self.version:
            return self._indexes
        new, self._seen = self.store.ranges_since(self.flow, self._seen, version)
        renewed = by_partition(self._renewals())
        for key, ranges in new.items():
            self._ranges[key] = coalesce(set(self._ranges.get(key, [])) | set(ranges))
        for key in set(new) | set(renewed):
            if key in self._ranges:
                self._indexes[key] = SyncIndex(era_ranges(self._ranges[key], renewed.get(key, []), None))
        self.version = version
        return self._indexes
