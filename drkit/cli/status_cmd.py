"""``drkit status`` and ``drkit offsets``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, emit, table
from drkit.cli.failover_cmd import parse_time
from drkit.cli.options import ConfigOption, FlowOption, OutputOption

_COLOURS = {"healthy": "green", "lagging": "yellow", "stale": "red", "source unreachable": "red"}


def _ago(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds}s ago"


def status(
    config: Path = ConfigOption,
    flow: str | None = FlowOption,
    output: Output = OutputOption,
) -> None:
    """Replication lag, sync and checkpoint freshness per flow; exit 0 healthy, 20 lagging, 21 stale,
    22 source unreachable."""
    from drkit.operate.status import VERDICT_CODES
    from drkit.operate.status import status as compute
    from drkit.service import Drkit

    service = Drkit.from_file(str(config))
    service.config.flows_named(flow)
    flows, verdict = compute(service, flow)

    def render(d: dict[str, Any]) -> Iterable[RenderableType]:
        for f in d["flows"]:
            yield table(
                f"{f['flow']}: {f['verdict']} (mirror {'running' if f['mirror_running'] else 'not running'}, "
                f"checkpoint {'running' if f['checkpoint_running'] else 'not running'}, last checkpoint run "
                f"{_ago(f['checkpoint_last_run_age_seconds'])})",
                ["topic", "partition", "mirrored up to", "source end", "lag records", "lag s", "last sync s ago"],
                [[p["topic"], p["partition"], p["mirrored_up_to"], p["source_end"], p["lag_records"],
                  p["lag_seconds"], p["seconds_since_last_sync"]] for p in f["partitions"]])
            if f["groups"]:
                yield table("checkpoints", ["group", "age s"],
                            [[g["group"], g["checkpoint_age_seconds"]] for g in f["groups"]])
        colour = _COLOURS[d["verdict"]]
        yield f"[bold {colour}]{d['verdict']}[/]"

    emit({"verdict": verdict, "flows": flows}, output, render)
    raise typer.Exit(VERDICT_CODES[verdict])


def offsets(
    config: Path = ConfigOption,
    group: str = typer.Option(..., "--group", "-g", help="The consumer group."),
    flow: str | None = FlowOption,
    as_of: str | None = typer.Option(None, "--as-of", help="Checkpoints as of this time (ISO 8601)."),
    version: int | None = typer.Option(None, "--version", min=0, help="Checkpoints at this Delta table version."),
    output: Output = OutputOption,
) -> None:
    """A group's offsets: on the source, checkpointed, translated now, and on the target."""
    from drkit.operate.status import group_offsets
    from drkit.service import Drkit

    if as_of is not None and version is not None:
        raise typer.BadParameter("give --as-of or --version, not both", param_hint="--as-of")
    service = Drkit.from_file(str(config))
    flows = service.config.flows_named(flow)
    when = parse_time(as_of)
    data = [{"flow": f.name, "group": group, "partitions": group_offsets(service, f.name, group, when, version)}
            for f in flows]

    def render(d: list[dict[str, Any]]) -> Iterable[RenderableType]:
        for f in d:
            yield table(f"{f['flow']} group {f['group']}",
                        ["topic", "p", "source committed", "checkpointed", "target topic", "translated now",
                         "position", "target group", "age s"],
                        [[p["topic"], p["partition"], p["source_committed"], p["checkpointed_offset"],
                          p["target_topic"], p["translated_now"], p["position"], p["target_group_offset"],
                          p["checkpoint_age_seconds"]] for p in f["partitions"]])

    emit(data, output, render)
