"""Maintenance of the Delta tables on delta-rs: coalesce old offset-syncs, compact small files, remove old files.

Why it is needed: the mirror appends, per micro-batch, one ``offset_syncs`` row per partition (more where
a batch has gaps), each in its own small file, and coalesces a stream's rows of the day every 60 batches
(drkit.store.offset_syncs). Maintenance merges what is left of completed days, OPTIMIZEs the small files
and VACUUMs the files no commit references any more. No JVM: like every other command, it reads and
writes the tables through delta-rs.

What is left alone, and why:

* the rows of the most recent ``keep_recent_batches`` batch ids of each stream: the mirror, when it
  restarts, asks ``batch_written(stream_id, batch_id)`` of the batch Spark replays;
* rows of different streams are never merged: a replay (a new stream id after a deleted checkpoint)
  overlaps the old stream, and the earliest-copy rule of the translation needs both;
* sync pairs are never deleted: rows are merged by the one coalesce rule (drkit.core.offsets.islands,
  the writer's own), under which a merged row stands for exactly the pairs of the rows it replaces.

Only rows of completed UTC days are rewritten (``sync_date < today``), in one commit: an overwrite whose
predicate matches exactly the rows rewritten, ``sync_date < today AND ((flow = .. AND stream_id = .. AND
batch_id <= cutoff) OR ...)``, made from one pinned table version. delta-rs checks the files that
concurrent commits added against that predicate, partition values and file statistics both, so the
mirror's appends (today's partition, or newer batch ids) do not conflict with it. A commit that does
conflict (another maintenance run, a mirror's coalescing write of the day that just ended) is refused;
maintenance then starts again from a fresh version, at most ``ATTEMPTS`` times, and never commits rows
read before the commit that refused it. docs/design/maintenance.md records what conflicts with what.

Then OPTIMIZE compacts the small files of ``offset_syncs`` and ``checkpoints`` (a rewrite that changes
no row, one commit per partition, tried again when a concurrent commit removed a file it was
compacting), and VACUUM removes
files not referenced by the current version and older than the retention, including files no commit
ever referenced (a "full" vacuum, as Spark's). Delta refuses a retention below 168 hours (time travel,
and readers still using an older snapshot, need those files); drkit does not switch that safety check
off: a shorter retention is a :class:`~drkit.errors.ConfigError`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake.exceptions import CommitFailedError

from drkit.core.offsets import coalesce_cutoff
from drkit.core.reports import CoalesceFigures, MaintenanceReport, TableFigures
from drkit.errors import ConfigError, DrkitError, StoreError
from drkit.layout import StateLayout
from drkit.store import checkpoints as checkpoints_table
from drkit.store import delta
from drkit.store import offset_syncs as syncs_table
from drkit.store.delta import TableSpec, Where

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from drkit.config import DrkitConfig

#: Delta's default ``delta.deletedFileRetentionDuration`` (7 days): VACUUM refuses less unless its
#: safety check is disabled, which drkit never does.
MIN_VACUUM_RETENTION_HOURS = 168.0
#: Longer is a typo of units (and ``inf`` is no number of hours): ten years.
MAX_VACUUM_RETENTION_HOURS = 87_600.0
#: The rank of the cutoff was a 32-bit integer in Spark; the limit is kept so that no setting changed meaning.
MAX_KEEP_RECENT_BATCHES = 2**31 - 1
#: Tries of the offset_syncs rewrite and of each OPTIMIZE when a concurrent commit refused it.
ATTEMPTS = 3

log = logging.getLogger(__name__)

_STREAM = ["flow", "stream_id"]


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
    with _as_store_error(syncs_table.SPEC.name, tables.offset_syncs):
        if delta.open_table(tables.offset_syncs, syncs_table.SPEC.name) is not None:  # with its version guard
            syncs.files_before = _num_files(tables.offset_syncs, syncs_table.SPEC)
            coalesce, syncs.rows_before = coalesce_syncs(tables.offset_syncs, keep_recent_batches, today)
            _compact_and_vacuum(tables.offset_syncs, syncs_table.SPEC, syncs, vacuum_retention_hours, config)
            syncs.rows_after = _count(tables.offset_syncs, syncs_table.SPEC)
    with _as_store_error(checkpoints_table.SPEC.name, tables.checkpoints):
        if delta.open_table(tables.checkpoints, checkpoints_table.SPEC.name) is not None:
            checkpoints.rows_before = _count(tables.checkpoints, checkpoints_table.SPEC)
            checkpoints.files_before = _num_files(tables.checkpoints, checkpoints_table.SPEC)
            _compact_and_vacuum(tables.checkpoints, checkpoints_table.SPEC, checkpoints, vacuum_retention_hours, config)
            checkpoints.rows_after = _count(tables.checkpoints, checkpoints_table.SPEC)
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
def _as_store_error(name: str, path: Where) -> Iterator[None]:
    """A delta-rs failure on one table as one line (exit 6).

    The tables are checked before anything is rewritten (drkit.store.delta.check_readable), so this is
    the fallback for damage that appears while maintenance runs. Every step is one Delta commit: what
    was committed before the failure is consistent.
    """
    try:
        yield
    except DrkitError:
        raise
    except Exception as exc:
        raise StoreError(
            f"maintenance of Delta table {name} at {path} failed: {delta.cause(exc)}. If the table's "
            "_delta_log or a data file is missing or damaged, restore the table folder from a backup; "
            "committed steps are consistent, run drkit maintain again once the cause is fixed"
        ) from None


def coalesce_syncs(path: Where, keep_recent_batches: int, before: date | None = None) -> tuple[CoalesceFigures, int]:
    """Merge the old rows of each stream that continue each other on both sides, in one commit.

    Only rows of UTC days before ``before`` (default: today) are rewritten. Each attempt reads one
    pinned table version, so the cutoffs, the merge and the figures agree with each other while the
    mirror keeps appending; an attempt that a concurrent commit in its region refused is started
    again. Returns the figures and the row count of the version read.
    """
    day = before or datetime.now(UTC).date()
    for attempt in range(1, ATTEMPTS + 1):
        done = _coalesce_once(path, keep_recent_batches, day)
        if done is not None:
            figures, rows = done
            figures.attempts = attempt
            return figures, rows
        log.warning("offset_syncs: a concurrent commit touched the rows being coalesced; trying again")
    raise StoreError(
        f"offset_syncs at {path}: {ATTEMPTS} attempts to coalesce were refused by Delta because other "
        "commits changed the same rows; nothing was rewritten. Run drkit maintain again"
    )


def _coalesce_once(path: Where, keep_recent_batches: int, before: date) -> tuple[CoalesceFigures, int] | None:
    """One attempt of :func:`coalesce_syncs`; None when a concurrent commit refused its rewrite."""
    started = time.monotonic()
    figures = CoalesceFigures(before_date=before.isoformat())
    handle = delta.Handle(path, syncs_table.SPEC)
    table = handle.current()
    if table is None:
        return figures, 0
    version = figures.version_read = int(table.version())
    batches = handle.read([*_STREAM, "batch_id"], version=version)
    cutoffs = _cutoffs(batches, keep_recent_batches)
    figures.streams = len(batches.group_by(_STREAM).aggregate([]))
    if cutoffs:
        old = handle.read(syncs_table.SPEC.columns, _region(before, cutoffs), version)
        merged, counts = syncs_table.merge_rows_counted(old)
        figures.rows_eligible = old.num_rows
        several = pc.greater(counts, 1)
        rewrite = sorted(
            (r["flow"], r["stream_id"]) for r in merged.filter(several).group_by(_STREAM).aggregate([]).to_pylist()
        )
        if rewrite:
            chosen = {key: cutoffs[key] for key in rewrite}
            out = merged.filter(_streams(chosen))
            committed = delta.write(
                path,
                syncs_table.SPEC,
                out,
                replace=_predicate(before, chosen),
                table=table,
                # Refused: the rows were read before the commit that refused them. Not tried again with
                # them; the caller reads a fresh version.
                done=lambda: True,
                what="coalescing old offset-syncs",
            )
            if not committed:
                return None
            figures.cutoffs = {f"{f}/{s}": c for (f, s), c in chosen.items()}
            figures.streams_rewritten = len(rewrite)
            figures.ranges_merged = int(pc.sum(counts.filter(several)).as_py() or 0)
            figures.merged_into = int(pc.sum(pc.cast(several, pa.int64())).as_py() or 0)
            figures.rows_rewritten = out.num_rows
    figures.seconds = round(time.monotonic() - started, 3)
    return figures, batches.num_rows


def _cutoffs(batches: pa.Table, keep_recent_batches: int) -> dict[tuple[str, str], int]:
    """(flow, stream_id) -> the highest batch id to coalesce, for streams with more than
    ``keep_recent_batches`` batch ids (drkit.core.offsets.coalesce_cutoff)."""
    ids: dict[tuple[str, str], list[int]] = {}
    for r in batches.group_by([*_STREAM, "batch_id"]).aggregate([]).to_pylist():
        ids.setdefault((r["flow"], r["stream_id"]), []).append(r["batch_id"])
    out = {}
    for key, batch_ids in sorted(ids.items()):
        cutoff = coalesce_cutoff(batch_ids, keep_recent_batches)
        if cutoff is not None:
            out[key] = cutoff
    return out


def _region(before: date, cutoffs: dict[tuple[str, str], int]) -> Any:
    """The rows maintenance may rewrite, as a scan filter: completed days, batches up to each cutoff."""
    streams = None
    for (flow, stream_id), cutoff in cutoffs.items():
        term = (pc.field("flow") == flow) & (pc.field("stream_id") == stream_id) & (pc.field("batch_id") <= cutoff)
        streams = term if streams is None else streams | term
    return (pc.field("sync_date") < pa.scalar(before, pa.date32())) & streams


def _streams(chosen: dict[tuple[str, str], int]) -> Any:
    """The rows of the chosen streams, as a filter."""
    out = None
    for flow, stream_id in chosen:
        term = (pc.field("flow") == flow) & (pc.field("stream_id") == stream_id)
        out = term if out is None else out | term
    return out


def _predicate(before: date, chosen: dict[tuple[str, str], int]) -> str:
    """The overwrite's SQL predicate: exactly the region of the chosen streams, the partition conjunct first."""
    terms = " OR ".join(
        f"(flow = {delta.sql_str(f)} AND stream_id = {delta.sql_str(s)} AND batch_id <= {c})"
        for (f, s), c in chosen.items()
    )
    return f"sync_date < '{before.isoformat()}' AND ({terms})"


def _compact_and_vacuum(
    path: Where, spec: TableSpec, figures: TableFigures, retention_hours: float, config: DrkitConfig
) -> None:
    started = time.monotonic()
    metrics = _optimize(path, spec)
    figures.optimize_files_added = metrics["numFilesAdded"]
    figures.optimize_files_removed = metrics["numFilesRemoved"]
    figures.optimize_seconds = round(time.monotonic() - started, 3)
    started = time.monotonic()
    table = _open(path, spec)
    try:
        # delta-rs takes whole hours: rounding up keeps at least the retention asked for.
        table.vacuum(
            retention_hours=math.ceil(retention_hours), dry_run=False, enforce_retention_duration=True, full=True
        )
    except Exception as exc:
        if "retention" in str(exc).lower():
            where = f" (state of {config.source_path})" if config.source_path else ""
            raise ConfigError(
                f"Delta refused to VACUUM {path}{where} with a retention of {retention_hours:g} hours: "
                f"{delta.cause(exc)}. The table's delta.deletedFileRetentionDuration is longer; "
                "use at least that retention"
            ) from None
        raise
    figures.vacuumed = True
    figures.vacuum_seconds = round(time.monotonic() - started, 3)
    figures.files_after = _num_files(path, spec)


def _optimize(path: Where, spec: TableSpec) -> dict[str, int]:
    """OPTIMIZE (compaction), one commit per partition, from a fresh version each try.

    One commit per partition: a day already compacted stays compacted when a later partition's commit is
    refused (the mirror's coalescing write of today removed a file being compacted), and the next try
    compacts what is left. Compaction changes no row, so trying again is safe.
    """
    figures = {"numFilesAdded": 0, "numFilesRemoved": 0}
    for attempt in range(1, ATTEMPTS + 1):
        try:
            metrics = _open(path, spec).optimize.compact(min_commit_interval=timedelta(0))
        except CommitFailedError as exc:
            if attempt == ATTEMPTS:
                raise StoreError(
                    f"{spec.name} at {path}: OPTIMIZE was refused {ATTEMPTS} times for concurrent commits "
                    f"({delta.cause(exc)}); the rows are unchanged. Run drkit maintain again"
                ) from None
            log.warning("%s: a concurrent commit removed files OPTIMIZE was compacting; trying again", spec.name)
            continue
        for name in figures:
            figures[name] += int(metrics.get(name) or 0)
        return figures
    raise AssertionError("unreachable")


def _open(path: Where, spec: TableSpec) -> DeltaTable:
    table = delta.open_table(path, spec.name)
    if table is None:
        raise StoreError(f"Delta table {spec.name} at {path} disappeared during maintenance: {delta.RESTORE}")
    return table


def _count(path: Where, spec: TableSpec) -> int:
    return int(delta.Handle(path, spec).read([]).num_rows)


def _num_files(path: Where, spec: TableSpec) -> int:
    return len(_open(path, spec).file_uris())
