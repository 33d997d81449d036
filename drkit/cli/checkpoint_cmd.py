"""``drkit checkpoint``: run the translator (committed source offsets -> checkpoints)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, FlowOption, MetricsPortOption, OutputOption, facade

if TYPE_CHECKING:  # annotations only: the command that renders them imports them
    from drkit.core.reports import TranslationRun


def _render(runs: list[TranslationRun]) -> Iterable[RenderableType]:
    yield table(
        "checkpoint",
        ["flow", "groups", "checkpoints", "appended", "synced groups", "seconds"],
        [
            [r.flow, r.groups, r.checkpoints, r.appended, ", ".join(r.synced_groups) or "-", round(r.seconds, 3)]
            for r in runs
        ],
    )
    findings = [(r.flow, f) for r in runs for f in r.findings]
    if findings:
        yield table(
            "findings",
            ["flow", "group", "topic", "partition", "kind", "detail"],
            [
                [flow, f.group, f.topic or "-", "-" if f.partition is None else f.partition, f.kind, f.detail]
                for flow, f in findings
            ],
        )


def checkpoint(
    ctx: typer.Context,
    config: Path = ConfigOption,
    flow: str | None = FlowOption,
    once: bool = typer.Option(False, "--once", help="Translate once and stop."),
    interval: float | None = typer.Option(
        None, "--interval", min=0.1, help="Seconds between runs (default: the flow's checkpoint.interval_seconds)."
    ),
    output: Output = OutputOption,
    metrics_port: int | None = MetricsPortOption,
) -> None:
    """Translate committed source offsets with the offset-syncs and append changes to `checkpoints`."""
    drkit = facade(ctx, config)
    drkit.config.flows_named(flow)  # an unknown flow is refused before Spark starts
    with Progress("translating committed offsets...", output):
        runs = drkit.translate(flow, once=once, interval=interval, metrics_port=metrics_port)
    emit(runs, output, _render, as_json=lambda rs: [r.as_dict() for r in rs])
