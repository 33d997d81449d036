"""``drkit failover``, ``drkit failback``, ``drkit history``: move consumer groups, and the audit trail.

Safe by default: a dry run unless ``--apply``; ``--apply`` asks for confirmation unless ``--yes``;
a plan with refusals is shown and exits 3 without touching any cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, stderr, table
from drkit.cli.options import ConfigOption, OutputOption
from drkit.core.plan import Plan
from drkit.errors import RefusedError

FlowRequired = typer.Option(..., "--flow", help="The replication flow, e.g. A->B.")
GroupOption = typer.Option(None, "--group", "-g", help="Consumer group (repeatable).")
AllGroupsOption = typer.Option(False, "--all-groups", help="Every group with checkpoints in the flow.")
ApplyOption = typer.Option(False, "--apply", help="Commit the offsets (default: dry run).")
YesOption = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation with --apply.")


def parse_time(value: str | None) -> datetime | None:
    """ISO 8601 (``2026-11-22T10:15:00Z``); without a zone, UTC."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not an ISO 8601 time, e.g. 2026-11-22T10:15:00Z",
                                 param_hint="--as-of") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _groups(group: list[str] | None, all_groups: bool) -> list[str] | None:
    if bool(group) == all_groups:
        raise typer.BadParameter("give --group G (one or more) or --all-groups", param_hint="--group")
    return group or None


def _render_plan(data: dict[str, Any]) -> Iterable[RenderableType]:
    plan = data["plan"]
    rows = [[m["group"], f"{m['from_topic']}/{m['partition']}", m["committed"], f"{m['to_topic']}/{m['partition']}",
             "-" if m["current"] is None else m["current"], "-" if m["new"] is None else m["new"],
             "yes" if m["changes"] else "", m["position"]] for m in plan["moves"]]
    yield table(f"{plan['action']} {plan['flow']}: offsets on {plan['destination']}",
                ["group", "from", "offset", "to", "current", "new", "changes", "position"], rows)
    rpo = data.get("rpo") or {}
    if rpo:
        yield (f"RPO: {rpo.get('unmirrored_offsets', 'unknown')} offsets not mirrored "
               f"(source {'reachable' if rpo.get('source_reachable') else 'unreachable'}, ends from "
               f"{rpo.get('source_ends_from')}, observed {rpo.get('observed_at') or 'never'})")
    for w in plan["warnings"]:
        yield f"[yellow]warning:[/] {w}"
    for r in plan["refusals"]:
        yield f"[red]refused ({r['reason']}):[/] {r['detail']}"
    status = data["status"]
    verdict = {"dry_run": "dry run: nothing was changed (add --apply to commit)",
               "refused": "refused: nothing was changed", "declined": "not confirmed: nothing was changed",
               "applied": "applied and verified"}[status]
    yield f"[bold]{verdict}[/] (operation {data['operation_id']})"


def _confirm(output: Output, yes: bool, progress: Progress) -> Any:
    def ask(plan: Plan) -> bool:
        if yes:
            return True
        progress.stop()  # the spinner would draw over the prompt
        if output is Output.json:
            raise RefusedError("--apply with --output json needs --yes (no prompt in JSON mode)")
        changes = sum(1 for m in plan.moves if m.changes)
        stderr.print(f"{plan.action}: commit {changes} changed offsets for {len(plan.commits())} group(s) "
                     f"on {plan.destination}?")
        return bool(typer.confirm("Apply", default=False))

    return ask


def _finish(outcome: Any, output: Output) -> None:
    data = outcome.as_dict()
    emit(data, output, _render_plan)
    if outcome.status == "refused":
        raise typer.Exit(RefusedError.exit_code)
    if outcome.status == "declined":
        raise typer.Exit(1)


def failover(
    config: Path = ConfigOption,
    flow: str = FlowRequired,
    group: list[str] | None = GroupOption,
    all_groups: bool = AllGroupsOption,
    as_of: str | None = typer.Option(None, "--as-of", help="Use the checkpoints as of this time (ISO 8601)."),
    allow_stale: bool = typer.Option(False, "--allow-stale", help="Accept checkpoints older than the limit."),
    apply: bool = ApplyOption,
    yes: bool = YesOption,
    output: Output = OutputOption,
) -> None:
    """Move consumer groups to the flow's target at their exactly translated offsets (works with the source down)."""
    from drkit.operate.failover import Operator
    from drkit.service import Drkit

    names = _groups(group, all_groups)
    when = parse_time(as_of)
    service = Drkit.from_file(str(config))
    service.config.flow(flow)
    with Progress("reading checkpoints and offset-syncs, checking the target...", output) as progress:
        outcome = Operator(service).failover(flow, names, when, allow_stale, apply,
                                             _confirm(output, yes, progress))
    _finish(outcome, output)


def failback(
    config: Path = ConfigOption,
    flow: str = FlowRequired,
    group: list[str] | None = GroupOption,
    all_groups: bool = AllGroupsOption,
    apply: bool = ApplyOption,
    yes: bool = YesOption,
    output: Output = OutputOption,
) -> None:
    """Move consumer groups back to the flow's source, across mirrored and locally produced records."""
    from drkit.operate.failover import Operator
    from drkit.service import Drkit

    names = _groups(group, all_groups)
    service = Drkit.from_file(str(config))
    service.config.flow(flow)
    with Progress("reading offsets and offset-syncs, checking both clusters...", output) as progress:
        outcome = Operator(service).failback(flow, names, apply, _confirm(output, yes, progress))
    _finish(outcome, output)


def history(
    config: Path = ConfigOption,
    flow: str | None = typer.Option(None, "--flow", help="Only this flow."),
    limit: int = typer.Option(20, "--limit", min=1, help="How many operations, newest first."),
    output: Output = OutputOption,
) -> None:
    """The audit trail: every failover and failback, dry runs included."""
    from drkit.service import Drkit
    from drkit.store.operations import OperationStore

    service = Drkit.from_file(str(config))
    if flow is not None:
        flow = service.config.flow(flow).name
    ops = OperationStore(service.spark, service.tables).list(flow, limit)

    def render(d: list[dict[str, Any]]) -> Iterable[RenderableType]:
        yield table("operations", ["started", "action", "flow", "groups", "dry run", "status", "user@host", "id"],
                    [[o["started_at"], o["action"], o["flow"], ", ".join(o["groups"]), o["dry_run"],
                      (o["result"] or {}).get("status"), f"{o['user']}@{o['host']}", o["id"][:12]] for o in d])

    emit(ops, output, render)
