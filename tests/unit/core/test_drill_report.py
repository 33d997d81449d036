"""DrillReport holds the failover/failback results as typed objects; its ``as_dict()`` (stored in the
``drills`` table's ``report`` column) keeps the shape it had when they were dicts."""

from __future__ import annotations

import json

from drkit.core.audit import Action, OperationStatus
from drkit.core.drill import Budget, DisasterKind, DrillReport, Sent, Timeline, account, judge
from drkit.core.outcome import OperationResult
from drkit.core.plan import Plan
from drkit.core.status import EndsSource, RpoReport

RPO = RpoReport(False, EndsSource.LAST_OBSERVATION, "2026-01-01T00:00:00+00:00", 3, (), 4.0, lower_bound=True)
FAILOVER = OperationResult(Plan(Action.FAILOVER, "A->B", "B"), OperationStatus.APPLIED, "op-1", RPO)
FAILBACK = OperationResult(Plan(Action.FAILBACK, "A->B", "A"), OperationStatus.APPLIED, "op-2")


def _report(failover: OperationResult | None, failback: OperationResult | None = None) -> DrillReport:
    accounting = account([Sent("k", 0, 1000)], [("k", 0)], [("k", 0)], [])
    return DrillReport(
        id="d1",
        name="kill",
        flow="A->B",
        disaster=DisasterKind.KILL_SOURCE,
        judgement=judge(accounting, Budget()),
        accounting=accounting,
        timeline=Timeline(2000, None, None, None, None),
        failover=failover,
        spec={},
        drkit_version="0.1.0",
        started_ms=0,
        finished_ms=1,
        failback=failback,
    )


def test_results_are_stored_as_their_dicts() -> None:
    d = _report(FAILOVER, FAILBACK).as_dict()
    assert d["failover"] == FAILOVER.as_dict() and d["failback"] == FAILBACK.as_dict()
    assert d["reported_rpo"] == RPO.as_dict() == d["failover"]["rpo"]
    json.dumps(d)  # what the drills table stores


def test_what_did_not_run_is_an_empty_dict() -> None:
    report = _report(None)
    assert report.reported_rpo is None
    d = report.as_dict()
    assert (d["failover"], d["failback"], d["reported_rpo"]) == ({}, {}, {})
    assert "no failover ran" in report.markdown()


def test_the_rpo_is_the_failovers() -> None:
    report = _report(FAILOVER)
    assert report.reported_rpo is RPO
    assert "at least 3 unmirrored offsets" in report.markdown()
