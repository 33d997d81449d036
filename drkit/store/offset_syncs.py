"""The ``offset_syncs`` Delta table: which upstream offsets became which downstream offsets.

Written once per mirror micro-batch, idempotently: each write carries Delta's application transaction
(``txnAppId = drkit-mirror-<stream id>`` / ``txnVersion = <batch id>``), so a replayed batch is never
recorded twice. The write path (``ensure``, ``batch_written``, ``write``) goes through delta-rs, without
a Spark job; the readers below use Spark. The stream id is the Spark streaming query id, which lives
in the query's checkpoint: a deleted checkpoint is a new stream, whose batch ids start again at 0
under a new id.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from drkit.core.incarnation import Renewal, by_partition, era_ranges
from drkit.core.offsets import SyncRange, coalesce
from drkit.core.ports import SyncLog, SyncProgress
from drkit.core.translate import SyncIndex
from drkit.errors import StoreError
from drkit.layout import StateLayout
from drkit.store.tables import OFFSET_SYNCS_DDL, OFFSET_SYNCS_PARTITIONS, SCHEMA_VERSION, arrow_schema, table_exists

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class SyncRow:
    """One range of one partition, as delivered by a mirror task."""

    source_topic: str
    target_topic: str
    partition: int
    range: SyncRange


class OffsetSyncStore:
    def __init__(self, spark: SparkSession, tables: StateLayout) -> None:
        self.spark = spark
        self.path = tables.offset_syncs

    def ensure(self) -> None:
        """Create the table if missing (partitioned by ``sync_date``), check its schema version if present.

        Through delta-rs: reading the log takes milliseconds, where a Spark Delta round trip costs seconds
        of planning (tens of seconds on a busy machine) before the mirror can move its first record.
        """
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        from drkit.store.fast import open_table

        if open_table(self.path, "offset_syncs") is not None:
            return
        try:
            DeltaTable.create(
                self.path,
                schema=arrow_schema(OFFSET_SYNCS_DDL),
                partition_by=list(OFFSET_SYNCS_PARTITIONS),
                configuration={"delta.appendOnly": "false"},
                mode="ignore",
            )
            # delta-rs refuses unknown keys at creation, not in a later property change.
            DeltaTable(self.path).alter.set_table_properties(
                {"drkit.schema.version": SCHEMA_VERSION}, raise_if_not_exists=False
            )
        except TableNotFoundError as exc:  # pragma: no cover - a path that cannot hold a table
            raise StoreError(f"Delta table offset_syncs at {self.path} cannot be created: {exc}") from None
        open_table(self.path, "offset_syncs")  # the version check, also when another writer created it

    def batch_written(self, stream_id: str, batch_id: int) -> bool:
        """True when this stream's batch was recorded already (its records are on the target).

        Every append of a stream carries Delta's application transaction (``txnAppId`` =
        ``drkit-mirror-<stream>``, ``txnVersion`` = batch id), and a stream records its batches in
        order, so the answer is in the table's log: no data file is read. Maintenance rewrites rows
        but keeps the log's transaction records, so the answer survives it.
        """
        from drkit.store.fast import open_table

        table = open_table(self.path, "offset_syncs")
        if table is None:
            return False
        recorded = table.transaction_version(_app_id(stream_id))
        return recorded is not None and recorded >= batch_id

    def write(self, flow: str, stream_id: str, batch_id: int, rows: list[SyncRow], at: datetime | None = None) -> int:
        """Append the batch's ranges; a second write of the same (stream, batch) is skipped.

        ``at`` (default: now) is the ``written_at`` time; its UTC date is the row's partition. The
        append goes through delta-rs (milliseconds, no Spark job) with the same application
        transaction Spark would write (``txnAppId``/``txnVersion``), so Spark's readers, maintenance and
        idempotence checks see exactly what a Spark append would have left. Returns the rows appended
        (0 when the batch was recorded before).
        """
        if not rows:
            return 0
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError

        if self.batch_written(stream_id, batch_id):
            return 0
        now = (at or datetime.now(UTC)).astimezone(UTC)
        columns = {
            "flow": [flow] * len(rows),
            "source_topic": [r.source_topic for r in rows],
            "target_topic": [r.target_topic for r in rows],
            "partition": [r.partition for r in rows],
            "upstream_first": [r.range.upstream_first for r in rows],
            "upstream_last": [r.range.upstream_last for r in rows],
            "downstream_first": [r.range.downstream_first for r in rows],
            "downstream_last": [r.range.downstream_last for r in rows],
            "record_count": [r.range.record_count for r in rows],
            "batch_id": [batch_id] * len(rows),
            "stream_id": [stream_id] * len(rows),
            "written_at": [now] * len(rows),
            "sync_date": [now.date()] * len(rows),
        }
        table = pa.Table.from_pydict(columns, schema=arrow_schema(OFFSET_SYNCS_DDL))
        commit = CommitProperties(app_transactions=[Transaction(_app_id(stream_id), batch_id)])
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                write_deltalake(
                    self.path,
                    table,
                    mode="append",
                    partition_by=list(OFFSET_SYNCS_PARTITIONS),
                    commit_properties=commit,
                )
                break
            except CommitFailedError as exc:
                # delta-rs treats a concurrent rewrite of other rows (drkit maintain, Spark) as a conflict with
                # this append, which reads nothing: try again on the new snapshot, unless the batch got recorded.
                if self.batch_written(stream_id, batch_id):
                    return 0
                if attempt + 1 == COMMIT_ATTEMPTS:
                    raise StoreError(
                        f"offset_syncs at {self.path}: appending batch {batch_id} of stream {stream_id} "
                        f"failed {COMMIT_ATTEMPTS} times: {_first_line(exc)}"
                    ) from None
                time.sleep(0.1 * (attempt + 1))
            except Exception as exc:  # delta-rs raises its own error types; the operator needs one line
                raise StoreError(
                    f"offset_syncs at {self.path}: appending batch {batch_id} of stream {stream_id} "
                    f"failed: {_first_line(exc)}"
                ) from None
        return len(rows)

    def ranges(
        self, flow: str, topics: list[str] | None = None, version: int | None = None, as_of: str | None = None
    ) -> dict[tuple[str, int], list[SyncRange]]:
        """All ranges of a flow per (source topic, partition), coalesced, optionally at a past version/time.

        Adjacent ranges that continue each other on both sides are merged in Spark before they
        reach the driver (gaps-and-islands over a window), so a day of one-second batches costs
        one range per real gap, not one per batch. The mapping is unchanged by the merge.
        """
        if not table_exists(self.spark, self.path):
            return {}
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        elif as_of is not None:
            reader = reader.option("timestampAsOf", as_of)
        df = reader.load(self.path).where(f"flow = '{_quote(flow)}'")
        if topics is not None:
            df = df.where(df.source_topic.isin(topics))
        return _collect_ranges(df)

    def ranges_since(
        self, flow: str, seen: dict[str, int], version: int
    ) -> tuple[dict[tuple[str, int], list[SyncRange]], dict[str, int]]:
        """The flow's ranges in rows newer than ``seen`` (stream id -> highest batch id read), at ``version``.

        Returns the new ranges (coalesced) and the updated high-water marks. Why this is complete: a
        stream's batch ids only grow, and a row merged by maintenance carries the greatest batch id
        it holds, so any pair not yet read is in a row above its stream's mark. A merged row may
        repeat pairs already read; repeats do not change a translation.
        """
        from pyspark.sql import functions as F

        df = self.spark.read.format("delta").option("versionAsOf", version).load(self.path)
        df = df.where(F.col("flow") == flow)
        if seen:
            newer = ~F.col("stream_id").isin(list(seen))
            for stream_id, batch_id in seen.items():
                newer = newer | ((F.col("stream_id") == stream_id) & (F.col("batch_id") > batch_id))
            df = df.where(newer)
        marks = dict(seen)
        for row in df.groupBy("stream_id").agg(F.max("batch_id")).collect():
            marks[row[0]] = max(marks.get(row[0], -1), int(row[1]))
        return (_collect_ranges(df) if marks != seen else {}), marks

    def progress(self, flow: str) -> dict[tuple[str, int], SyncProgress]:
        """Per (source topic, partition): the last mirrored upstream offset, its downstream offset and
        when the last sync was written. What the mirror had done when it last recorded."""
        from pyspark.sql import functions as F

        if not table_exists(self.spark, self.path):
            return {}
        df = self.spark.read.format("delta").load(self.path).where(F.col("flow") == flow)
        rows = (
            df.groupBy("source_topic", "partition")
            .agg(
                F.max_by(F.struct("upstream_last", "downstream_last"), "upstream_last").alias("last"),
                F.max(F.expr("unix_millis(written_at)")).alias("at"),
            )
            .collect()
        )
        return {(r[0], r[1]): SyncProgress(r["last"][0], r["last"][1], r["at"]) for r in rows}

    def version(self) -> int | None:
        """The table's current Delta version (None when it does not exist): a cheap change check."""
        if not table_exists(self.spark, self.path):
            return None
        from delta.tables import DeltaTable

        row = DeltaTable.forPath(self.spark, self.path).history(1).select("version").first()
        return int(row[0]) if row is not None else None

    def target_topics(self, flow: str) -> dict[str, str]:
        """source topic -> target topic, for every topic the flow has mirrored."""
        if not table_exists(self.spark, self.path):
            return {}
        df = self.spark.read.format("delta").load(self.path).where(f"flow = '{_quote(flow)}'")
        return {r[0]: r[1] for r in df.select("source_topic", "target_topic").distinct().collect()}


#: The offset columns of a range row.
OFFSETS = ("upstream_first", "upstream_last", "downstream_first", "downstream_last")


def merge_islands(
    df: DataFrame, keys: Sequence[str], tiebreak: Sequence[str] = (), aggregates: Mapping[str, Column] | None = None
) -> DataFrame:
    """Gaps-and-islands: merge the rows of ``df`` that continue each other on both sides, per ``keys``.

    Within a key, rows are ordered by upstream then downstream start (then ``tiebreak``); an
    island is a chain of rows each starting right after the previous one ends, on both sides, so
    its merged range stands for exactly the union of their pairs. Returns ``keys``, the four
    offsets, ``record_count`` (recomputed from the merged range) and one column per
    ``aggregates`` entry (name -> aggregate expression over the island's rows), in that order.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    extra = aggregates or {}
    w = Window.partitionBy(*keys).orderBy("upstream_first", "downstream_first", *tiebreak)
    continues = (F.lag("upstream_last").over(w) + 1 == F.col("upstream_first")) & (
        F.lag("downstream_last").over(w) + 1 == F.col("downstream_first")
    )
    islands = df.withColumn("_new", F.when(continues, 0).otherwise(1)).withColumn(
        "_island", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    )
    return (
        islands.groupBy(*keys, "_island")
        .agg(
            F.min("upstream_first").alias("upstream_first"),
            F.max("upstream_last").alias("upstream_last"),
            F.min("downstream_first").alias("downstream_first"),
            F.max("downstream_last").alias("downstream_last"),
            *(agg.alias(name) for name, agg in extra.items()),
        )
        .select(*keys, *OFFSETS, (F.col("upstream_last") - F.col("upstream_first") + 1).alias("record_count"), *extra)
    )


def coalesced(df: DataFrame) -> DataFrame:
    """(source_topic, partition, upstream_first, upstream_last, downstream_first, downstream_last,
    record_count, target_topic) with ranges that continue each other on both sides merged.

    Identical ranges (the same pairs in rows of more than one stream) are taken once.
    """
    from pyspark.sql import functions as F

    keys = ["source_topic", "partition"]
    ranges = df.select(*keys, *OFFSETS, "target_topic").dropDuplicates([*keys, *OFFSETS])
    return merge_islands(ranges, keys, aggregates={"target_topic": F.first("target_topic")})


def _collect_ranges(df: DataFrame) -> dict[tuple[str, int], list[SyncRange]]:
    """The rows of ``df`` coalesced in Spark, brought to the driver per (source topic, partition)."""
    out: dict[tuple[str, int], list[SyncRange]] = defaultdict(list)
    for row in coalesced(df).toLocalIterator():
        out[(row[0], row[1])].append(SyncRange(row[2], row[3], row[4], row[5]))
    return dict(out)


#: Attempts of one offset-syncs append that conflicts with a concurrent rewrite (maintenance).
COMMIT_ATTEMPTS = 10


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _app_id(stream_id: str) -> str:
    """Delta's application id of a mirror stream's appends (the same one Spark's ``txnAppId`` wrote)."""
    return f"drkit-mirror-{stream_id}"


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


class SyncIndexCache:
    """A flow's sync indexes kept in memory and updated incrementally as the mirror appends.

    The checkpoint translator re-translates every few seconds while the mirror commits a batch
    every second or so: reloading the whole table each time would cost a scan of every row written
    since the last maintenance (millions by the end of a day). Only rows above each stream's
    batch high-water mark are read, at a pinned table version.
    """

    def __init__(self, store: SyncLog, flow: str, renewals: Callable[[], Sequence[Renewal]] | None = None) -> None:
        self.store = store
        self.flow = flow
        #: Re-created topics (drkit.core.incarnation): their partitions are indexed with the newest
        #: incarnation's syncs only, the one a committed offset read now belongs to.
        self._renewals = renewals or (lambda: ())
        self.version: int | None = None
        self._seen: dict[str, int] = {}
        self._ranges: dict[tuple[str, int], list[SyncRange]] = {}
        self._indexes: dict[tuple[str, int], SyncIndex] = {}

    def indexes(self) -> dict[tuple[str, int], SyncIndex]:
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
