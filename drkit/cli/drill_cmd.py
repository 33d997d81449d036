"""``drkit drill run SPEC`` and ``drkit drill history``: rehearse a disaster, measured, kept in Delta."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, OutputOption, facade

if TYPE_CHECKING:  # annotations only: the command that renders them imports them
    from drkit.core.drill import DrillPhase

SpecArgument = typer.Argument(..., help="The drill spec (TOML), e.g. runbooks/drills/source-loss.toml.")

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
) -> None:
    """Run a drill against the configured clusters; exit 0 if it passed, 30 if it failed."""
    drkit = facade(ctx, config)
    began = time.monotonic()
    with Progress("drill: starting...", output) as progress:

        def phase(step: DrillPhase, detail: str) -> None:
            progress.update(f"drill [{time.monotonic() - began:5.0f}s] {step.value}: {detail}")

        report = drkit.drill_run(str(spec), phase)
    emit(report.as_dict(), output, _render_report)
    raise typer.Exit(report.verdict.exit_code)


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
