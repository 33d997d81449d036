"""Failover of a group with offsets on partitions that had nothing to mirror, with the source gone.

The translator recorded the verdict in the checkpoint row (Position.NOTHING_TO_MIRROR, the target
partition's start); failover uses it when the syncs have nothing for the partition, and still refuses
a partition whose records exist on the source but were never mirrored.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fakes import World, world

from drkit.core.audit import OperationStatus
from drkit.core.checkpoints import Checkpoint
from drkit.core.offsets import SyncRange
from drkit.core.refusals import RefusalReason
from drkit.core.translate import Position
from drkit.operate.failover import FailoverRequest, failover


@pytest.fixture
def w(tmp_path: Path) -> World:
    """events/0: all 50 records deleted (checkpoint 50); events/1: never written (0); events/2: mirrored."""
    w = world(tmp_path)
    w.syncs.add("A->B", "events", "A.events", 2, SyncRange(0, 29, 0, 29))
    w.checkpoints.record(Checkpoint("A->B", "g", "events", "A.events", 0, 50, 0, Position.NOTHING_TO_MIRROR))
    w.checkpoints.record(Checkpoint("A->B", "g", "events", "A.events", 1, 0, 0, Position.NOTHING_TO_MIRROR))
    w.checkpoints.record(Checkpoint("A->B", "g", "events", "A.events", 2, 10, 10, Position.MIRRORED))
    w.a.reachable = False
    return w


def test_failover_applies_with_the_source_gone(w: World) -> None:
    result = failover(w.context, FailoverRequest(w.config.flow("A->B"), ["g"], apply=True))
    assert result.status is OperationStatus.APPLIED and result.plan.warnings == ()
    assert w.b.commits == [("g", {("A.events", 0): 0, ("A.events", 1): 0, ("A.events", 2): 10})]
    assert [m.position for m in result.plan.moves] == [
        Position.NOTHING_TO_MIRROR,
        Position.NOTHING_TO_MIRROR,
        Position.MIRRORED,
    ]


def test_records_that_exist_and_were_not_mirrored_still_refuse(w: World) -> None:
    w.checkpoints.record(Checkpoint("A->B", "g", "events", "A.events", 3, 5, None, Position.UNMIRRORED))
    result = failover(w.context, FailoverRequest(w.config.flow("A->B"), ["g"], apply=True))
    assert result.status is OperationStatus.REFUSED and w.b.commits == []
    assert [(r.reason, r.detail) for r in result.plan.refusals] == [
        (
            RefusalReason.UNTRANSLATABLE,
            "events/3: committed offset 5 cannot be translated (nothing of the partition was mirrored)",
        )
    ]
