"""Maintenance of the Delta tables: coalesce old offset-syncs, compact small files, remove old files.

Why it is needed: the mirror appends, per micro-batch, one ``offset_syncs`` row per partition
(more where a batch has gaps), each in its own small file. A day of one-second batches on 100
partitions is 8.64M rows in 86,400 files; every translation load reads and coalesces all of them.
Almost all of those rows continue each other on both sides, so they can be merged without changing
the translation at all: the set of (upstream, downstream) pairs stays exactly the same.

What is left alone, and why:

* the rows of the most recent ``keep_recent_batches`` batch ids of each stream: the mirror, when
  it restarts, asks ``batch_written(stream_id, batch_id)`` of the batch Spark replays (the latest
  one), and that question is answered from those rows;
* rows of different streams are never merged: a replay (a new stream id after a deleted
  checkpoint) overlaps the old stream, and the earliest-copy rule of the translation needs both;
* sync pairs are never deleted: a merged row stands for exactly the pairs of the rows it replaces.

Only rows of completed UTC days are rewritten (``sync_date < today``), and rows are merged only
within one day. Why: open-source Delta commits every data change at Serializable isolation, and it
checks the files a concurrent transaction added against the rewrite's *partition* predicates only
(data predicates are not evaluated, so on an unpartitioned table every concurrent append would be a
conflict). ``offset_syncs`` is partitioned by ``sync_date`` and the mirror appends to today's
partition, so a rewrite of earlier days does not conflict with a running mirror.

The rewrite is one Delta transaction: an overwrite with ``replaceWhere`` whose predicate matches
exactly the rows rewritten: ``sync_date < today AND ((flow = .. AND stream_id = .. AND batch_id <=
cutoff) OR ...)``, one term per stream that has something to merge, the partition conjunct first so
Delta can use it for conflict detection. A batch written just before midnight and committed just
after it may still land in the rewritten region: Delta then refuses the rewrite
(ConcurrentAppendException) and maintenance starts again from a fresh snapshot, at most
``ATTEMPTS`` times. Two maintenance runs at once stay correct too: the region is rewritten from its
own pairs, which maintenance never changes.

Then OPTIMIZE compacts the small files of ``offset_syncs`` and ``checkpoints``, and VACUUM removes
files no longer referenced and older than the retention. Delta refuses a retention below 168 hours
(time travel, and readers still using an older snapshot, need those files); drkit does not switch
that safety check off: a shorter retention is a :class:`~drkit.errors.ConfigError`.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from drkit.core.reports import CoalesceFigures, MaintenanceReport, TableFigures
from drkit.errors import ConfigError, DrkitError, StoreError
from drkit.layout import StateLayout
from drkit.store import checkpoints as checkpoints_table
from drkit.store import offset_syncs
from drkit.store.delta import open_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from drkit.config import DrkitConfig

#: Delta's default ``delta.deletedFileRetentionDuration`` (7 days): VACUUM refuses less unless its
#: safety check is disabled, which drkit never does.
MIN_VACUUM_RETENTION_HOURS = 168.0
#: Longer is a typo of units (and ``inf`` would reach Spark as an interval it cannot hold): ten years.
MAX_VACUUM_RETENTION_HOURS = 87_600.0
#: The rank the cutoff is found by (Spark's row_number) is a 32-bit integer.
MAX_KEEP_RECENT_BATCHES = 2**31 - 1
#: Tries of the offset_syncs rewrite when a concurrent commit landed in its region (see the docstring).
ATTEMPTS = 3

log = logging.getLogger(__name__)

_STREAM = ["flow", "stream_id"]
#: Rows are merged only within one stream, one source partition and one target topic.
_RANGE_KEYS = ["flow", "stream_id", "source_topic", "partition", "target_topic", "sync_date"]
_COLUMNS = offset_syncs.SPEC.columns


def check_settings(keep_recent_batches: int, vacuum_retention_hours: float) -> None:
    """Refuse settings that could break the mirror's restart check or readers, before anything is done."""
    if keep_recent_batches < 1:
        raise ConfigError(
            f"keep_recent_batches must be at least 1 (got {keep_recent_batches}): the mirror's restart "
            "check needs the rows of the latest batch of each stream"
        )
    if keep_recent_batches > MAX_KEEP_RECENT_BATCHES:
        raise ConfigError(f"keep_recent_batches must be at most {MAX_KEEP_RECENT_BATCHES}")
    if not math.isfinite(vacuum_retention_hours) or vacuum_retention_hours > MAX_VACUUM_RETENTION_HOURS:
        raise ConfigError(
            f"vacuum retention must be a number of hours from {MIN_VACUUM_RETENTION_HOURS:g} to "
            f"{MAX_VACUUM_RETENTION_HOURS:g} (ten years)"
        )
    if not vacuum_retention_hours >= MIN_VACUUM_RETENTION_HOURS:
        raise ConfigError(
            f"vacuum retention of {vacuum_retention_hours:g} hours is below Delta's minimum of "
            f"{MIN_VACUUM_RETENTION_HOURS:g} hours (7 days): files younger than that may still be read by "
            "a running job or by time travel (--as-of/--version). Use at least 168 hours; drkit does not "
            "disable Delta's retention check"
        )


def maintain(
    spark: SparkSession,
    tables: StateLayout,
    config: DrkitConfig,
    keep_recent_batches: int = 100,
    vacuum_retention_hours: float = MIN_VACUUM_RETENTION_HOURS,
    today: date | None = None,
) -> MaintenanceReport:
    """Coalesce old offset-syncs, then OPTIMIZE and VACUUM ``offset_syncs`` and ``checkpoints``.

    ``config`` names the state in messages; every flow found in the table is maintained, including
    flows no longer configured (their syncs still translate old checkpoints). Only days before ``today``
    (default: the UTC date now) are coalesced.
    """
    check_settings(keep_recent_batches, vacuum_retention_hours)
    started = time.monotonic()
    syncs = TableFigures()
    coalesce = CoalesceFigures()
    checkpoints = TableFigures()
    syncs_at, checkpoints_at = str(tables.offset_syncs), str(tables.checkpoints)  # Spark's paths (s3a:// too)
    with _as_store_error("offset_syncs", syncs_at):
        if open_table(tables.offset_syncs, offset_syncs.SPEC.name) is not None:  # with its version guard
            syncs.files_before = _num_files(spark, syncs_at)
            coalesce, syncs.rows_before = coalesce_syncs(spark, syncs_at, keep_recent_batches, today)
            _compact_and_vacuum(spark, syncs_at, syncs, vacuum_retention_hours, config)
            syncs.rows_after = _count(spark, syncs_at)
    with _as_store_error("checkpoints", checkpoints_at):
        if open_table(tables.checkpoints, checkpoints_table.SPEC.name) is not None:
            checkpoints.rows_before = _count(spark, checkpoints_at)
            checkpoints.files_before = _num_files(spark, checkpoints_at)
            _compact_and_vacuum(spark, checkpoints_at, checkpoints, vacuum_retention_hours, config)
            checkpoints.rows_after = _count(spark, checkpoints_at)
    return MaintenanceReport(
        tables.where,
        keep_recent_batches,
        vacuum_retention_hours,
        syncs,
        coalesce,
        checkpoints,
        round(time.monotonic() - started, 3),
    )


@contextmanager
def _as_store_error(name: str, path: str) -> Iterator[None]:
    """A Spark/Delta failure on one table as one line (exit 6) instead of a Java trace.

    The tables are checked with delta-rs before Spark starts (drkit.store.delta.check_readable), so this
    is the fallback for damage that appears while maintenance runs or that only Spark notices. Every
    step is one Delta commit: what was committed before the failure is consistent.
    """
    try:
        yield
    except DrkitError:
        raise
    except Exception as exc:
        raise StoreError(
            f"maintenance of Delta table {name} at {path} failed: {java_cause(exc)}. If the table's _delta_log "
            "or a data file is missing or damaged, restore the table folder from a backup; committed steps "
            "are consistent, run drkit maintain again once the cause is fixed"
        ) from None


def java_cause(exc: BaseException) -> str:
    """The message of the innermost useful Java exception in a Py4J error, on one short line."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for line in lines:
        m = re.match(r"^(?::\s*)?(?:[\w$]+\.)*[\w$]*(?:Exception|Error): (.+)$", line)
        if m:
            text = m.group(1)
            return text if len(text) <= 300 else text[:300] + "..."
    first = lines[0] if lines else type(exc).__name__
    return first if len(first) <= 300 else first[:300] + "..."


def coalesce_syncs(
    spark: SparkSession, path: str, keep_recent_batches: int, before: date | None = None
) -> tuple[CoalesceFigures, int]:
    """Merge the old rows of each stream that continue each other on both sides, in one transaction.

    Only rows of UTC days before ``before`` (default: today) are rewritten. Each attempt reads one
    pinned table version, so the cutoffs, the merge and the figures agree with each other while the
    mirror keeps appending; an attempt that Delta refuses for a concurrent commit in its region is
    started again. Returns the figures and the row count of the version read.
    """
    day = before or datetime.now(UTC).date()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            figures, rows = _coalesce_once(spark, path, keep_recent_batches, day)
        except Exception as exc:  # Delta's conflict exceptions arrive as Py4JJavaError
            if not _is_conflict(exc):
                raise
            if attempt == ATTEMPTS:
                raise StoreError(
                    f"offset_syncs at {path}: {ATTEMPTS} attempts to coalesce were refused by Delta because "
                    "other commits changed the same rows; nothing was rewritten. Run drkit maintain again"
                ) from None
            log.warning("offset_syncs: a concurrent commit touched the rows being coalesced; trying again")
            continue
        figures.attempts = attempt
        return figures, rows
    raise AssertionError("unreachable")


def _is_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return "DELTA_CONCURRENT" in text or "ConcurrentAppendException" in text or "ConcurrentDeleteRead" in text


def _coalesce_once(
    spark: SparkSession, path: str, keep_recent_batches: int, before: date
) -> tuple[CoalesceFigures, int]:
    from delta.tables import DeltaTable
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    figures = CoalesceFigures(before_date=before.isoformat())
    head = DeltaTable.forPath(spark, path).history(1).select("version").first()
    if head is None:
        return figures, 0
    figures.version_read = int(head[0])
    df = spark.read.format("delta").option("versionAsOf", figures.version_read).load(path)
    rows_before = df.count()
    cutoffs = _cutoffs(df, keep_recent_batches)
    figures.streams = df.select(*_STREAM).distinct().count()
    if not cutoffs:
        figures.seconds = round(time.monotonic() - started, 3)
        return figures, rows_before
    cut = spark.createDataFrame(cutoffs, "flow STRING, stream_id STRING, _cutoff BIGINT")
    old = (
        df.where(F.col("sync_date") < F.lit(before))
        .join(F.broadcast(cut), _STREAM)
        .where(F.col("batch_id") <= F.col("_cutoff"))
        .drop("_cutoff")
    )
    merged = _merge_islands(old).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stats = merged.agg(
            F.sum("_rows").alias("eligible"),
            F.sum(F.when(F.col("_rows") > 1, F.col("_rows")).otherwise(0)).alias("merged"),
            F.sum(F.when(F.col("_rows") > 1, 1).otherwise(0)).alias("into"),
            F.sum(F.when(_broken(), 1).otherwise(0)).alias("broken"),
        ).first()
        assert stats is not None
        if stats["broken"]:
            raise StoreError(
                f"offset_syncs at {path}: {stats['broken']} merged ranges would not stand for exactly the "
                "pairs of the rows they replace; nothing was rewritten (please report this)"
            )
        figures.rows_eligible = int(stats["eligible"] or 0)
        rewrite = sorted((r[0], r[1]) for r in merged.where(F.col("_rows") > 1).select(*_STREAM).distinct().collect())
        if rewrite:
            by_stream = {(f, s): c for f, s, c in cutoffs}
            figures.cutoffs = {f"{f}/{s}": by_stream[(f, s)] for f, s in rewrite}
            # The partition conjunct comes first and alone: it is what Delta's conflict check evaluates.
            predicate = (
                f"sync_date < DATE'{before.isoformat()}' AND ("
                + " OR ".join(
                    f"(flow = {_sql_str(f)} AND stream_id = {_sql_str(s)} AND batch_id <= {by_stream[(f, s)]})"
                    for f, s in rewrite
                )
                + ")"
            )
            chosen = spark.createDataFrame(rewrite, "flow STRING, stream_id STRING")
            out = merged.join(F.broadcast(chosen), _STREAM).select(*_COLUMNS)
            (out.write.format("delta").mode("overwrite").option("replaceWhere", predicate).save(path))
            figures.streams_rewritten = len(rewrite)
            figures.ranges_merged = int(stats["merged"] or 0)
            figures.merged_into = int(stats["into"] or 0)
            figures.rows_rewritten = merged.join(F.broadcast(chosen), _STREAM).count()
    finally:
        merged.unpersist()
    figures.seconds = round(time.monotonic() - started, 3)
    return figures, rows_before


def _cutoffs(df: DataFrame, keep_recent_batches: int) -> list[tuple[str, str, int]]:
    """(flow, stream_id, cutoff) per stream with more than ``keep_recent_batches`` batch ids.

    The cutoff is the highest batch id that is not among the stream's ``keep_recent_batches``
    highest batch ids present in the table (a batch without records writes no row, so ids can skip).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(*_STREAM).orderBy(F.col("batch_id").desc())
    ranked = df.select(*_STREAM, "batch_id").distinct().withColumn("_rank", F.row_number().over(w))
    rows = ranked.where(F.col("_rank") == keep_recent_batches + 1).select(*_STREAM, "batch_id").collect()
    return sorted((r[0], r[1], int(r[2])) for r in rows)


def _merge_islands(old: DataFrame) -> DataFrame:
    """Gaps-and-islands per :data:`_RANGE_KEYS`, in Spark (the rule of drkit.store.offset_syncs.merge_rows).

    Rows with the same start on both sides are ordered by batch id. A merged row carries the
    greatest batch id and ``written_at`` of its rows; ``_rows`` counts the rows of an island (1: the
    row is written back unchanged except for ``record_count``, which is recomputed) and ``_pairs``
    the pairs they stand for (checked by :func:`_broken`).
    """
    from pyspark.sql import functions as F

    return _islands(
        old,
        _RANGE_KEYS,
        tiebreak=["batch_id"],
        aggregates={
            "batch_id": F.max("batch_id"),
            "written_at": F.max("written_at"),
            "_rows": F.count(F.lit(1)),
            "_pairs": F.sum(F.col("upstream_last") - F.col("upstream_first") + 1),
        },
    )


def _broken() -> Any:
    """A merged range whose sides differ in length or that does not hold exactly its rows' pairs."""
    from pyspark.sql import functions as F

    return (
        (F.col("upstream_last") - F.col("upstream_first")) != (F.col("downstream_last") - F.col("downstream_first"))
    ) | (F.col("record_count") != F.col("_pairs"))


def _compact_and_vacuum(
    spark: SparkSession, path: str, figures: TableFigures, retention_hours: float, config: DrkitConfig
) -> None:
    from delta.tables import DeltaTable

    started = time.monotonic()
    table = DeltaTable.forPath(spark, path)
    metrics = table.optimize().executeCompaction().select("metrics.numFilesAdded", "metrics.numFilesRemoved").first()
    if metrics is not None:
        figures.optimize_files_added = int(metrics[0] or 0)
        figures.optimize_files_removed = int(metrics[1] or 0)
    figures.optimize_seconds = round(time.monotonic() - started, 3)
    started = time.monotonic()
    try:
        table.vacuum(retention_hours)
    except Exception as exc:  # Delta raises IllegalArgumentException through Py4J
        if "retention" in str(exc).lower():
            where = f" (state of {config.source_path})" if config.source_path else ""
            raise ConfigError(
                f"Delta refused to VACUUM {path}{where} with a retention of {retention_hours:g} hours: "
                f"{str(exc).splitlines()[0]}. The table's delta.deletedFileRetentionDuration is longer; "
                "use at least that retention"
            ) from None
        raise
    figures.vacuumed = True
    figures.vacuum_seconds = round(time.monotonic() - started, 3)
    figures.files_after = _num_files(spark, path)


def _count(spark: SparkSession, path: str) -> int:
    return int(spark.read.format("delta").load(path).count())


def _num_files(spark: SparkSession, path: str) -> int:
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, path).detail().select("numFiles").first()
    return int(row[0]) if row is not None else 0


def _sql_str(value: str) -> str:
    """A SQL string literal (the predicate of replaceWhere is SQL text)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _islands(df: DataFrame, keys: list[str], tiebreak: list[str], aggregates: dict[str, Any]) -> DataFrame:
    """Gaps-and-islands: merge the rows of ``df`` that continue each other on both sides, per ``keys``.

    Within a key, rows are ordered by upstream then downstream start (then ``tiebreak``); an island is
    a chain of rows each starting right after the previous one ends, on both sides, so its merged range
    stands for exactly the union of their pairs. Returns ``keys``, the four offsets, ``record_count``
    (recomputed from the merged range) and one column per ``aggregates`` entry, in that order.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    offsets = list(offset_syncs.OFFSETS)
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
            *(agg.alias(name) for name, agg in aggregates.items()),
        )
        .select(
            *keys, *offsets, (F.col("upstream_last") - F.col("upstream_first") + 1).alias("record_count"), *aggregates
        )
    )
