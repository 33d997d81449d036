"""``drkit checkpoint``: translate the consumer groups' committed offsets into checkpoints."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, FlowOption, OutputOption


def checkpoint(
    config: Path = ConfigOption,
    flow: str | None = FlowOption,
    once: bool = typer.Option(False, "--once", help="Translate once and stop."),
    interval: float | None = typer.Option(
        None, "--interval", min=0.1, help="Seconds between runs (default: the flow's checkpoint.interval_seconds)."
    ),
    output: Output = OutputOption,
) -> None:
    """Translate committed source offsets with the offset-syncs and append changes to `checkpoints`."""
    from drkit.service import Drkit

    service = Drkit.from_file(str(config))
    service.config.flows_named(flow)  # fail fast on an unknown flow, before starting Spark
    with Progress("translating committed offsets...", output):
        runs = service.checkpoint(flow, once=once, interval=interval)
    data = [r.as_dict() for r in runs]

    def render(d: list[dict[str, Any]]) -> Iterable[RenderableType]:
        yield table("checkpoint", ["flow", "groups", "checkpoints", "appended", "synced groups", "seconds"],
                    [[r["flow"], r["groups"], r["checkpoints"], r["appended"], ", ".join(r["synced_groups"]) or "-",
                      r["seconds"]] for r in d])
        findings = [f | {"flow": r["flow"]} for r in d for f in r["findings"]]
        if findings:
            yield table("findings", ["flow", "group", "topic", "partition", "kind", "detail"],
                        [[f["flow"], f["group"], f["topic"] or "-", "-" if f["partition"] is None else f["partition"],
                          f["kind"], f["detail"]] for f in findings])

    emit(data, output, render)
