"""``drkit failover``, ``drkit failback``, ``drkit history``: move consumer groups, and the audit trail.

Safe by default: a dry run unless ``--apply``; ``--apply`` asks for confirmation unless ``--yes``;
a plan with refusals is shown and exits 3 without touching any cluster.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import RenderableType
from rich.markup import escape

from drkit.cli.console import Output, Progress, emit, stderr, table
from drkit.cli.fence_cmd import render_fencing
from drkit.cli.options import ConfigOption, Invocation, OutputOption, facade, parse_time
from drkit.core.audit import HOOK_KEY, OperationRecord, OperationStatus
from drkit.core.lease import LEASE_SECONDS
from drkit.errors import ClusterError, RefusedError

if TYPE_CHECKING:  # annotations only: the command that renders them imports them
    from drkit.core.outcome import OperationResult
    from drkit.core.plan import Plan
    from drkit.core.status import RpoReport
    from drkit.results import History

#: Ctrl-C at the prompt, or SIGINT during an apply (SIGTERM: 143), as a shell reports it.
INTERRUPTED = 128 + signal.SIGINT

FlowRequired = typer.Option(..., "--flow", help="The replication flow, e.g. A->B.")
GroupOption = typer.Option(None, "--group", "-g", help="Consumer group (repeatable).")
AllGroupsOption = typer.Option(False, "--all-groups", help="Every group with checkpoints in the flow.")
ApplyOption = typer.Option(False, "--apply", help="Commit the offsets (default: dry run).")
YesOption = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation with --apply.")

_VERDICTS = {
    OperationStatus.DRY_RUN: "dry run: nothing was changed (add --apply to commit)",
    OperationStatus.REFUSED: "refused: nothing was changed",
    OperationStatus.DECLINED: "not confirmed: nothing was changed",
    OperationStatus.APPLIED: "applied and verified",
    OperationStatus.PARTIAL: "partial: some groups were not committed (listed); fix the cause and run the same "
    "command again: it commits only what is missing",
    OperationStatus.INTERRUPTED: "interrupted: not every group was committed (listed); run the same command "
    "again: it commits only what is missing",
    OperationStatus.FAILED: "failed: nothing reads back at the planned offsets (listed); fix the cause and run "
    "the same command again",
}
_EXIT_CODES = {
    OperationStatus.REFUSED: RefusedError.exit_code,
    OperationStatus.DECLINED: 1,
    OperationStatus.PARTIAL: ClusterError.exit_code,
    OperationStatus.FAILED: ClusterError.exit_code,
    OperationStatus.INTERRUPTED: INTERRUPTED,
}


def _groups(group: list[str] | None, all_groups: bool) -> list[str] | None:
    if bool(group) == all_groups:
        raise typer.BadParameter("give --group G (one or more) or --all-groups", param_hint="--group")
    return group or None


def _render(result: OperationResult) -> Iterable[RenderableType]:
    plan = result.plan
    rows = [
        [
            m.group,
            f"{m.from_topic}/{m.partition}",
            m.committed,
            f"{m.to_topic}/{m.partition}",
            "-" if m.current is None else m.current,
            "-" if m.new is None else m.new,
            "yes" if m.changes else "",
            m.position.value,
            m.basis.value,
        ]
        for m in plan.moves
    ]
    yield table(
        f"{plan.action} {plan.flow}: offsets on {plan.destination}",
        ["group", "from", "offset", "to", "current", "new", "changes", "position", "basis"],
        rows,
    )
    if result.rpo is not None:
        yield _rpo_line(result.rpo)
    for w in plan.warnings:
        yield f"[yellow]warning:[/] {w}"
    for r in plan.refusals:
        yield f"[red]refused ({r.reason}):[/] {r.detail}"
    for stale in result.stale:
        yield f"[yellow]warning:[/] {stale}: intent over {LEASE_SECONDS / 60:.0f} minutes old and no outcome"
    yield from _render_fencing(result)
    yield from _render_outcome(result)
    if result.hook is not None:  # after the offsets: a failed hook never undid them
        yield f"[{'green' if result.hook.ok else 'red'}]{escape(result.hook.line())}[/]"
    completes = f"; completes operation {result.completes}" if result.completes else ""
    yield f"[bold]{_VERDICTS[result.status]}[/] (operation {result.operation_id}{completes})"


def _render_fencing(result: OperationResult) -> Iterable[RenderableType]:
    if result.fencing is not None:
        yield from render_fencing(result.fencing, result.status is OperationStatus.APPLIED)


def _render_outcome(result: OperationResult) -> Iterable[RenderableType]:
    outcome = result.outcome
    if outcome is None or outcome.status is OperationStatus.APPLIED:
        return
    done, planned = outcome.counts
    rows = [
        [group, key, held["planned"], "-" if held["held"] is None else held["held"]]
        for group, parts in outcome.not_committed.items()
        for key, held in parts.items()
    ]
    yield table(
        f"not committed: {planned - done} of {planned} partitions", ["group", "partition", "planned", "holds"], rows
    )
    for group, reason in outcome.errors.items():
        yield f"[red]group {group}:[/] {reason}"


def _rpo_line(rpo: RpoReport) -> str:
    if rpo.source_reachable:
        return f"RPO: {rpo.unmirrored_offsets} offsets not mirrored (source reachable: measured now)"
    if rpo.observed_at is None:
        return "RPO: unknown (source unreachable and never observed: drkit cannot tell what was lost)"
    known = "unknown" if rpo.unmirrored_offsets is None else f"at least {rpo.unmirrored_offsets}"
    line = (
        f"RPO: {known} offsets not mirrored when the source was last seen, {rpo.observation_age_seconds}s "
        f"ago ({rpo.observed_at}; source unreachable now)"
    )
    if rpo.estimated_since_observation is not None:
        line += (
            f"; estimate: about {rpo.estimated_since_observation} more produced since "
            f"(at {rpo.produce_rate_per_second} records/s before), not counted"
        )
    return line


class _Prompt:
    """Whether the confirmation prompt was left with Ctrl-C (declined, like "no", but exit 130)."""

    interrupted = False


def _can_confirm(command: str, apply: bool, yes: bool, output: Output) -> None:
    """Refuse, before anything is read or planned, an ``--apply`` whose confirmation nobody can give.

    Why up front: asked at the prompt, a job without a terminal (cron, CI, a pipe from /dev/null) would plan,
    read end-of-file, and leave a declined operation in the audit trail for a question no one saw.
    """
    if not apply or yes:
        return
    if output is Output.json:
        raise RefusedError(
            f"{command} --apply with --output json needs --yes (no prompt in JSON mode); nothing was changed"
        )
    if not sys.stdin.isatty():
        raise RefusedError(
            f"{command} --apply asks for confirmation on a terminal and standard input is not one: add --yes to apply "
            "without asking; nothing was changed"
        )


def _confirm(output: Output, yes: bool, progress: Progress, prompt: _Prompt) -> Callable[[Plan], bool]:
    def ask(plan: Plan) -> bool:
        if yes:
            return True
        progress.stop()  # the spinner would draw over the prompt
        stderr.print(
            f"{plan.action}: commit {plan.changed_moves} changed offsets for {len(plan.commits())} "
            f"group(s) on {plan.destination}?"
        )
        try:
            return bool(typer.confirm("Apply", default=False))
        except typer.Abort as exc:  # no answer (Ctrl-C, Ctrl-D, stdin at its end): not confirmed, audited as declined
            prompt.interrupted = isinstance(exc.__context__, KeyboardInterrupt)
            return False

    return ask


def _finish(ctx: typer.Context, result: OperationResult, output: Output, prompt: _Prompt) -> None:
    emit(result, output, _render)
    ctx.ensure_object(Invocation).reported = True  # the result says how it ended: no second line for 130/143
    code = _EXIT_CODES.get(result.status)
    if result.status is OperationStatus.INTERRUPTED and result.signal is not None:
        code = 128 + result.signal  # 130 for SIGINT, 143 for SIGTERM
    if result.hook is not None and result.hook.exit_code is not None:
        code = result.hook.exit_code  # applied: only the hook failed
    if prompt.interrupted:
        code = INTERRUPTED
    if code is not None:
        raise typer.Exit(code)


def failover(
    ctx: typer.Context,
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
    names, when = _groups(group, all_groups), parse_time(as_of)
    _can_confirm("failover", apply, yes, output)
    drkit = facade(ctx, config)
    prompt = _Prompt()
    with Progress("reading checkpoints and offset-syncs, checking the target...", output) as progress:
        result = drkit.failover(flow, names, when, allow_stale, apply, _confirm(output, yes, progress, prompt))
    _finish(ctx, result, output, prompt)


def failback(
    ctx: typer.Context,
    config: Path = ConfigOption,
    flow: str = FlowRequired,
    group: list[str] | None = GroupOption,
    all_groups: bool = AllGroupsOption,
    apply: bool = ApplyOption,
    yes: bool = YesOption,
    output: Output = OutputOption,
) -> None:
    """Move consumer groups back to the flow's source, across mirrored and locally produced records."""
    names = _groups(group, all_groups)
    _can_confirm("failback", apply, yes, output)
    drkit = facade(ctx, config)
    prompt = _Prompt()
    with Progress("reading offsets and offset-syncs, checking both clusters...", output) as progress:
        result = drkit.failback(flow, names, apply, _confirm(output, yes, progress, prompt))
    _finish(ctx, result, output, prompt)


def history(
    ctx: typer.Context,
    config: Path = ConfigOption,
    flow: str | None = typer.Option(None, "--flow", help="Only this flow."),
    limit: int = typer.Option(20, "--limit", min=1, help="How many operations, newest first."),
    output: Output = OutputOption,
) -> None:
    """The audit trail: every failover and failback, dry runs included."""
    result = facade(ctx, config).history(flow, limit)

    def render(h: History) -> Iterable[RenderableType]:
        yield table(
            "operations",
            ["started", "action", "flow", "groups", "dry run", "status", "user@host", "id"],
            [
                [
                    o.started_at.isoformat(),
                    o.action,
                    o.flow,
                    ", ".join(o.groups),
                    o.dry_run,
                    _status(o),
                    f"{o.user}@{o.host}",
                    o.id[:12],
                ]
                for o in h.operations
            ],
        )

    emit(result, output, render, as_json=lambda h: [o.as_dict() for o in h.operations])


def _status(o: OperationRecord) -> str:
    """The status, with what an unfinished apply left: the partitions committed of those planned."""
    if o.intent:
        return "no outcome (killed, or still running)"
    text = o.status or "-"
    committed, missing = o.result.get("committed"), o.result.get("not_committed")
    if isinstance(committed, dict) and isinstance(missing, dict) and missing:
        done = sum(len(v) for v in committed.values())
        text += f" ({done} of {done + sum(len(v) for v in missing.values())} partitions)"
    completes = o.result.get("completes")
    if completes:
        text += f", completes {str(completes)[:12]}"
    hook = o.result.get(HOOK_KEY)
    if isinstance(hook, dict):
        text += f", hook {hook.get('verdict')}"
    return text
