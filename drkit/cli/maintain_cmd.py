"""``drkit maintain``: coalesce old offset-syncs, compact and vacuum the Delta tables."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, OutputOption, facade


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
    drkit = facade(ctx, config)  # settings are checked before Spark starts (Drkit.maintain)
    with Progress("maintaining the Delta tables...", output):
        report = drkit.maintain(keep_recent_batches, vacuum_retention_hours)

    def render(d: dict[str, Any]) -> Iterable[RenderableType]:
        rows = []
        for name in ("offset_syncs", "checkpoints"):
            t = d[name]
            if t["rows_before"] is None:
                rows.append([name, "-", "-", "-", "-", "no table"])
                continue
            rows.append(
                [
                    name,
                    t["rows_before"],
                    t["rows_after"],
                    t["files_before"],
                    t["files_after"],
                    "vacuumed" if t["vacuumed"] else "-",
                ]
            )
        yield table("tables", ["table", "rows before", "rows after", "files before", "files after", "vacuum"], rows)
        c = d["offset_syncs"]["coalesce"]
        yield table(
            "offset_syncs coalescing",
            ["streams", "rewritten", "old rows", "ranges merged", "merged into", "seconds"],
            [
                [
                    c["streams"],
                    c["streams_rewritten"],
                    c["rows_eligible"],
                    c["ranges_merged"],
                    c["merged_into"],
                    c["seconds"],
                ]
            ],
        )
        yield table(
            "maintain",
            ["keep recent batches", "vacuum retention (h)", "seconds"],
            [[d["keep_recent_batches"], d["vacuum_retention_hours"], d["seconds"]]],
        )

    emit(report.as_dict(), output, render)
