"""Offset-sync maintenance (delta-rs) against a real Delta table: fewer rows, exactly the same translation.

Spark reads the tables back here (the rows as any Delta reader sees them); maintenance itself starts no
JVM, and the last test runs ``drkit maintain`` where none can start.

No Kafka here: the syncs are written with SyncTable.write as the mirror would (without its own
coalescing, to leave work for maintenance), for several batches with gaps on either side, an
empty batch, a second flow, and a replay under a second stream id that overlaps the first stream's
pairs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.processes import no_java_env
from support.sync_writer import Writer, config_for

from drkit.config import DrkitConfig
from drkit.core.offsets import SyncRange
from drkit.core.translate import SyncIndex
from drkit.errors import ConfigError
from drkit.layout import StateLayout
from drkit.store.maintenance import maintain
from drkit.store.offset_syncs import SyncTable

Pair = tuple[str, str, int, int, int]  # flow, source topic, partition, upstream, downstream
KEEP = 3
PARTITIONS = [("orders", "A.orders", 0), ("orders", "A.orders", 1), ("audit", "A.audit", 0)]


def all_rows(spark: Any, tables: StateLayout) -> list[tuple[Any, ...]]:
    df = spark.read.format("delta").load(str(tables.offset_syncs))
    return sorted(tuple(r) for r in df.collect())


def pairs(spark: Any, tables: StateLayout) -> set[Pair]:
    """Every (flow, topic, partition, upstream, downstream) pair the rows stand for."""
    out: set[Pair] = set()
    for r in spark.read.format("delta").load(str(tables.offset_syncs)).collect():
        assert r.upstream_last - r.upstream_first == r.downstream_last - r.downstream_first
        assert r.record_count == r.upstream_last - r.upstream_first + 1
        for i in range(r.record_count):
            out.add((r.flow, r.source_topic, r.partition, r.upstream_first + i, r.downstream_first + i))
    return out


def translations(ranges: dict[tuple[str, int], list[SyncRange]]) -> dict[tuple[str, int], list[Any]]:
    """Every committed offset of each partition translated both ways: what failover would use."""
    out = {}
    for key, rs in ranges.items():
        index = SyncIndex(rs)
        top = max(max(r.upstream_last, r.downstream_last) for r in rs) + 2
        out[key] = [(index.translate(c), index.inverse(c)) for c in range(top)]
    return out


def data_commits_since(spark: Any, tables: StateLayout, version: int) -> list[str]:
    """Operations after ``version`` that changed rows (OPTIMIZE and VACUUM do not)."""
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, str(tables.offset_syncs)).history().where(f"version > {version}")
    quiet = ("OPTIMIZE", "VACUUM START", "VACUUM END")
    return [r.operation for r in history.collect() if r.operation not in quiet]


def table_version(spark: Any, tables: StateLayout) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, str(tables.offset_syncs)).history(1).first()[0])  # type: ignore[index]


def write_history(store: SyncTable, now: datetime) -> None:
    # Flow A->B, stream s1: batches 0..13, batch 9 empty (no row, no commit).
    s1 = Writer(store, "A->B", "s1", now=now)
    for b in range(14):
        if b == 9:
            continue
        parts = [p for p in PARTITIONS if not (b == 8 and p[0] == "audit")]  # audit idle in batch 8
        s1.batch(
            b,
            parts,
            skip_upstream={("orders", 0): 1} if b == 4 else None,  # compaction: an upstream gap
            skip_downstream={("orders", 1): 2} if b == 6 else None,  # target transaction markers
            split={("audit", 0)} if b == 2 else None,
        )  # a gap inside a batch
    # Flow A->B, stream s2: the checkpoint was deleted; the replay starts again at upstream 20 of
    # orders, landing after what s1 wrote (overlapping pairs: the same upstream offsets twice).
    s2 = Writer(store, "A->B", "s2", {("orders", p): (20, s1.next[("orders", p)][1] + 10) for p in (0, 1)}, now=now)
    for b in range(6):
        s2.batch(b, PARTITIONS[:2])
    # Flow B->A (same topic name and partition as A->B): never merged with A->B. Batches 0-2 were
    # written yesterday, 3-7 today: today's partition is never rewritten, even below the cutoff.
    s3 = Writer(store, "B->A", "s3", now=now)
    for b in range(8):
        s3.batch(b, [("orders", "B.orders", 0)], records=3, today=b >= 3)


@pytest.fixture
def now() -> datetime:
    """The test's present, read once: its batches' days and maintenance's today agree across midnight."""
    return datetime.now(UTC)


@pytest.fixture
def state(spark: Any, tmp_path: Path) -> tuple[DrkitConfig, StateLayout, SyncTable]:
    config = config_for(tmp_path)
    tables = StateLayout(config.state_root())
    store = SyncTable(tables, compact_every=0)
    store.ensure()
    return config, tables, store


def test_maintain_keeps_translation_and_recent_batches(
    spark: Any, state: tuple[DrkitConfig, StateLayout, SyncTable], now: datetime
) -> None:
    config, tables, store = state
    write_history(store, now)
    rows_before = all_rows(spark, tables)
    pairs_before = pairs(spark, tables)
    ranges_before = store.ranges("A->B")
    recent = {("s1", b) for b in (11, 12, 13)} | {("s2", b) for b in (3, 4, 5)} | {("s3", b) for b in (5, 6, 7)}
    recent_rows = [r for r in rows_before if (r[10], r[9]) in recent]

    result = maintain(tables, config, keep_recent_batches=KEEP, today=now.date()).as_dict()

    rows_after = all_rows(spark, tables)
    assert pairs(spark, tables) == pairs_before
    assert translations(store.ranges("A->B")) == translations(ranges_before)
    assert len(rows_after) < len(rows_before)
    # the kept batches' rows are untouched, byte for byte (written_at included)
    assert [r for r in rows_after if (r[10], r[9]) in recent] == recent_rows
    for stream_id, batch_id in recent:
        assert store.batch_written(stream_id, batch_id)
    # per stream, the old rows of a partition became one row per gap
    old_s1 = sorted((r[1], r[3], r[4], r[5], r[6], r[7]) for r in rows_after if r[10] == "s1" and r[9] <= 10)
    assert old_s1 == [
        ("audit", 0, 0, 11, 0, 11),  # batches 0, 1 and the first range of batch 2
        ("audit", 0, 13, 45, 12, 44),  # batch 2 missed upstream 12; 3..10 (8 idle, 9 empty) continue
        ("orders", 0, 0, 19, 0, 19),
        ("orders", 0, 21, 50, 20, 49),  # upstream 20 compacted away before batch 4
        ("orders", 1, 0, 29, 0, 29),
        ("orders", 1, 30, 49, 32, 51),  # downstream 30, 31: target transaction markers
    ]
    batch_of = {(r[1], r[3], r[4]): r[9] for r in rows_after if r[10] == "s1" and r[9] <= 10}
    assert batch_of[("orders", 0, 0)] == 3  # a merged row carries the greatest batch id it holds
    assert batch_of[("orders", 0, 21)] == 10
    # s3: yesterday's batches 0-2 became one row; today's 3 and 4 are below the cutoff but untouched
    assert sorted((r[10], r[9]) for r in rows_after if r[10] == "s3") == [("s3", b) for b in (2, 3, 4, 5, 6, 7)]
    assert [r for r in rows_after if r[10] == "s3" and r[9] in (3, 4)] == [
        r for r in rows_before if r[10] == "s3" and r[9] in (3, 4)
    ]

    syncs = result["offset_syncs"]
    coalesce = syncs["coalesce"]
    assert syncs["rows_before"] == len(rows_before) and syncs["rows_after"] == len(rows_after)
    assert coalesce["streams"] == 3 and coalesce["streams_rewritten"] == 3
    assert coalesce["cutoffs"] == {"A->B/s1": 10, "A->B/s2": 2, "B->A/s3": 4}
    assert coalesce["before_date"] == now.date().isoformat() and coalesce["attempts"] == 1
    assert coalesce["ranges_merged"] - coalesce["merged_into"] == len(rows_before) - len(rows_after)
    assert syncs["vacuumed"] and syncs["files_after"] <= syncs["files_before"]
    assert result["checkpoints"]["rows_before"] is None  # no checkpoints table: skipped

    # A second run has nothing to merge: no row changes, no data commit.
    version = table_version(spark, tables)
    again = maintain(tables, config, keep_recent_batches=KEEP, today=now.date()).as_dict()
    assert again["offset_syncs"]["coalesce"]["ranges_merged"] == 0
    assert again["offset_syncs"]["coalesce"]["streams_rewritten"] == 0
    assert all_rows(spark, tables) == rows_after
    assert data_commits_since(spark, tables, version) == []


def test_retention_below_168_hours_is_refused(
    spark: Any, state: tuple[DrkitConfig, StateLayout, SyncTable], now: datetime
) -> None:
    config, tables, store = state
    write_history(store, now)
    version, rows = table_version(spark, tables), all_rows(spark, tables)
    with pytest.raises(ConfigError, match="168"):
        maintain(tables, config, keep_recent_batches=KEEP, vacuum_retention_hours=24)
    with pytest.raises(ConfigError, match="keep_recent_batches"):
        maintain(tables, config, keep_recent_batches=0)
    assert table_version(spark, tables) == version  # refused before anything was done
    assert all_rows(spark, tables) == rows


def test_mirror_appending_during_maintenance_is_not_disturbed(
    spark: Any, state: tuple[DrkitConfig, StateLayout, SyncTable], now: datetime
) -> None:
    config, tables, store = state
    s1 = Writer(store, "A->B", "s1", now=now)
    for b in range(12):
        s1.batch(b, PARTITIONS)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            maintain(tables, config, keep_recent_batches=KEEP, today=now.date())
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    appended = 0
    while thread.is_alive() or appended < 3:  # keep appending (today) for as long as maintenance runs
        s1.batch(12 + appended, PARTITIONS, today=True)
        appended += 1
        time.sleep(0.2)  # a mirror's pace: a commit takes milliseconds, a batch a second
    thread.join()
    assert errors == []
    expected = set()
    for (topic, partition), (u_next, _) in s1.next.items():
        expected |= {("A->B", topic, partition, u, u) for u in range(u_next)}
    assert pairs(spark, tables) == expected
    for b in range(12, 12 + appended):
        assert store.batch_written("s1", b)
    assert len(all_rows(spark, tables)) < (12 + appended) * len(PARTITIONS)


def test_incremental_sync_cache_matches_full_reads(
    spark: Any, state: tuple[DrkitConfig, StateLayout, SyncTable], now: datetime
) -> None:
    """The checkpoint translator's cache reads only new rows; it must always equal a full read."""
    from drkit.store.offset_syncs import SyncIndexCache

    config, tables, store = state
    cache = SyncIndexCache(store, "A->B")
    assert cache.indexes() == {}

    def check() -> None:
        full = store.ranges("A->B")
        cached = cache.indexes()
        assert set(cached) == set(full)
        for key, ranges in full.items():
            top = max(max(r.upstream_last, r.downstream_last) for r in ranges) + 2
            expected = SyncIndex(ranges)
            for c in range(top):
                assert cached[key].translate(c) == expected.translate(c), (key, c)
                assert cached[key].inverse(c) == expected.inverse(c), (key, c)

    s1 = Writer(store, "A->B", "s1", now=now)
    for b in range(6):
        s1.batch(b, PARTITIONS, skip_downstream={("orders", 1): 1} if b == 2 else None)
    check()
    for b in range(6, 12):  # batches the cache has not seen, some after a gap
        s1.batch(b, PARTITIONS, skip_upstream={("orders", 0): 2} if b == 7 else None)
    maintain(tables, config, keep_recent_batches=KEEP, today=now.date())  # merges seen and unseen rows together
    check()
    s2 = Writer(store, "A->B", "s2", {("orders", 0): (5, 500)}, now=now)  # a replay: a new stream, overlapping pairs
    for b in range(3):
        s2.batch(b, PARTITIONS[:1], today=True)
    Writer(store, "B->A", "s3", now=now).batch(0, [("orders", "B.orders", 0)], today=True)  # another flow: not included
    check()
    assert cache.indexes()[("orders", 0)].translate(5).offset == 5  # the earliest copy of upstream 5


#: The JVM bridge and Spark's Delta: ``drkit maintain`` imports none of them.
JVM_PACKAGES = ("pyspark", "py4j", "delta")
#: ``drkit`` as an operator runs it, saying at exit which of JVM_PACKAGES the process imported.
CLI_REPORTING_JVM = (
    "import atexit, sys\n"
    f"held = lambda: ' '.join(m for m in {JVM_PACKAGES!r} if m in sys.modules)\n"
    "atexit.register(lambda: sys.stderr.write('\\njvm packages: ' + held() + '\\n'))\n"
    "from drkit.cli.app import main\n"
    "main()\n"
)


def test_maintain_runs_where_no_jvm_can_start(tmp_path: Path, now: datetime) -> None:
    """``drkit maintain`` as an operator runs it, where no java can start: same answers, fewer rows."""
    config = config_for(tmp_path)
    tables = StateLayout(config.state_root())
    store = SyncTable(tables, compact_every=0)
    write_history(store, now)
    before = {flow: translations(store.ranges(flow)) for flow in ("A->B", "B->A")}
    rows_before = len(store.history("A->B", "orders")) + len(store.history("A->B", "audit"))
    toml = tmp_path / "operator.toml"
    toml.write_text(
        f"[state]\nroot = {json.dumps(str(config.state_root()))}\n"
        '[clusters.A]\nbootstrap_servers = "127.0.0.1:1"\n[clusters.B]\nbootstrap_servers = "127.0.0.1:2"\n'
        '[[flows]]\nsource = "A"\ntarget = "B"\n'
    )
    cli_config = ["-c", str(toml), "-o", "json"]
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", CLI_REPORTING_JVM, "maintain", "--keep-recent-batches", str(KEEP), *cli_config],
        capture_output=True,
        text=True,
        timeout=300,
        env=no_java_env(),
    )
    seconds = time.monotonic() - started
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    report = json.loads(proc.stdout)
    held = next(line for line in proc.stderr.splitlines() if line.startswith("jvm packages:"))
    assert held.removeprefix("jvm packages:").split() == []
    syncs = report["offset_syncs"]
    assert syncs["rows_after"] < syncs["rows_before"] and syncs["vacuumed"]
    assert syncs["coalesce"]["streams_rewritten"] == 3
    assert {flow: translations(store.ranges(flow)) for flow in ("A->B", "B->A")} == before
    assert len(store.history("A->B", "orders")) + len(store.history("A->B", "audit")) < rows_before
    print(
        f"drkit maintain without a JVM: {seconds:.2f} s (process), {syncs['rows_before']} -> {syncs['rows_after']} rows"
    )
