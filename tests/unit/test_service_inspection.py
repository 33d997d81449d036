"""The facade's inspection methods (what the notebooks call): typed rows, gaps, time travel, the plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.fakes import NOW, two_cluster_config, world
from support.sync_writer import sync, write_syncs

from drkit.core.checkpoints import Checkpoint
from drkit.core.offsets import SyncRange
from drkit.core.sync_gaps import GapKind
from drkit.core.translate import Position
from drkit.results import CheckpointRow
from drkit.service import Drkit
from drkit.store.checkpoints import CheckpointTable

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def test_sync_history_rows_and_gaps_on_either_side(tmp_path: Path) -> None:
    drkit = Drkit(two_cluster_config(tmp_path))
    assert drkit.sync_history("A->B", "orders", 0).rows == ()
    at = [T0 + timedelta(seconds=s) for s in range(4)]
    write_syncs(
        drkit.layout,
        [
            sync("A->B", "orders", 0, (0, 4), (0, 4), 0, at=at[0]),
            sync("A->B", "orders", 0, (11, 13), (5, 7), 1, at=at[1]),  # 5..10: markers, aborted records
            sync("A->B", "orders", 0, (14, 16), (12, 14), 2, at=at[2]),  # 8..11 on the target: a failed attempt
            sync("A->B", "orders", 0, (15, 18), (15, 18), 0, "s2", at[3]),  # a new stream copies 15, 16 again
            sync("A->B", "orders", 1, (0, 9), (0, 9), 0, at=at[0]),
        ],
    )
    history = drkit.sync_history("A->B", "orders", 0)
    assert [r.batch_id for r in history.rows] == [0, 1, 2, 0] and history.partition == 0
    assert [(g.kind, g.first, g.last, g.size, g.written_at, g.stream_id) for g in history.gaps()] == [
        (GapKind.DOWNSTREAM, 8, 11, 4, at[2], "s1"),
        (GapKind.REPLAY, 15, 16, 2, at[3], "s2"),
        (GapKind.UPSTREAM, 5, 10, 6, at[1], "s1"),
    ]
    d = history.as_dict()
    assert d["rows"][1]["upstream_first"] == 11 and d["gaps"][0] | {"kind": "downstream", "size": 4} == d["gaps"][0]
    assert drkit.sync_history("A->B", "orders", 1).gaps() == ()
    assert len(drkit.sync_history("A->B", "orders").rows) == 5
    assert len(drkit.sync_history("A->B", "orders", 0, version=2).rows) == 4  # time travel: before a later append
    assert [v.version for v in drkit.table_versions("offset_syncs").versions] == [0, 1, 2]
    assert drkit.table_versions("operations").versions == ()
    with pytest.raises(ValueError, match="unknown table 'nope'"):
        drkit.table_versions("nope")


def test_checkpoint_history_as_typed_rows(tmp_path: Path) -> None:
    drkit = Drkit(two_cluster_config(tmp_path))
    store = CheckpointTable(drkit.layout)
    store.append([Checkpoint("A->B", "g", "orders", "A.orders", 0, 10, 12, Position.MIRRORED)], at=T0)
    store.append(
        [Checkpoint("A->B", "g", "orders", "A.orders", 0, 20, None, Position.UNMIRRORED)], at=T0 + timedelta(seconds=30)
    )
    history = drkit.checkpoint_history("A->B", "g")
    assert history.rows == (
        CheckpointRow("g", "orders", "A.orders", 0, 10, 12, "mirrored", T0),
        CheckpointRow("g", "orders", "A.orders", 0, 20, None, "unmirrored", T0 + timedelta(seconds=30)),
    )
    assert [r.upstream_offset for r in drkit.checkpoint_history("A->B", "g", as_of=T0).rows] == [10]
    assert [r.upstream_offset for r in drkit.checkpoint_history("A->B", "g", version=2).rows] == [10]
    assert history.as_dict()["rows"][1]["position"] == "unmirrored"
    assert [v.version for v in drkit.table_versions("checkpoints").versions] == [0, 1, 2, 3]


def test_plan_failover_through_the_facade_audits_nothing(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40)
    drkit = Drkit(w.config, context=w.context)
    plan = drkit.plan_failover("A->B", ["billing"], as_of=NOW)
    assert plan.commits() == {"billing": {("A.orders", 0): 40}}
    assert w.operations.records == [] and w.b.commits == []
    assert drkit.failover("A->B", ["billing"], as_of=NOW).plan == plan
