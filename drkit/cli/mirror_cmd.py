"""``drkit mirror``: run the mirror of one flow or all flows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, FlowOption, OutputOption


def mirror(
    config: Path = ConfigOption,
    flow: str | None = FlowOption,
    once: bool = typer.Option(False, "--once", help="Copy what is there now, then stop."),
    output: Output = OutputOption,
) -> None:
    """Copy the flow's topics to the target and record exact offset-syncs (Ctrl-C stops cleanly)."""
    from drkit.service import Drkit

    service = Drkit.from_file(str(config))
    service.config.flows_named(flow)  # fail fast on an unknown flow, before starting Spark
    def show(running: list[Any]) -> None:
        progress.update(" | ".join(
            f"mirror {j.flow.name}: {len(j.reports)} batches, {sum(r.records for r in j.reports)} records"
            for j in running))

    with Progress("starting Spark and the mirror...", output) as progress:
        jobs = service.mirror(flow, once=once, on_progress=show)
    data = Drkit.mirror_summary(jobs)

    def render(d: list[dict[str, Any]]) -> Iterable[RenderableType]:
        yield table("mirror", ["flow", "batches", "records", "bytes", "sync ranges", "created topics"],
                    [[f["flow"], f["batches"], f["records"], f["bytes"], f["sync_ranges"],
                      ", ".join(f["created_topics"]) or "-"] for f in d])

    emit(data, output, render)
