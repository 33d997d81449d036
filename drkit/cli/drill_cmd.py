"""``drkit drill run SPEC``, ``drkit drill probe`` and ``drkit drill history``: rehearse a disaster, or a failover
with no outage, measured, kept in Delta."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import RenderableType
from rich.markup import escape

from drkit.cli.console import Output, Progress, emit, stderr, table
from drkit.cli.options import ConfigOption, MetricsPortOption, OutputOption, facade
from drkit.core.schedule import parse_every

if TYPE_CHECKING:  # annotations only: the command that renders them imports them
    from drkit.core.drill import DrillPhase, DrillReport
    from drkit.core.probe import ProbeReport
    from drkit.errors import DrkitError
    from drkit.service import Drkit

R = TypeVar("R")

SpecArgument = typer.Argument(..., help="The drill spec (TOML), e.g. runbooks/drills/source-loss.toml.")

EveryOption = typer.Option(
    None,
    "--every",
    help="Repeat the drill every DURATION (e.g. 30m, 6h, 1d), start to start, until Ctrl-C or SIGTERM (which end "
    "it between runs; exit 0); each run lands in the drills table and in the drkit_drill_* metrics.",
)

app = typer.Typer(help="DR drills: a workload, a disaster, failover, every record verified.", no_args_is_help=True)


def _cell(value: Any) -> Any:
    return "-" if value is None else value


def _render_report(d: dict[str, Any]) -> Iterable[RenderableType]:
    r, m = d["records"], d["measured"]
    records = {
        "acknowledged": r["acked"],
        "processed on source": r["processed_on_source"],
        "not mirrored": r["not_mirrored"],
        "read on target": r["read_on_target"],
    }
    if r["failed_back"]:
        records["read after failback"] = r["read_after_failback"]
    records |= {"lost": r["lost"], "re-delivered": r["redelivered"], "out of order": r["out_of_order_keys"]}
    yield table(f"drill {d['name']} ({d['disaster']}): {d['verdict'].upper()}", list(records), [list(records.values())])
    times = {
        "RPO records": m["rpo_records"],
        "RPO": m["rpo_seconds"],
        "RTO": m["rto_seconds"],
        "detection": m["detection_seconds"],
        "failover": m["failover_seconds"],
        "consumer restart": m["consumer_restart_seconds"],
    }
    if m["failback_seconds"] is not None:
        times |= {"failback": m["failback_seconds"], "source back to first record": m["back_on_source_seconds"]}
    yield table("RPO and RTO (seconds)", list(times), [[_cell(v) for v in times.values()]])
    if d["reasons"]:
        yield table("why it failed", ["reason", "detail"], [[x["reason"], x["detail"]] for x in d["reasons"]])
    yield table("report", ["folder"], [[d["report_dir"]]])


@app.command("run")
def run(
    ctx: typer.Context,
    spec: Path = SpecArgument,
    config: Path = ConfigOption,
    output: Output = OutputOption,
    every: str | None = EveryOption,
    metrics_port: int | None = MetricsPortOption,
) -> None:
    """Run a drill against the configured clusters; exit 0 if it passed, 30 if it failed."""
    seconds = _every(every, metrics_port)
    drkit = facade(ctx, config)

    def once() -> DrillReport:
        began = time.monotonic()
        with Progress("drill: starting...", output) as progress:

            def phase(step: DrillPhase, detail: str) -> None:
                progress.update(f"drill [{time.monotonic() - began:5.0f}s] {step.value}: {detail}")

            return drkit.drill_run(str(spec), phase)

    if seconds is None:
        report = once()
        emit(report.as_dict(), output, _render_report)
        raise typer.Exit(report.verdict.exit_code)
    repeat(drkit, once, seconds, metrics_port, lambda report: emit(report.as_dict(), output, _render_report))


def _render_probe(d: dict[str, Any]) -> Iterable[RenderableType]:
    r, t = d["records"], d["timings_ms"]
    counts = {
        "to verify": r["expected"],
        "verified": r["verified"],
        "missed": r["missed"],
        "re-read": r["reread"],
        "mismatched": r["mismatched"],
        "not mirrored (RPO)": r["not_mirrored"],
    }
    title = f"probe of {d['group']} in {d['flow']}: {d['verdict'].upper()}"
    yield table(title, list(counts), [list(counts.values())])
    times = {
        "plan": t["plan_ms"],
        "commit": t["commit_ms"],
        "first record": t["first_record_ms"],
        "all verified": t["verified_ms"],
        "RTO": t["rto_ms"],
        "RPO": d["rpo"]["ms"],
    }
    yield table("steps (ms)", list(times), [[_cell(v) for v in times.values()]])
    rows = [
        [
            p["source_topic"],
            p["partition"],
            p["committed"],
            p["resume"],
            p["expected"],
            p["verified"],
            p["missed"],
            p["reread"],
            p["mismatched"],
            p["not_mirrored"],
        ]
        for p in d["partitions"]
    ]
    columns = [
        "topic",
        "partition",
        "committed",
        "resumes at",
        "to verify",
        "verified",
        "missed",
        "re-read",
        "mismatched",
        "not mirrored",
    ]
    yield table("partitions", columns, rows)
    if d["reasons"]:
        yield table("why it failed", ["reason", "detail"], [[x["reason"], x["detail"]] for x in d["reasons"]])
    for w in d["warnings"]:
        stderr.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)


@app.command("probe")
def probe(
    ctx: typer.Context,
    flow: str = typer.Option(..., "--flow", help="The replication flow, e.g. A->B."),
    group: str = typer.Option(..., "--group", "-g", help="The consumer group whose failover is rehearsed."),
    config: Path = ConfigOption,
    max_records: int = typer.Option(
        10_000, "--max-records", min=1, help="Per partition, at most this many of the group's next records verified."
    ),
    wait_seconds: float = typer.Option(
        30.0, "--wait-seconds", min=0.1, help="How long the drill group waits for the records it should read."
    ),
    max_reread: int = typer.Option(
        0,
        "--max-reread",
        min=0,
        help="Re-read records allowed (a live group re-reads what it committed since its last checkpoint).",
    ),
    output: Output = OutputOption,
    every: str | None = EveryOption,
    metrics_port: int | None = MetricsPortOption,
) -> None:
    """Rehearse the failover of one group with no outage: plan it now, give the offsets to a drill group on the
    target, read there as the group would and verify every record against the source. Writes no record and
    commits nothing for the group; exit 0 if it passed, 30 if it failed."""
    seconds = _every(every, metrics_port)
    drkit = facade(ctx, config)

    def once() -> ProbeReport:
        with Progress(f"probe of {group}: planning, reading the target...", output):
            return drkit.drill_probe(flow, group, max_records, wait_seconds, max_reread)

    if seconds is None:
        report = once()
        emit(report.as_dict(), output, _render_probe)
        raise typer.Exit(report.verdict.exit_code)
    repeat(drkit, once, seconds, metrics_port, lambda report: emit(report.as_dict(), output, _render_probe))


def _every(every: str | None, metrics_port: int | None) -> float | None:
    """``--every`` in seconds (None: once); a bad one, or ``--metrics-port`` without it, is a usage error."""
    if every is None:
        if metrics_port is not None:
            raise typer.BadParameter(
                "only with --every (a single drill serves no metrics)", param_hint="--metrics-port"
            )
        return None
    try:
        return parse_every(every)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--every") from None


def repeat(
    drkit: Drkit, once: Callable[[], R], every: float, metrics_port: int | None, show: Callable[[R], None]
) -> None:
    """Any drill command's ``--every``: ``once()`` (one drill through the facade) on a schedule, each report
    shown by ``show``, a later run's error one line on stderr; exit 0 once stopped between runs."""

    def failed(exc: DrkitError) -> None:
        stderr.print(f"[red]drill not run:[/] {escape(str(exc))} (next run as scheduled)", highlight=False)

    drkit.drill_repeat(once, every, metrics_port, show, failed)


@app.command("history")
def history(
    ctx: typer.Context,
    config: Path = ConfigOption,
    limit: int = typer.Option(20, "--limit", min=1, help="How many drills, newest first."),
    output: Output = OutputOption,
) -> None:
    """The drills run with this state root, newest first (the `drills` Delta table)."""
    result = facade(ctx, config).drill_history(limit)

    def render(d: dict[str, Any]) -> Iterable[RenderableType]:
        yield table(
            "drills",
            ["started", "name", "flow", "disaster", "verdict", "acked", "lost", "re-delivered", "RPO", "RTO (s)"],
            [
                [
                    time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(x["started_ms"] / 1000)),
                    x["name"],
                    x["flow"],
                    x["disaster"],
                    x["verdict"],
                    x["acked"],
                    x["lost"],
                    x["redelivered"],
                    x["rpo_records"],
                    "-" if x["rto_ms"] is None else round(x["rto_ms"] / 1000, 1),
                ]
                for x in d["drills"]
            ],
        )

    emit(result.as_dict(), output, render)
