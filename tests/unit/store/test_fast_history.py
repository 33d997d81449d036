"""The inspection readers of the delta-rs stores (what the notebooks show), on real Delta tables in tmp_path."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from drkit.core.checkpoints import Checkpoint
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.store.fast import FastCheckpoints, FastOffsetSyncs, SyncRow, _append, table_versions
from drkit.store.tables import OFFSET_SYNCS_DDL, arrow_schema

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def sync(
    flow: str,
    topic: str,
    partition: int,
    up: tuple[int, int],
    down: tuple[int, int],
    batch: int,
    stream: str = "s1",
    at: datetime = T0,
) -> dict[str, object]:
    return {
        "flow": flow,
        "source_topic": topic,
        "target_topic": f"A.{topic}",
        "partition": partition,
        "upstream_first": up[0],
        "upstream_last": up[1],
        "downstream_first": down[0],
        "downstream_last": down[1],
        "record_count": up[1] - up[0] + 1,
        "batch_id": batch,
        "stream_id": stream,
        "written_at": at,
        "sync_date": date(2026, 11, 23),
    }


def write_syncs(layout: StateLayout, rows: list[dict[str, object]]) -> None:
    _append(
        layout.offset_syncs,
        "offset_syncs",
        OFFSET_SYNCS_DDL,
        pa.Table.from_pylist(rows, schema=arrow_schema(OFFSET_SYNCS_DDL)),
    )


def test_sync_history_is_the_rows_of_one_partition_as_written(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    store = FastOffsetSyncs(layout)
    assert store.history("A->B", "orders", 0) == []
    write_syncs(
        layout,
        [
            sync("A->B", "orders", 0, (5, 9), (0, 4), 1, at=T0 + timedelta(seconds=5)),
            sync("A->B", "orders", 0, (0, 4), (10, 14), 0),
            sync("A->B", "orders", 1, (0, 2), (0, 2), 0),
            sync("A->B", "other", 0, (0, 2), (0, 2), 0),
            sync("B->A", "orders", 0, (0, 2), (0, 2), 0),
        ],
    )
    write_syncs(layout, [sync("A->B", "orders", 0, (12, 20), (15, 23), 2, at=T0 + timedelta(seconds=9))])
    rows = store.history("A->B", "orders", 0)
    assert [(r.batch_id, r.upstream_first, r.upstream_last) for r in rows] == [(0, 0, 4), (1, 5, 9), (2, 12, 20)]
    assert rows[0] == SyncRow("A->B", "orders", "A.orders", 0, 0, 4, 10, 14, 5, 0, "s1", T0)
    assert {r.partition for r in store.history("A->B", "orders")} == {0, 1}
    at_first = store.history("A->B", "orders", 0, version=2)  # 0: create, 1: schema property, 2: first rows
    assert [r.batch_id for r in at_first] == [0, 1]
    assert store.history("A->B", "missing", 0) == []
    assert [v.version for v in store.versions()] == [0, 1, 2, 3]


def test_checkpoint_history_oldest_first_as_of_and_by_version(tmp_path: Path) -> None:
    store = FastCheckpoints(StateLayout(tmp_path))
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
