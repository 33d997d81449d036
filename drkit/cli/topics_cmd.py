"""``drkit topics sync``: the target topics reconciled with their sources once (or planned: --dry-run)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, FlowOption, OutputOption, facade

app = typer.Typer(
    help="The flows' target topics: created, grown and configured like their sources.", no_args_is_help=True
)


def sync(
    ctx: typer.Context,
    config: Path = ConfigOption,
    flow: str | None = FlowOption,
    dry_run: bool = typer.Option(False, "--dry-run", help="Describe both clusters and show the plan; change nothing."),
    output: Output = OutputOption,
) -> None:
    """Create missing target topics, add the partitions their sources gained, copy changed configs."""
    drkit = facade(ctx, config)
    with Progress("describing the clusters..." if dry_run else "reconciling the target topics...", output):
        report = drkit.topics_sync(flow, dry_run=dry_run)

    def render(d: dict[str, Any]) -> Iterable[RenderableType]:
        for f in d["flows"]:
            verb = "would" if f["dry_run"] else "did"
            rows: list[list[Any]] = []
            rows += [
                ["create", c["target"], f"{c['partitions']} partitions", _configs(c["configs"])] for c in f["create"]
            ]
            rows += [
                ["grow", g["target"], f"{g['partitions_before']} -> {g['partitions_after']} partitions", ""]
                for g in f["grow"]
            ]
            rows += [["configure", c["target"], "", _configs(c["set"], c["previous"])] for c in f["configs"]]
            rows += [
                [
                    f"acl {a['target']['permission'].lower()} {a['target']['operation']}",
                    f"{a['target']['name']} ({a['target']['pattern'].lower()})",
                    "",
                    f"{a['target']['principal']} from {a['target']['host']}",
                ]
                for a in f["acls"]
            ]
            if rows:
                yield table(
                    f"{f['flow']}: what drkit {verb} change", ["action", "target topic", "partitions", "configs"], rows
                )
            else:
                yield f"{f['flow']}: the target topics are in step with the source"
            if f["issues"]:
                yield table(
                    f"{f['flow']}: topics not mirrored",
                    ["source topic", "target topic", "finding", "what to do"],
                    [[i["source"], i["target"], i["kind"], i["detail"]] for i in f["issues"]],
                )

    emit(report.as_dict(), output, render)


def _configs(values: dict[str, str], previous: dict[str, str | None] | None = None) -> str:
    if previous is None:
        return ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
    return ", ".join(f"{k}: {previous.get(k) or 'default'} -> {v}" for k, v in sorted(values.items()))


app.command("sync")(sync)
