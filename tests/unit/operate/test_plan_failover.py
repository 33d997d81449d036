"""plan_failover: the plan failover shows, built by the same code, without applying, probing or auditing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from support.fakes import NOW, NOW_MS, World, two_cluster_config, world

from drkit.core.offsets import SyncRange
from drkit.core.refusals import RefusalReason
from drkit.errors import RefusedError
from drkit.operate.failover import FailoverRequest, failover, plan_failover


@pytest.fixture
def w(tmp_path: Path) -> World:
    flows = [{"source": "A", "target": "B", "checkpoint": {"max_age_seconds": 120}}]
    w = world(tmp_path, two_cluster_config(tmp_path, flows=flows))
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.syncs.add("A->B", "orders", "A.orders", 1, SyncRange(0, 49, 10, 59))
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40, at_ms=NOW_MS - 600_000)
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 1, 20, at_ms=NOW_MS - 600_000)
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 70, at_ms=NOW_MS - 1_000)
    return w


def test_the_plan_is_the_one_failover_shows_and_nothing_happens(w: World) -> None:
    for as_of in (None, NOW - timedelta(minutes=5)):
        request = FailoverRequest(w.config.flow("A->B"), ["billing"], as_of, allow_stale=True)
        plan = plan_failover(w.context, request)
        assert w.operations.records == [] and w.b.commits == [] and w.clusters.probes == []
        assert plan == failover(w.context, request).plan  # the dry run (which audits) shows the same plan
        w.operations.records.clear()
        w.clusters.probes.clear()
    moves = plan_failover(
        w.context, FailoverRequest(w.config.flow("A->B"), ["billing"], NOW - timedelta(minutes=5), allow_stale=True)
    ).moves
    assert [(m.partition, m.committed, m.new) for m in moves] == [(0, 40, 40), (1, 20, 30)]


def test_the_plan_as_of_a_moment_keeps_the_refusals(w: World) -> None:
    plan = plan_failover(w.context, FailoverRequest(w.config.flow("A->B"), ["billing"], NOW - timedelta(minutes=5)))
    assert not plan.ok and {r.reason for r in plan.refusals} == {RefusalReason.STALE}  # 300 s old then
    assert [(m.partition, m.committed) for m in plan.moves] == [(0, 40), (1, 20)]
    with pytest.raises(RefusedError, match="no checkpoints"):
        plan_failover(w.context, FailoverRequest(w.config.flow("A->B"), None, NOW - timedelta(hours=1)))
    assert w.operations.records == []
