"""A drill's verdict and report: drkit's refusals fail it, RPO and RTO come from its clock, and DrillReport
holds the failover/failback results as typed objects; its ``as_dict()`` (stored in the ``drills`` table's
``report`` column) keeps the shape it had when they were dicts."""

from __future__ import annotations

import json

from drkit.core.audit import Action, OperationStatus
from drkit.core.drill import Budget, DisasterKind, DrillReport, FailReason, Timeline, _reported, judge
from drkit.core.drill_accounting import Sent, account, rpo
from drkit.core.outcome import OperationResult
from drkit.core.plan import Plan
from drkit.core.status import EndsSource, RpoReport

RPO = RpoReport(False, EndsSource.LAST_OBSERVATION, "2026-01-01T00:00:00+00:00", 3, (), 4.0, lower_bound=True)
FAILOVER = OperationResult(Plan(Action.FAILOVER, "A->B", "B"), OperationStatus.APPLIED, "op-1", RPO)
FAILBACK = OperationResult(Plan(Action.FAILBACK, "A->B", "A"), OperationStatus.APPLIED, "op-2")
A = [("k0", 0), ("k0", 1), ("k0", 2), ("k1", 0), ("k1", 1)]


def sent(*keys: tuple[str, int], at: int = 1000) -> list[Sent]:
    return [Sent(k, s, at + i) for i, (k, s) in enumerate(keys)]


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


def test_a_refused_failover_fails_with_drkits_reason() -> None:
    a = account(sent(*A), [("k0", 0)], A, [], resumed=False)
    assert (a.lost, a.not_resumed) == (0, 4)  # never resumed: nothing skipped
    reasons = dict(judge(a, Budget(), refused="flow A->B has no checkpoints").reasons)
    assert "no checkpoints" in reasons[FailReason.FAILOVER_REFUSED]
    assert FailReason.NO_RESUME not in reasons


def test_rpo_and_rto_from_the_clock() -> None:
    a = account(sent(*A, at=10_000), [], A[:3], A[:3])
    assert rpo(a, 20_000) == {"rpo_records": 2, "rpo_seconds": 9.997}
    t = Timeline(20_000, 23_000, 23_500, 25_000, 31_000)
    assert t.rto() == {
        "rto_seconds": 11.0,
        "detection_seconds": 3.0,
        "failover_seconds": 1.5,
        "consumer_restart_seconds": 6.0,
        "failback_seconds": None,
        "back_on_source_seconds": None,
    }
    back = Timeline(20_000, 23_000, 23_500, 25_000, 31_000, 40_000, 41_000, 42_500, 44_000)
    assert (back.rto()["failback_seconds"], back.rto()["back_on_source_seconds"]) == (1.5, 4.0)


def test_a_refused_failback_fails_with_drkits_reason() -> None:
    a = account(sent(*A), [("k0", 0), ("k0", 1), ("k1", 0)], A[:4], [("k0", 2)])
    reasons = dict(judge(a, Budget(), failback_refused="active_group: 1 member on A").reasons)
    assert set(reasons) == {FailReason.FAILBACK_REFUSED} and "active_group" in reasons[FailReason.FAILBACK_REFUSED]


def test_the_report_prints_drkits_rpo_as_a_bound_and_an_estimate() -> None:
    assert _reported(None) == "- (no failover ran)"
    live = RpoReport(True, EndsSource.LIVE, None, 3, ())
    assert _reported(live) == "3 unmirrored offsets (source ends from live)"
    observed = RpoReport(
        False,
        EndsSource.LAST_OBSERVATION,
        None,
        0,
        (),
        observation_age_seconds=17.0,
        estimated_since_observation=3174,
        lower_bound=True,
    )
    shown = _reported(observed)
    assert shown == (
        "at least 0 unmirrored offsets (source ends from last observation, observed 17.0s before), "
        "estimated 3174 more produced after the observation"
    )
