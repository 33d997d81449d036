"""``drkit maintain``: coalesce old offset-syncs, compact and vacuum the Delta tables."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, OutputOption, facade

if TYPE_CHECKING:
    from drkit.core.reports import MaintenanceReport


def maintain(
    ctx: typer.Context,
    config: Path = ConfigOption,
    keep_recent_batches: int = typer.Option(
        100,
        "--keep-recent-batches",
        min=1,
        help="Batch ids per mirror stream left as written (the mirror's restart check reads them).",
    ),
    vacuum_retention_hours: float = typer.Option(
        168.0,
        "--vacuum-retention-hours",
        help="VACUUM keeps unreferenced files this long; Delta's minimum of 168 hours is enforced.",
    ),
    output: Output = OutputOption,
) -> None:
    """Merge old offset-syncs that continue each other (translation unchanged), OPTIMIZE and VACUUM."""
    drkit = facade(ctx, config)  # settings are checked before any table is touched (Drkit.maintain)
    with Progress("maintaining the Delta tables...", output):
        report = drkit.maintain(keep_recent_batches, vacuum_retention_hours)

    def render(r: MaintenanceReport) -> Iterable[RenderableType]:
        rows: list[list[object]] = []
        for name, t in (("offset_syncs", r.offset_syncs), ("checkpoints", r.checkpoints)):
            if t.rows_before is None:
                rows.append([name, "-", "-", "-", "-", "no table"])
                continue
            vacuum = "vacuumed" if t.vacuumed else "-"
            rows.append([name, t.rows_before, t.rows_after, t.files_before, t.files_after, vacuum])
        yield table("tables", ["table", "rows before", "rows after", "files before", "files after", "vacuum"], rows)
        c = r.coalesce
        yield table(
            "offset_syncs coalescing",
            ["streams", "rewritten", "old rows", "ranges merged", "merged into", "seconds"],
            [[c.streams, c.streams_rewritten, c.rows_eligible, c.ranges_merged, c.merged_into, c.seconds]],
        )
        yield table(
            "maintain",
            ["keep recent batches", "vacuum retention (h)", "seconds"],
            [[r.keep_recent_batches, r.vacuum_retention_hours, r.seconds]],
        )

    emit(report, output, render)
