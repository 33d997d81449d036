"""``topics sync`` (drkit.operate.topics) over fake reconcilers: each flow planned or reconciled with what
it has mirrored, in order, and the report the facade returns (drkit.results.TopicsSyncReport)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from support.fakes import world

from drkit.config import FlowConfig
from drkit.core.offsets import SyncRange
from drkit.core.topology import TopologyPlan
from drkit.kafka.topology import AppliedTopology
from drkit.operate.topics import sync_topics
from drkit.results import TopicsSyncReport


class Recorder:
    """A reconciler that records what it was asked: the plan names the flow, an apply creates one topic."""

    def __init__(self, flow: FlowConfig, asked: list[tuple[str, str, frozenset[str]]]) -> None:
        self.flow, self.asked = flow, asked

    def plan(self, mirrored_before: Iterable[str] = ()) -> TopologyPlan:
        self.asked.append(("plan", self.flow.name, frozenset(mirrored_before)))
        return TopologyPlan(self.flow.name)

    def reconcile(self, mirrored_before: Iterable[str] = ()) -> AppliedTopology:
        self.asked.append(("reconcile", self.flow.name, frozenset(mirrored_before)))
        return AppliedTopology(TopologyPlan(self.flow.name), ("made",), (), (), (), 2)


def test_a_dry_run_plans_each_flow_with_the_topics_it_mirrored(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 9, 0, 9))
    asked: list[tuple[str, str, frozenset[str]]] = []
    done = sync_topics(w.context, w.config.flows, lambda f: Recorder(f, asked), dry_run=True)
    assert asked == [("plan", "A->B", frozenset({"orders"})), ("plan", "B->A", frozenset())]
    report = TopicsSyncReport.of(done)
    assert [(f.plan.flow, f.dry_run, f.created) for f in report.flows] == [("A->B", True, ()), ("B->A", True, ())]


def test_an_apply_reconciles_and_reports_what_changed(tmp_path: Path) -> None:
    w = world(tmp_path)
    asked: list[tuple[str, str, frozenset[str]]] = []
    done = sync_topics(w.context, [w.config.flow("B->A")], lambda f: Recorder(f, asked), dry_run=False)
    assert asked == [("reconcile", "B->A", frozenset())]
    [flow] = TopicsSyncReport.of(done).as_dict()["flows"]
    assert flow["dry_run"] is False and flow["applied"] == {
        "created": ["made"],
        "grown": [],
        "configured": [],
        "acls": 2,
    }
