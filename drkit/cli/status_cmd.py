"""``drkit status`` and ``drkit offsets``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import RenderableType
from rich.markup import escape

from drkit.cli.console import Output, emit, table
from drkit.cli.options import ConfigOption, FlowOption, MetricsPortOption, OutputOption, facade, parse_time
from drkit.core.mirror_lease import LeaseReport
from drkit.core.recovery import RecoveryVerdict
from drkit.core.status import StatusReport, Verdict
from drkit.errors import RefusedError
from drkit.results import OffsetsReport
from drkit.service import Drkit

_COLOURS = {
    Verdict.HEALTHY: "green",
    Verdict.LAGGING: "yellow",
    Verdict.STALE: "red",
    Verdict.SOURCE_UNREACHABLE: "red",
    Verdict.TARGET_DIVERGED: "red",
    Verdict.TOPIC_REFUSED: "red",
    Verdict.TARGET_UNREACHABLE: "red",
}


def _ago(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds}s ago"


def _latency(seconds: float | None) -> str:
    return "unknown" if seconds is None else f"{seconds}s"


def _running(flag: bool) -> str:
    return "running" if flag else "not running"


def _lease_line(flow: str, lease: LeaseReport | None) -> str:
    """Who mirrors the flow (drkit.core.mirror_lease), in one line."""
    if lease is None:
        return f"mirrors of {flow}: active one unknown (the target's lease topic could not be read, or no mirror ran)"
    a = lease.active
    since = "" if a is None else datetime.fromtimestamp(a.since_ms / 1000, UTC).isoformat(timespec="seconds")
    active = (
        "no active mirror"
        if a is None
        else f"active mirror {escape(a.host)} pid {a.pid} epoch {a.epoch} since {since}"
        + ("" if a.running else f" [bold red](its lease ended {-a.ends_in_seconds}s ago)[/]")
    )
    standbys = ", ".join(f"{escape(s.host)} pid {s.pid} (seen {s.seen_seconds_ago}s ago)" for s in lease.standbys)
    return f"mirrors of {flow}: {active}; standing by: {standbys or 'none'}"


#: The verdicts of a flow's records left behind that status tells in a line (none once recovered or dismissed).
_LEFT_BEHIND_SHOWN = frozenset({RecoveryVerdict.PENDING, RecoveryVerdict.UNKNOWN, RecoveryVerdict.NO_RECORD})


def _left_behind_line(flow: str, verdict: RecoveryVerdict, offsets: int | None) -> str:
    """What the flow's failover left on its source (drkit.core.recovery), when some of it is not on the target."""
    count = "an unknown number of" if offsets is None else str(offsets)
    return (
        f"[bold yellow]{flow}: {count} offsets the failover left on the source are not on the target ({verdict}): "
        f"drkit recover --flow '{flow}'[/]"
    )


def _render_status(report: StatusReport) -> Iterable[RenderableType]:
    for f in report.flows:
        yield table(
            f"{f.flow}: {f.verdict} (mirror {_running(f.mirror_running)}, checkpoint {_running(f.checkpoint_running)}, "
            f"last checkpoint run {_ago(f.checkpoint_last_run_age_seconds)}, heartbeat latency "
            f"{_latency(f.heartbeat_latency_seconds)}, newest heartbeat {_ago(f.heartbeat_age_seconds)})",
            ["topic", "partition", "mirrored up to", "source end", "lag records", "lag s", "last sync s ago"],
            [
                [
                    p.topic,
                    p.partition,
                    p.mirrored_up_to,
                    p.source_end,
                    p.lag_records,
                    p.lag_seconds,
                    p.seconds_since_last_sync,
                ]
                for p in f.partitions
            ],
        )
        yield _lease_line(f.flow, f.mirror_lease)
        if f.left_behind in _LEFT_BEHIND_SHOWN:
            yield _left_behind_line(f.flow, f.left_behind, f.left_behind_offsets)
        if f.live_checkpoints_unread:
            yield f"[yellow]{f.flow}: {escape(f.live_checkpoints_unread)}[/]"
        if f.groups:
            rows = [
                [
                    g.group,
                    g.readiness.value.replace("_", " "),
                    g.checkpoint_age_seconds,
                    "unknown" if g.reread_records is None else g.reread_records,
                    "unknown" if g.at_risk_records is None else g.at_risk_records,
                ]
                for g in f.groups
            ]
            yield table(
                "checkpoints (a failover now)",
                ["group", "placed", "age s", "re-read records", "at risk"],
                rows,
            )
        for line in f.unreachable:
            yield f"[bold red]{f.flow}: {escape(line)}[/]"
        if f.target_problem:
            yield f"[bold red]{f.flow}: {escape(f.target_problem)}[/]"
        if f.topic_issues:
            yield table(
                f"topics not mirrored (as of {f.topology_age_seconds} s ago)",
                ["source topic", "target topic", "finding", "what to do"],
                [[i.source, i.target, i.kind.value, i.detail] for i in f.topic_issues],
            )
    yield f"[bold {_COLOURS[report.verdict]}]{report.verdict}[/]"


def _render_verdicts(report: StatusReport) -> Iterable[RenderableType]:
    """One line per status of ``--watch``: the time and each flow's verdict."""
    at = datetime.now(UTC).isoformat(timespec="seconds")
    flows = ", ".join(f"{escape(f.flow)} [{_COLOURS[f.verdict]}]{f.verdict}[/]" for f in report.flows)
    yield f"{at} {flows}"


def status(
    ctx: typer.Context,
    config: Path = ConfigOption,
    flow: str | None = FlowOption,
    output: Output = OutputOption,
    watch: float | None = typer.Option(
        None,
        "--watch",
        min=1.0,
        help="Run as the status exporter: a status every this many seconds, exported as Prometheus gauges "
        "(drkit_status_*) until Ctrl-C; one line per status. Exit 0 when stopped.",
    ),
    metrics_port: int | None = MetricsPortOption,
) -> None:
    """Replication lag, sync and checkpoint freshness per flow; exit 0 healthy, 20 lagging, 21 stale,
    22 source unreachable, 23 target diverged (a target topic deleted or truncated under its syncs)."""
    drkit = facade(ctx, config)
    if watch is None:
        if metrics_port is not None:
            raise typer.BadParameter(
                "only with --watch (a single status serves no metrics)", param_hint="--metrics-port"
            )
        report = drkit.status(flow)
        emit(report, output, _render_status)
        raise typer.Exit(report.verdict.exit_code)
    if metrics_port is None and drkit.config.metrics.port is None:
        raise typer.BadParameter(
            "needs a port to serve the metrics on: --metrics-port or [metrics] port", param_hint="--watch"
        )
    drkit.watch_status(flow, watch, metrics_port, on_report=lambda r: emit(r, output, _render_verdicts))


def _render_offsets(report: OffsetsReport) -> Iterable[RenderableType]:
    for g in (g for g in report.groups if g.partitions):  # flows where the group has nothing: left out
        yield table(
            f"{g.flow} group {g.group}",
            [
                "topic",
                "p",
                "source committed",
                "checkpointed",
                "target topic",
                "translated now",
                "position",
                "target group",
                "age s",
            ],
            [
                [
                    p.topic,
                    p.partition,
                    p.source_committed,
                    p.checkpointed_offset,
                    p.target_topic,
                    p.translated_now,
                    p.position,
                    p.target_group_offset,
                    p.checkpoint_age_seconds,
                ]
                for p in g.partitions
            ],
        )
        for line in g.unreachable:
            yield f"[bold red]{g.flow}: {escape(line)}[/]"


def offsets(
    ctx: typer.Context,
    config: Path = ConfigOption,
    group: str = typer.Option(..., "--group", "-g", help="The consumer group."),
    flow: str | None = FlowOption,
    as_of: str | None = typer.Option(None, "--as-of", help="Checkpoints as of this time (ISO 8601)."),
    version: int | None = typer.Option(None, "--version", min=0, help="Checkpoints at this Delta table version."),
    output: Output = OutputOption,
) -> None:
    """A group's offsets: on the source, checkpointed, translated now, and on the target."""
    if as_of is not None and version is not None:
        raise typer.BadParameter("give --as-of or --version, not both", param_hint="--as-of")
    when = parse_time(as_of)
    drkit = facade(ctx, config)
    report = drkit.offsets(group, flow, when, version)
    if not any(g.partitions for g in report.groups):
        raise RefusedError(_no_checkpoints(drkit, group, [g.flow for g in report.groups], as_of, version))
    emit(report, output, _render_offsets, as_json=lambda r: [g.as_dict() for g in r.groups])


def _no_checkpoints(drkit: Drkit, group: str, flows: list[str], as_of: str | None, version: int | None) -> str:
    """Why ``offsets`` has nothing to show (exit 3, like a failover of an unknown group): an empty table
    with exit 0 reads as "the group is at nothing", which a script could act on."""
    where = f"flow {flows[0]}" if len(flows) == 1 else f"flows {', '.join(flows)}"
    if as_of is None and version is None:
        return (
            f"group {group!r} has no checkpoints in {where}: check the group name, and that drkit checkpoint "
            "runs for the flow and its groups filter selects the group"
        )
    at = f"as of {as_of}" if as_of is not None else f"at checkpoints table version {version}"
    # Only the checkpoints table is read (no cluster): is the group unknown, or just not yet recorded then?
    now = any(drkit.context.checkpoints.latest(f, [group]) for f in flows)
    if not now:
        return f"group {group!r} has no checkpoints {at} in {where}, nor now: check the group name"
    return (
        f"group {group!r} has no checkpoints {at} in {where}: its checkpoints start later; give a later "
        "--as-of or --version, or leave both out for the latest"
    )
