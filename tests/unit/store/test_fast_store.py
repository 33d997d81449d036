"""The delta-rs stores on real Delta tables in a temporary folder (no JVM: milliseconds).

That Spark reads these rows the same way is tests/integration/store/test_fast_reader.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.core.audit import Action, OperationRecord
from drkit.core.checkpoints import Checkpoint
from drkit.core.offsets import SyncRange, coalesce
from drkit.core.translate import Position, SyncIndex
from drkit.errors import StoreError
from drkit.layout import StateLayout
from drkit.store.fast import FastCheckpoints, FastOperations, _coalesced
from drkit.store.tables import arrow_schema

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def cp(group: str, partition: int, upstream: int, topic: str = "orders") -> Checkpoint:
    return Checkpoint("A->B", group, topic, f"A.{topic}", partition, upstream, upstream, Position.MIRRORED)


def test_latest_checkpoints_now_as_of_and_by_version(tmp_path: Path) -> None:
    store = FastCheckpoints(StateLayout(tmp_path))
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


def test_operations_newest_first(tmp_path: Path) -> None:
    log = FastOperations(StateLayout(tmp_path))
    assert log.list() == []
    for n, flow in enumerate(["A->B", "B->A", "A->B"]):
        started = T0 + timedelta(seconds=n)
        log.append(
            OperationRecord(
                f"op{n}",
                Action.FAILOVER,
                flow,
                ("g",),
                None,
                True,
                {"n": n},
                {"status": "dry_run"},
                "u",
                "h",
                "v",
                started,
                None,
            )
        )
    assert [o.id for o in log.list()] == ["op2", "op1", "op0"]
    assert [o.id for o in log.list("A->B", limit=1)] == ["op2"]
    assert log.list()[0].plan == {"n": 2} and log.list()[0].finished_at is None


def test_a_table_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    layout = StateLayout(tmp_path)
    FastOperations(layout).append(
        OperationRecord("x", Action.FAILBACK, "A->B", (), None, True, {}, {}, "u", "h", "v", T0, T0)
    )
    DeltaTable(layout.operations).alter.set_table_properties({"drkit.schema.version": "0"}, raise_if_not_exists=False)
    with pytest.raises(StoreError, match="has schema version 0, this drkit needs 1"):
        FastOperations(layout).list()


ranges_strategy = st.lists(  # replays overlap: the same offsets copied twice
    st.tuples(
        st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(0, 60), st.integers(0, 60), st.integers(1, 8)
    ),
    max_size=40,
)


@settings(deadline=None)
@given(rows=ranges_strategy)
def test_vectorised_coalescing_keeps_every_pair_and_translation(rows: list[tuple[str, int, int, int, int]]) -> None:
    ranges = [(t, p, SyncRange(u, u + n - 1, d, d + n - 1)) for t, p, u, d, n in rows]
    table = pa.Table.from_pylist(
        [
            {
                "source_topic": t,
                "partition": p,
                "upstream_first": r.upstream_first,
                "upstream_last": r.upstream_last,
                "downstream_first": r.downstream_first,
                "downstream_last": r.downstream_last,
            }
            for t, p, r in ranges
        ],
        schema=pa.schema(
            [
                f
                for f in arrow_schema(
                    "source_topic STRING NOT NULL, partition INT NOT NULL, "
                    "upstream_first BIGINT, upstream_last BIGINT, "
                    "downstream_first BIGINT, downstream_last BIGINT"
                )
            ]
        ),
    )
    expected: dict[tuple[str, int], list[SyncRange]] = {}
    for t, p, r in ranges:
        expected.setdefault((t, p), []).append(r)
    got = _coalesced(table)
    assert set(got) == set(expected)
    for key, rs in expected.items():
        pairs = {pair for r in rs for pair in r.pairs()}
        assert {pair for r in got[key] for pair in r.pairs()} == pairs
        core, fast = SyncIndex(coalesce(set(rs))), SyncIndex(got[key])
        for offset in range(0, 75):
            assert fast.translate(offset) == core.translate(offset) and fast.inverse(offset) == core.inverse(offset)


def test_offset_syncs_ranges_progress_and_increments(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    from drkit.store.fast import FastOffsetSyncs
    from drkit.store.tables import OFFSET_SYNCS_DDL, SCHEMA_VERSION

    layout = StateLayout(tmp_path)
    syncs = FastOffsetSyncs(layout)
    assert syncs.ranges("A->B") == {} and syncs.progress("A->B") == {} and syncs.version() is None

    def write(batch: int, rows: list[tuple[str, int, int, int, int]], stream: str = "s1", flow: str = "A->B") -> None:
        at = T0 + timedelta(seconds=batch)
        data = [
            {
                "flow": flow,
                "source_topic": t,
                "target_topic": f"A.{t}",
                "partition": p,
                "upstream_first": u,
                "upstream_last": u + n - 1,
                "downstream_first": d,
                "downstream_last": d + n - 1,
                "record_count": n,
                "batch_id": batch,
                "stream_id": stream,
                "written_at": at,
                "sync_date": at.date(),
            }
            for t, p, u, d, n in rows
        ]
        write_deltalake(
            layout.offset_syncs,
            pa.Table.from_pylist(data, schema=arrow_schema(OFFSET_SYNCS_DDL)),
            mode="append",
            partition_by=["sync_date"],
        )

    write(0, [("orders", 0, 0, 0, 10), ("orders", 1, 0, 0, 5)])
    DeltaTable(layout.offset_syncs).alter.set_table_properties(
        {"drkit.schema.version": SCHEMA_VERSION}, raise_if_not_exists=False
    )
    write(1, [("orders", 0, 10, 10, 10), ("audit", 0, 0, 0, 3)])
    write(2, [("orders", 0, 25, 20, 5)])  # upstream gap (compaction): a new range
    write(0, [("x", 0, 0, 0, 1)], flow="B->A")
    assert syncs.ranges("A->B") == {
        ("orders", 0): [SyncRange(0, 19, 0, 19), SyncRange(25, 29, 20, 24)],
        ("orders", 1): [SyncRange(0, 4, 0, 4)],
        ("audit", 0): [SyncRange(0, 2, 0, 2)],
    }
    assert set(syncs.ranges("A->B", ["audit"])) == {("audit", 0)} and syncs.ranges("A->B", []) == {}
    assert syncs.target_topics("A->B") == {"orders": "A.orders", "audit": "A.audit"}
    progress = syncs.progress("A->B")[("orders", 0)]
    assert (progress.last_upstream, progress.last_downstream) == (29, 24)
    assert progress.synced_at_ms == int((T0 + timedelta(seconds=2)).timestamp() * 1000)
    version = syncs.version()
    assert version is not None
    new, marks = syncs.ranges_since("A->B", {"s1": 1}, version)
    assert new == {("orders", 0): [SyncRange(25, 29, 20, 24)]} and marks == {"s1": 2}
    assert syncs.ranges_since("A->B", marks, version) == ({}, marks)
