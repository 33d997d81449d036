"""Drill reports as ``drkit drill run`` makes them, without running one: for the ``drills`` table's readers
(the schedule's metrics, the drill-trend notebook)."""

from __future__ import annotations

from drkit.core.audit import Action, OperationStatus
from drkit.core.drill import Budget, DisasterKind, DrillReport, Timeline, judge
from drkit.core.drill_accounting import Sent, account
from drkit.core.outcome import OperationResult
from drkit.core.plan import Plan


def drill_report(
    drill_id: str, name: str, finished_ms: int, lost: bool = False, rto_ms: int | None = 1500, flow: str = "A->B"
) -> DrillReport:
    """One record acknowledged at 1000 ms, the disaster at 2000, the first record read on the target ``rto_ms``
    later (None: never); ``lost``: that record was never mirrored nor read (RPO 1 record, 1 s; the drill fails)."""
    mirrored = [] if lost else [("k", 0)]
    accounting = account([Sent("k", 0, 1000)], mirrored, mirrored, [])
    failover = OperationResult(Plan(Action.FAILOVER, flow, "B"), OperationStatus.APPLIED, "op-1")
    return DrillReport(
        id=drill_id,
        name=name,
        flow=flow,
        disaster=DisasterKind.STOP_MIRROR,
        judgement=judge(accounting, Budget()),
        accounting=accounting,
        timeline=Timeline(2000, 2100, 2200, 2300, None if rto_ms is None else 2000 + rto_ms),
        failover=failover,
        spec={},
        drkit_version="0",
        started_ms=finished_ms - 1000,
        finished_ms=finished_ms,
    )
