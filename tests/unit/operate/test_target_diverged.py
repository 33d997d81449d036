"""A target topic deleted or truncated under its offset-syncs: status says so, failover refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fakes import NOW_MS, World, two_cluster_config, world

from drkit.core.consistency import DivergenceKind
from drkit.core.offsets import SyncRange
from drkit.core.refusals import RefusalReason
from drkit.core.status import Verdict
from drkit.operate.failover import FailoverRequest, failover, plan_failover
from drkit.operate.status import status
from drkit.store.runs import RunFiles, TranslatorRun


@pytest.fixture
def w(tmp_path: Path) -> World:
    """orders/0 and orders/1 mirrored 0..29 -> 0..29 onto A.orders on B; the source at the same ends."""
    w = world(tmp_path, two_cluster_config(tmp_path, flows=[{"source": "A", "target": "B"}]))
    for p in (0, 1):
        w.syncs.add("A->B", "orders", "A.orders", p, SyncRange(0, 29, 0, 29))
        w.a.ends[("orders", p)] = 30
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 20)
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 1, 10)
    RunFiles(w.context.layout).write_last_run("A->B", TranslatorRun(int(NOW_MS - 1_000), 0.1, 1, 1, 0))
    return w


def recreated_empty(w: World) -> None:
    """A.orders deleted on B and created again (auto-creation, a person): both partitions at 0."""
    w.b.ends.update({("A.orders", 0): 0, ("A.orders", 1): 0})


def test_healthy_while_the_target_holds_the_synced_copies(w: World) -> None:
    report = status(w.context, w.config.flows)
    assert report.verdict is Verdict.HEALTHY
    assert report.flows[0].target_divergences == () and report.flows[0].target_problem == ""


def test_status_reports_a_recreated_target_instead_of_lag_0(w: World) -> None:
    recreated_empty(w)
    report = status(w.context, w.config.flows)
    assert report.verdict is Verdict.TARGET_DIVERGED and report.verdict.exit_code == 23
    [flow] = report.flows
    assert [(d.kind, d.partition, d.end, d.synced_end) for d in flow.target_divergences] == [
        (DivergenceKind.BELOW_SYNCED_END, 0, 0, 30),
        (DivergenceKind.BELOW_SYNCED_END, 1, 0, 30),
    ]
    assert flow.target_problem.startswith(
        "target topic A.orders on B holds fewer records than its offset-syncs say (partition 0: end 0, synced up to 29"
    )
    data = json.loads(json.dumps(report.as_dict()))  # plain JSON data
    assert data["verdict"] == "target diverged"
    assert data["flows"][0]["target_divergences"][0]["kind"] == "below synced end"


def test_a_recreated_target_has_no_lag_to_tell_never_0(w: World) -> None:
    """The syncs say every record up to 29 was mirrored; the re-created copy holds none of them: the lag
    against the target is not 0 (once reported) but unknown, for the partitions and the flow."""
    assert [p.lag_records for p in status(w.context, w.config.flows).flows[0].partitions] == [0, 0]
    recreated_empty(w)
    w.b.ends[("A.orders", 1)] = 30  # partition 1 still holds its copies
    [flow] = status(w.context, w.config.flows).flows
    assert {(p.partition, p.lag_records, p.lag_seconds) for p in flow.partitions} == {(0, None, None), (1, 0, 0.0)}
    assert flow.lag_records is None
    data = json.loads(json.dumps(status(w.context, w.config.flows).as_dict()))
    assert data["flows"][0]["lag_records"] is None


def test_status_reports_a_deleted_target_topic(w: World) -> None:
    del w.b.ends[("A.orders", 0)], w.b.ends[("A.orders", 1)]
    report = status(w.context, w.config.flows)
    assert report.verdict is Verdict.TARGET_DIVERGED
    assert {d.kind for d in report.flows[0].target_divergences} == {DivergenceKind.TOPIC_MISSING}
    assert "target topic A.orders on B does not exist" in report.flows[0].target_problem


def test_a_diverged_target_is_worse_than_an_unreachable_source(w: World) -> None:
    recreated_empty(w)
    w.a.reachable = False
    assert status(w.context, w.config.flows).verdict is Verdict.TARGET_DIVERGED


def test_an_unreachable_target_is_unknown_not_diverged(w: World) -> None:
    w.b.reachable = False
    [flow] = status(w.context, w.config.flows).flows
    assert flow.verdict is Verdict.TARGET_UNREACHABLE and not flow.target_reachable and flow.target_divergences == ()


def test_failover_refuses_onto_a_partition_that_lost_its_synced_copies(w: World) -> None:
    w.b.ends[("A.orders", 1)] = 12  # truncated: the copies 12..29 are gone
    request = FailoverRequest(w.config.flow("A->B"), ["billing"], apply=True)
    result = failover(w.context, request, confirm=lambda _: True)
    assert not result.plan.ok and w.b.commits == []
    [refusal] = result.plan.refusals
    assert refusal.reason is RefusalReason.TARGET_DIVERGED and refusal.group == "billing"
    assert refusal.detail.startswith(
        "target topic A.orders on B partition 1: end 12, synced up to 29: it was deleted or truncated"
    )
    assert plan_failover(w.context, request).refusals == result.plan.refusals


def test_failover_ignores_diverged_topics_no_checkpoint_translates_onto(w: World) -> None:
    w.syncs.add("A->B", "audit", "A.audit", 0, SyncRange(0, 9, 0, 9))
    del w.b.ends[("A.audit", 0)]
    assert failover(w.context, FailoverRequest(w.config.flow("A->B"), ["billing"])).plan.ok
