"""The ``drills`` table on a real Delta table (no JVM): a drill's report appended, listed newest first."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from drkit.core.audit import Action, OperationStatus
from drkit.core.drill import Budget, DisasterKind, DrillReport, Timeline, judge
from drkit.core.drill_accounting import Sent, account
from drkit.core.outcome import OperationResult
from drkit.core.plan import Plan
from drkit.layout import StateLayout
from drkit.store.drills import DrillLog


def report(drill_id: str, started_ms: int) -> DrillReport:
    accounting = account([Sent("k", 0, 1000)], [("k", 0)], [("k", 0)], [])
    failover = OperationResult(Plan(Action.FAILOVER, "A->B", "B"), OperationStatus.APPLIED, "op-1")
    return DrillReport(
        id=drill_id,
        name="kill",
        flow="A->B",
        disaster=DisasterKind.KILL_SOURCE,
        judgement=judge(accounting, Budget()),
        accounting=accounting,
        timeline=Timeline(2000, 2500, None, None, None),
        failover=failover,
        spec={"drill": {"name": "kill"}},
        drkit_version="0.1.0",
        started_ms=started_ms,
        finished_ms=started_ms + 1000,
    )


def test_drills_are_listed_newest_first_without_their_spec(tmp_path: Path) -> None:
    log = DrillLog(StateLayout(tmp_path))
    assert log.list() == []  # no table yet: nothing, not an error
    first = report("d1", 1_000_000)
    log.append(first)
    log.append(replace(first, id="d2", started_ms=2_000_000, finished_ms=2_001_000))
    records = log.list()
    assert [r.id for r in records] == ["d2", "d1"]
    assert records[1].verdict == first.verdict.value and records[1].acked == 1 and records[1].lost == 0
    assert (records[1].started_ms, records[1].finished_ms) == (1_000_000, 1_001_000)
    assert [r.id for r in log.list(limit=1)] == ["d2"]
