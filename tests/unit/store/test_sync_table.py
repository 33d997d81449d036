"""The offset_syncs table on real Delta tables (no JVM: milliseconds): reads, history, and coalescing as written.

That Spark reads the same rows is tests/integration/store/test_spark_shares_tables.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sync_writer import sync, write_syncs

from drkit.core.offsets import SyncRange, coalesce, islands
from drkit.core.translate import SyncIndex
from drkit.layout import StateLayout
from drkit.store.offset_syncs import (
    MERGE_KEYS,
    OFFSETS,
    SyncIndexCache,
    SyncRow,
    SyncTable,
    coalesced,
    merge_rows_counted,
    range_table,
)
from drkit.store.offset_syncs import SPEC as SYNCS_SPEC

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


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
        schema=pa.schema([SYNCS_SPEC.schema.field(n) for n in ["source_topic", "partition", *OFFSETS]]),
    )
    expected: dict[tuple[str, int], list[SyncRange]] = {}
    for t, p, r in ranges:
        expected.setdefault((t, p), []).append(r)
    got = coalesced(table)
    assert set(got) == set(expected)
    for key, rs in expected.items():
        assert got[key] == coalesce(rs)  # the one rule, row for row, repeats and replays included
        assert {pair for r in got[key] for pair in r.pairs()} == {pair for r in rs for pair in r.pairs()}
        core, fast = SyncIndex(rs), SyncIndex(got[key])
        for offset in range(0, 75):
            assert fast.translate(offset) == core.translate(offset) and fast.inverse(offset) == core.inverse(offset)


merge_strategy = st.lists(  # (flow, stream, partition, day, upstream, downstream, records, batch id)
    st.tuples(
        st.sampled_from(["A->B", "B->A"]),
        st.sampled_from(["s1", "s2"]),
        st.integers(0, 1),
        st.integers(0, 1),
        st.integers(0, 25),
        st.integers(0, 25),
        st.integers(1, 5),
        st.integers(0, 6),
    ),
    max_size=40,
)


@settings(deadline=None)
@given(rows=merge_strategy, repeats=st.lists(st.integers(0, 39), max_size=4))
def test_merge_rows_is_the_core_rule_per_key(
    rows: list[tuple[str, str, int, int, int, int, int, int]], repeats: list[int]
) -> None:
    """The writer's and maintenance's Arrow merge is drkit.core.offsets.islands per MERGE_KEYS: the same
    ranges, each carrying the greatest batch id and write time of its island and counting its rows."""
    rows = rows + [rows[i] for i in repeats if i < len(rows)]  # a row recorded twice
    table = pa.Table.from_pylist(
        [
            sync(
                flow,
                "orders",
                p,
                (u, u + n - 1),
                (d, d + n - 1),
                batch,
                stream,
                T0 + timedelta(days=day, seconds=batch),
            )
            | {"sync_date": (T0 + timedelta(days=day)).date()}
            for flow, stream, p, day, u, d, n, batch in rows
        ],
        schema=SYNCS_SPEC.schema,
    )
    by_key: dict[tuple[object, ...], list[dict[str, object]]] = {}
    for r in table.to_pylist():
        by_key.setdefault(tuple(r[k] for k in MERGE_KEYS), []).append(r)
    expected = []
    for key, members in by_key.items():
        for island in islands([SyncRange(*(m[c] for c in OFFSETS)) for m in members]):  # type: ignore[arg-type]
            of = [members[i] for i in island.members]
            newest = (max(m["batch_id"] for m in of), max(m["written_at"] for m in of))  # type: ignore[type-var]
            expected.append((key, island.range, island.range.record_count, *newest, len(of)))
    merged, counts = merge_rows_counted(table)
    got = [
        (
            tuple(r[k] for k in MERGE_KEYS),
            SyncRange(*(r[c] for c in OFFSETS)),
            r["record_count"],
            r["batch_id"],
            r["written_at"],
            n,
        )
        for r, n in zip(merged.to_pylist(), counts.to_pylist(), strict=True)
    ]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert merged.schema == SYNCS_SPEC.schema and sum(counts.to_pylist()) == table.num_rows


def test_offset_syncs_ranges_progress_and_increments(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    from drkit.store.delta import SCHEMA_VERSION
    from drkit.store.offset_syncs import SyncTable

    layout = StateLayout(tmp_path)
    syncs = SyncTable(layout)
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
            str(layout.offset_syncs),
            pa.Table.from_pylist(data, schema=SYNCS_SPEC.schema),
            mode="append",
            partition_by=["sync_date"],
        )

    write(0, [("orders", 0, 0, 0, 10), ("orders", 1, 0, 0, 5)])
    DeltaTable(str(layout.offset_syncs)).alter.set_table_properties(
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


def test_sync_history_is_the_rows_of_one_partition_as_written(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    store = SyncTable(layout)
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


# -- coalesced as written -------------------------------------------------------------------------

DAY1 = datetime(2026, 11, 23, 23, 59, 50, tzinfo=UTC)

batch_strategy = st.lists(  # per batch: (stream, partition, upstream skip, downstream skip, records, next day?)
    st.tuples(
        st.sampled_from(["s1", "s2"]),
        st.integers(0, 1),
        st.integers(0, 2),
        st.integers(0, 2),
        st.integers(1, 4),
        st.booleans(),
    ),
    min_size=1,
    max_size=14,
)


def pairs_of(table: SyncTable, flow: str) -> set[tuple[str, int, int, int]]:
    return {(t, p, u, d) for (t, p), rs in table.ranges(flow).items() for r in rs for u, d in r.pairs()}


@settings(deadline=None, max_examples=12)
@given(batches=batch_strategy, every=st.integers(1, 4))
def test_coalescing_as_written_keeps_every_answer(
    tmp_path_factory: pytest.TempPathFactory, batches: list[tuple[str, int, int, int, int, bool]], every: int
) -> None:
    """Written with and without coalescing, the table answers the same: ranges, progress, the translator's
    increments and the batches recorded; coalescing only ever lowers the row count."""
    root = tmp_path_factory.mktemp("syncs")
    merged, raw = SyncTable(StateLayout(root / "m"), compact_every=every), SyncTable(StateLayout(root / "r"), 0)
    nxt: dict[tuple[str, int], tuple[int, int]] = {}
    batch_ids = {"s1": 0, "s2": 0}
    next_day = False
    for stream, partition, skip_u, skip_d, records, later in batches:
        next_day = next_day or later  # batches are written in time order: once the next day, always
        u, d = nxt.get((stream, partition), (0, 0))
        u, d = u + skip_u, d + skip_d
        ranges = range_table([("orders", "A.orders", partition, SyncRange(u, u + records - 1, d, d + records - 1))])
        at = DAY1 + timedelta(seconds=batch_ids[stream] + (20 if next_day else 0))
        for table in (merged, raw):
            assert table.write("A->B", stream, batch_ids[stream], ranges, at=at) == 1
            assert table.write("A->B", stream, batch_ids[stream], ranges, at=at) == 0  # a replay: skipped
        nxt[(stream, partition)] = (u + records, d + records)
        batch_ids[stream] += 1
    raw.write("B->A", "s9", 0, range_table([("orders", "B.orders", 0, SyncRange(0, 9, 0, 9))]), at=DAY1)
    # Replays of another stream overlap: the same pairs may be cut into ranges differently, never translate differently.
    assert pairs_of(merged, "A->B") == pairs_of(raw, "A->B")
    for key, ranges in raw.ranges("A->B").items():
        index, other = SyncIndex(ranges), SyncIndex(merged.ranges("A->B")[key])
        for offset in range(80):
            assert other.translate(offset) == index.translate(offset) and other.inverse(offset) == index.inverse(offset)
    assert merged.progress("A->B") == raw.progress("A->B")
    assert merged.ranges("B->A") == {} and merged.target_topics("A->B") == raw.target_topics("A->B")
    for stream, last in batch_ids.items():
        assert merged.batch_written(stream, last - 1) == (last > 0) and not merged.batch_written(stream, last)
    rows = len(merged.history("A->B", "orders"))
    assert rows <= len(raw.history("A->B", "orders"))
    cached, full = SyncIndexCache(merged, "A->B").indexes(), SyncIndexCache(raw, "A->B").indexes()
    assert set(cached) == set(full)
    for key, index in full.items():
        for offset in range(80):
            assert cached[key].translate(offset) == index.translate(offset)
            assert cached[key].inverse(offset) == index.inverse(offset)


def test_a_day_of_batches_is_a_row_per_gap_and_other_rows_are_left_alone(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    other = SyncTable(layout, compact_every=0)
    other.write("B->A", "s9", 0, range_table([("orders", "B.orders", 0, SyncRange(0, 9, 0, 9))]), at=T0)
    other.write("A->B", "old", 0, range_table([("orders", "A.orders", 0, SyncRange(0, 9, 0, 9))]), at=T0)
    other.write("A->B", "old", 1, range_table([("orders", "A.orders", 0, SyncRange(10, 19, 10, 19))]), at=T0)
    syncs = SyncTable(layout, compact_every=5)
    for b in range(23):  # a downstream gap (transaction markers) after batch 10
        shift = 2 if b > 10 else 0
        ranges = range_table(
            [
                ("orders", "A.orders", p, SyncRange(b * 10, b * 10 + 9, b * 10 + shift, b * 10 + 9 + shift))
                for p in (0, 1)
            ]
        )
        syncs.write("A->B", "s1", b, ranges, at=T0 + timedelta(seconds=b))
    rows = syncs.history("A->B", "orders")
    mine = [r for r in rows if r.stream_id == "s1"]
    # coalesced by batches 0, 5, 10, 15 and 20 into 2 rows per partition (the gap); 21 and 22 as written
    assert len([r for r in mine if r.partition == 0]) == 2 + 2
    first = next(r for r in mine if r.partition == 0)
    assert (first.upstream_first, first.upstream_last, first.batch_id, first.record_count) == (0, 109, 10, 110)
    assert first.written_at == T0 + timedelta(seconds=10)
    assert [(r.batch_id, r.upstream_first) for r in rows if r.stream_id == "old"] == [(0, 0), (1, 10)]
    assert len(syncs.history("B->A", "orders")) == 1
    assert syncs.ranges("A->B")[("orders", 1)] == [SyncRange(0, 109, 0, 109), SyncRange(110, 229, 112, 231)]
