"""The checkpoints table on real Delta tables in a temporary folder (no JVM: milliseconds).

That Spark reads the same rows is tests/integration/store/test_spark_shares_tables.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from drkit.core.checkpoints import Checkpoint
from drkit.core.translate import Position
from drkit.errors import StoreError
from drkit.layout import StateLayout
from drkit.store.checkpoints import CheckpointTable
from drkit.store.table_history import table_versions

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def cp(group: str, partition: int, upstream: int, topic: str = "orders") -> Checkpoint:
    return Checkpoint("A->B", group, topic, f"A.{topic}", partition, upstream, upstream, Position.MIRRORED)


def test_latest_checkpoints_now_as_of_and_by_version(tmp_path: Path) -> None:
    store = CheckpointTable(StateLayout(tmp_path))
    assert store.latest("A->B") == []
    store.append([cp("g1", 0, 10), cp("g1", 1, 20), cp("g2", 0, 5)], at=T0)
    store.append([cp("g1", 0, 30)], at=T0 + timedelta(seconds=10))
    store.append([cp("g1", 0, 25), cp("g1", 0, 26)], at=T0 + timedelta(seconds=20))  # same time: greater offset
    latest = {(r.checkpoint.group, r.checkpoint.partition): r.checkpoint.upstream_offset for r in store.latest("A->B")}
    assert latest == {("g1", 0): 26, ("g1", 1): 20, ("g2", 0): 5}
    as_of = store.latest("A->B", ["g1"], as_of=T0 + timedelta(seconds=15))
    assert [(r.checkpoint.partition, r.checkpoint.upstream_offset) for r in as_of] == [(0, 30), (1, 20)]
    assert as_of[0].checkpointed_at_ms == int((T0 + timedelta(seconds=10)).timestamp() * 1000)
    first_data_version = 2  # 0: create, 1: schema version property, 2: first rows
    assert {r.checkpoint.upstream_offset for r in store.latest("A->B", ["g1"], version=first_data_version)} == {10, 20}
    assert store.latest("B->A") == []
    assert store.latest("A->B", []) == []
    with pytest.raises(StoreError, match="checkpoints table has no version 99"):
        store.latest("A->B", version=99)


def test_checkpoint_history_oldest_first_as_of_and_by_version(tmp_path: Path) -> None:
    store = CheckpointTable(StateLayout(tmp_path))
    assert store.history("A->B", "g1") == []

    def cp(group: str, partition: int, upstream: int) -> Checkpoint:
        return Checkpoint("A->B", group, "orders", "A.orders", partition, upstream, upstream + 10, Position.MIRRORED)

    store.append([cp("g1", 1, 20), cp("g1", 0, 10), cp("g2", 0, 5)], at=T0)
    store.append([cp("g1", 0, 30)], at=T0 + timedelta(seconds=10))
    rows = store.history("A->B", "g1")
    assert [(r.checkpoint.partition, r.checkpoint.upstream_offset, r.checkpointed_at_ms) for r in rows] == [
        (0, 10, int(T0.timestamp() * 1000)),
        (1, 20, int(T0.timestamp() * 1000)),
        (0, 30, int((T0 + timedelta(seconds=10)).timestamp() * 1000)),
    ]
    assert rows[0].checkpoint.downstream_offset == 20 and rows[0].checkpoint.position is Position.MIRRORED
    assert len(store.history("A->B", "g1", as_of=T0 + timedelta(seconds=5))) == 2
    assert len(store.history("A->B", "g1", version=2)) == 2
    assert store.history("B->A", "g1") == [] and store.history("A->B", "nobody") == []
    versions = store.versions()
    assert [v.version for v in versions] == [0, 1, 2, 3] and versions[-1].operation == "WRITE"
    assert versions == table_versions(store.path, "checkpoints")
    assert table_versions(str(tmp_path / "nothing"), "operations") == []
