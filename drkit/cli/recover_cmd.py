"""``drkit recover``: the records a flow's failover left on its source, per partition, and how many of them the
target holds now; exit 0 when none are left behind (or they were dismissed), 32 while some are not on the
target, 33 when that is not known (the source does not answer). Reads only, unless ``--dismiss``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, OutputOption, facade

if TYPE_CHECKING:
    from drkit.core.recovery import RecoveryReport


def recover(
    ctx: typer.Context,
    flow: str = typer.Option(..., "--flow", help="The replication flow that failed over, e.g. A->B."),
    dismiss: bool = typer.Option(
        False,
        "--dismiss",
        help="Give up the records still not on the target (audited; status stops counting them). Changes no cluster.",
    ),
    config: Path = ConfigOption,
    output: Output = OutputOption,
) -> None:
    """Show the records the flow's failover left on its source (the offsets the mirror had not copied), per
    partition, and what of them is on the target now: run the flow's mirror once the source answers, and this
    follows them across. Reads only, unless --dismiss."""
    drkit = facade(ctx, config)
    with Progress(f"recover {flow}: reading the audit trail and both clusters...", output):
        report = drkit.recovery(flow, dismiss)
    emit(report, output, render_recovery)
    raise typer.Exit(report.exit_code)


def render_recovery(r: RecoveryReport) -> Iterable[RenderableType]:
    from drkit.core.recovery import RecoveryVerdict

    if r.verdict is RecoveryVerdict.NO_FAILOVER:
        yield f"{r.flow}: no failover since the last failback: no records were left behind"
        return
    if r.verdict is RecoveryVerdict.NO_RECORD:
        yield (
            f"{r.flow}: failover {r.failover_id} ({r.failover_at}) recorded no RPO (an earlier drkit): the records it "
            "left behind cannot be placed"
        )
        return
    rows = [
        [
            f"{p.topic}/{p.partition}",
            p.start,
            "unknown" if p.end is None else p.end,
            "unknown" if p.left_behind is None else p.left_behind,
            "unknown" if p.unrecovered is None else p.unrecovered,
            "-" if p.remaining is None else f"{p.remaining[0]}-{p.remaining[1] - 1}",
            "-" if p.produced_since is None else p.produced_since,
        ]
        for p in r.partitions
    ]
    yield table(
        f"recover {r.flow}: left behind by failover {r.failover_id} ({r.failover_at}), gap end {r.end_from}",
        ["partition", "first not copied", "end", "left behind", "not on target", "offsets to copy", "produced since"],
        rows,
    )
    if r.verdict is RecoveryVerdict.UNKNOWN:
        yield (
            "[bold yellow]unknown[/]: the source did not answer the failover and does not answer now: how much was "
            "left behind is known once it does"
        )
    elif r.verdict is RecoveryVerdict.PENDING:
        yield (
            f"[bold red]{r.unrecovered} offsets not on the target yet[/]: run the flow's mirror (drkit mirror --flow "
            f"'{r.flow}') while the source answers; run this again to follow them"
        )
    elif r.verdict is RecoveryVerdict.DISMISSED:
        missing = sum(p.unrecovered or 0 for p in r.partitions)
        yield f"[bold]dismissed[/] by {r.dismissed_by} at {r.dismissed_at}: {missing} offsets not on the target now"
    else:
        yield "[bold]recovered[/]: every record left behind is on the target"
    if r.produced_since:
        yield (
            f"[bold yellow]warning[/]: the source took {r.produced_since} records after the failover: a producer "
            f"still writes there (drkit fence --flow '{r.flow}')"
        )
