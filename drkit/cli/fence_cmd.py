"""``drkit fence``: a flow's ``[flows.fencing]`` ACLs put where its producers' side calls for; and how fencing
changes are shown (by failover and failback too).

A dry run unless ``--apply`` (no prompt: the changes are DENY WRITE bindings for the named producers, and
the next failover or failback lifts exactly what drkit added).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import RenderableType
from rich.markup import escape

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, OutputOption, facade

if TYPE_CHECKING:
    from drkit.core.fencing import FenceReport, FencingPlan


def render_fencing(fencing: FencingPlan, done: bool) -> Iterable[RenderableType]:
    """The ACL changes of a plan (``done``: made), one row per binding, and why a cluster was not fenced."""
    rows = [
        [c.cluster, c.side.value, change, a.name, a.principal, f"{a.permission.value} {a.operation}"]
        for c in fencing.changes
        for change, acls in (("add", c.add), ("delete", c.delete))
        for a in acls
    ]
    if rows:
        title = "fencing: ACLs changed" if done else "fencing: ACLs to change"
        yield table(title, ["cluster", "side", "change", "topic", "principal", "binding"], rows)
    else:
        yield "fencing: no ACL to change"
    for w in fencing.warnings:
        yield f"[yellow]warning:[/] {escape(w)}"


def fence(
    ctx: typer.Context,
    flow: str = typer.Option(..., "--flow", help="The replication flow, e.g. A->B."),
    apply: bool = typer.Option(False, "--apply", help="Change the ACLs (default: dry run)."),
    config: Path = ConfigOption,
    output: Output = OutputOption,
) -> None:
    """Deny the flow's producers WRITE where they must not write now: the copies (read_only_copies) until a
    failover, the source after one. Idempotent; run it after new topics are mirrored."""
    drkit = facade(ctx, config)
    with Progress("reading the clusters' ACLs...", output):
        report = drkit.fence(flow, apply)

    def render(r: FenceReport) -> Iterable[RenderableType]:
        from drkit.core.audit import OperationStatus

        yield f"{r.flow}: producers on the {r.producers_on.value} (by the audit trail)"
        done = r.status is OperationStatus.APPLIED
        yield from render_fencing(r.plan, done)
        verdict = "applied" if done else "dry run: nothing was changed (add --apply to change the ACLs)"
        yield f"[bold]{verdict}[/] (operation {r.operation_id})"

    emit(report, output, render)
