"""``drkit mirror``: run the mirror of one flow or all flows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, FlowOption, MetricsPortOption, OutputOption, facade

if TYPE_CHECKING:  # annotations only: the command that renders them imports them
    from drkit.core.reports import MirrorSummary


def _render(summaries: list[MirrorSummary]) -> Iterable[RenderableType]:
    yield table(
        "mirror",
        ["flow", "batches", "records", "bytes", "sync ranges", "created topics"],
        [[s.flow, s.batches, s.records, s.bytes, s.sync_ranges, ", ".join(s.created_topics) or "-"] for s in summaries],
    )


def mirror(
    ctx: typer.Context,
    config: Path = ConfigOption,
    flow: str | None = FlowOption,
    once: bool = typer.Option(False, "--once", help="Copy what is there now, then stop."),
    metrics_port: int | None = MetricsPortOption,
    output: Output = OutputOption,
) -> None:
    """Copy the flow's topics to the target and record exact offset-syncs (Ctrl-C stops cleanly)."""
    drkit = facade(ctx, config)
    drkit.config.flows_named(flow)  # an unknown flow is refused before Spark starts

    def show(running: list[MirrorSummary]) -> None:
        progress.update(" | ".join(f"mirror {s.flow}: {s.batches} batches, {s.records} records" for s in running))

    with Progress("starting Spark and the mirror...", output) as progress:
        summaries = drkit.mirror(flow, once=once, on_progress=show, metrics_port=metrics_port)
    emit(summaries, output, _render, as_json=lambda ss: [s.as_dict() for s in ss])
