"""delta-rs (the operator commands, the translator) and Spark (the mirror, maintenance) share the tables.

Each side reads what the other wrote, row for row: offset-syncs written by Spark, checkpoints and
audit rows written by either; time travel by version and by time answers the same; and after
``drkit maintain`` (coalescing, OPTIMIZE, VACUUM) both still agree.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from support.sync_writer import YESTERDAY, Writer, config_for

from drkit.core.audit import Action, OperationRecord
from drkit.core.checkpoints import Checkpoint
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.store.checkpoints import CheckpointStore
from drkit.store.fast import FastCheckpoints, FastOffsetSyncs, FastOperations
from drkit.store.maintenance import maintain
from drkit.store.offset_syncs import OffsetSyncStore
from drkit.store.operations import OperationStore

PARTS = [("orders", "A.orders", 0), ("orders", "A.orders", 1), ("audit", "A.audit", 0)]


def checkpoint(group: str, partition: int, upstream: int) -> Checkpoint:
    return Checkpoint("A->B", group, "orders", "A.orders", partition, upstream, upstream, Position.MIRRORED, "m")


def record(n: int, flow: str = "A->B") -> OperationRecord:
    started = datetime(2026, 11, 23, 10, 0, n, tzinfo=UTC)
    return OperationRecord(
        f"op{n}",
        Action.FAILOVER,
        flow,
        ("g1", "g2"),
        None,
        n % 2 == 0,
        {"moves": [n]},
        {"status": "applied"},
        "alice",
        "host",
        "0.0",
        started,
        started + timedelta(seconds=1),
    )


def same_syncs(spark_store: OffsetSyncStore, fast: FastOffsetSyncs) -> None:
    for flow in ("A->B", "B->A"):
        assert fast.ranges(flow) == {k: sorted(v) for k, v in spark_store.ranges(flow).items()}
        assert fast.progress(flow) == spark_store.progress(flow)
        assert fast.target_topics(flow) == spark_store.target_topics(flow)


def test_both_engines_read_the_same_rows_before_and_after_maintenance(spark: Any, tmp_path: Path) -> None:
    config = config_for(tmp_path)
    layout = StateLayout(config.state_root())
    syncs = OffsetSyncStore(spark, layout)
    syncs.ensure()
    fast_syncs = FastOffsetSyncs(layout)
    assert fast_syncs.ranges("A->B") == {}

    # Offset-syncs written by Spark, as the mirror writes them: yesterday's and today's, with gaps.
    writer = Writer(syncs, "A->B", "stream-1")
    for b in range(8):
        writer.batch(
            b,
            PARTS,
            skip_upstream={("orders", 0): 2} if b == 3 else None,
            split={("audit", 0)} if b == 5 else None,
            at=YESTERDAY if b < 6 else datetime.now(UTC),
        )
    Writer(syncs, "B->A", "stream-2").batch(0, [("orders", "B.orders", 0)], at=YESTERDAY)
    same_syncs(syncs, fast_syncs)
    seen_since = fast_syncs.ranges_since("A->B", {"stream-1": 5}, fast_syncs.version() or 0)
    assert seen_since == syncs.ranges_since("A->B", {"stream-1": 5}, syncs.version() or 0)

    # Checkpoints: Spark writes the first rows, delta-rs the next; each reads all of them.
    spark_checkpoints, fast_checkpoints = CheckpointStore(spark, layout), FastCheckpoints(layout)
    spark_checkpoints.ensure()
    spark_checkpoints.append([checkpoint("g1", 0, 10), checkpoint("g1", 1, 20)])
    time.sleep(1.1)
    between = datetime.now(UTC)
    time.sleep(1.1)
    fast_checkpoints.append([checkpoint("g1", 0, 30), checkpoint("g2", 0, 5)])
    for groups in (None, ["g1"], ["g2", "nobody"]):
        assert fast_checkpoints.latest("A->B", groups) == spark_checkpoints.latest("A->B", groups)
        assert fast_checkpoints.latest("A->B", groups, as_of=between) == spark_checkpoints.latest(
            "A->B", groups, as_of=between
        )
    assert {
        (r.checkpoint.group, r.checkpoint.partition, r.checkpoint.upstream_offset)
        for r in spark_checkpoints.latest("A->B")
    } == {("g1", 0, 30), ("g1", 1, 20), ("g2", 0, 5)}
    versions = range(fast_checkpoints_version(layout) + 1)
    for v in versions:
        assert fast_checkpoints.latest("A->B", version=v) == spark_checkpoints.latest("A->B", version=v)

    # The audit trail: rows from both writers, listed the same by both readers.
    spark_ops, fast_ops = OperationStore(spark, layout), FastOperations(layout)
    fast_ops.append(record(1))
    spark_ops.append(record(2))
    fast_ops.append(record(3, "B->A"))
    for flow in (None, "A->B"):
        assert fast_ops.list(flow) == spark_ops.list(flow)
    assert [o.id for o in fast_ops.list()] == ["op3", "op2", "op1"]

    # Maintenance (Spark): coalescing, OPTIMIZE, VACUUM; both engines still agree.
    before = fast_syncs.ranges("A->B")
    figures = maintain(spark, layout, config, keep_recent_batches=2)
    assert figures["offset_syncs"]["coalesce"]["ranges_merged"] > 0
    same_syncs(syncs, fast_syncs)
    assert fast_syncs.ranges("A->B") == before
    assert fast_checkpoints.latest("A->B") == spark_checkpoints.latest("A->B")
    assert fast_checkpoints.latest("A->B", as_of=between) == spark_checkpoints.latest("A->B", as_of=between)
    fast_checkpoints.append([checkpoint("g2", 0, 6)])  # delta-rs appends after Spark's OPTIMIZE
    assert fast_checkpoints.latest("A->B") == spark_checkpoints.latest("A->B")


def fast_checkpoints_version(layout: StateLayout) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(layout.checkpoints).version())
