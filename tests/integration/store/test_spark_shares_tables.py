"""delta-rs (every product path, ``drkit maintain`` included) and Spark (foreign readers) share the tables.

Spark reads what delta-rs wrote, row for row and at every version; delta-rs reads what Spark wrote;
and after ``drkit maintain`` (coalescing, OPTIMIZE, VACUUM on delta-rs) the readers answer as before,
Spark reads the rewrite at every version, and delta-rs appends on top of it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from support.sync_writer import Writer, config_for

from drkit.core.audit import Action, OperationRecord
from drkit.core.checkpoints import Checkpoint
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.store.checkpoints import SPEC as CHECKPOINTS
from drkit.store.checkpoints import CheckpointTable
from drkit.store.delta import spark_ddl
from drkit.store.maintenance import maintain
from drkit.store.offset_syncs import SyncTable
from drkit.store.operations import OperationTable

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


def spark_rows(spark: Any, path: str, version: int | None = None) -> list[tuple[Any, ...]]:
    """Every row as Spark reads it; timestamps as epoch microseconds (Spark's are session-local)."""
    from pyspark.sql import functions as F

    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(path)
    cols = [
        F.unix_micros(F.col(f"`{f.name}`")) if f.dataType.typeName() == "timestamp" else F.col(f"`{f.name}`")
        for f in df.schema
    ]
    return sorted(tuple(tuple(v) if isinstance(v, list) else v for v in r) for r in df.select(*cols).collect())


def rs_rows(path: str, version: int | None = None) -> list[tuple[Any, ...]]:
    """Every row as delta-rs reads it, in Spark's column order, timestamps as epoch microseconds."""
    table = (DeltaTable(path, version=version) if version is not None else DeltaTable(path)).to_pyarrow_table()
    columns = []
    for name in table.column_names:
        column = table.column(name)
        columns.append(column.cast(pa.int64()) if pa.types.is_timestamp(column.type) else column)
    rows = pa.table(columns, names=table.column_names).to_pylist()
    return sorted(tuple(tuple(v) if isinstance(v, list) else v for v in r.values()) for r in rows)


def spark_columns(spark: Any, path: str) -> list[str]:
    return list(spark.read.format("delta").load(path).columns)


def same_everywhere(spark: Any, path: str) -> None:
    """Spark and delta-rs read the same rows at every version of the table."""
    assert spark_columns(spark, path) == DeltaTable(path).schema().to_arrow().names
    for v in range(DeltaTable(path).version() + 1):
        assert spark_rows(spark, path, v) == rs_rows(path, v), f"{path} differs at version {v}"


def test_spark_reads_what_delta_rs_wrote_and_maintenance_keeps_every_answer(spark: Any, tmp_path: Path) -> None:
    config = config_for(tmp_path)
    layout = StateLayout(config.state_root())
    syncs = SyncTable(layout, compact_every=3)
    now = datetime.now(UTC)  # read once: the batches' days and maintenance's today agree across midnight
    # Offset-syncs as the mirror writes them (coalescing every 3 batches): yesterday's and today's, with gaps.
    writer = Writer(syncs, "A->B", "stream-1", now=now)
    for b in range(8):
        writer.batch(
            b,
            PARTS,
            skip_upstream={("orders", 0): 2} if b == 3 else None,
            split={("audit", 0)} if b == 5 else None,
            today=b >= 6,
        )
    Writer(syncs, "B->A", "stream-2", now=now).batch(0, [("orders", "B.orders", 0)])
    same_everywhere(spark, str(layout.offset_syncs))

    checkpoints = CheckpointTable(layout)
    # Two appends a second either side of ``between`` (their times given: no sleeping for the clock to move).
    between = now - timedelta(seconds=10)
    checkpoints.append([checkpoint("g1", 0, 10), checkpoint("g1", 1, 20)], at=between - timedelta(seconds=1))
    checkpoints.append([checkpoint("g1", 0, 30), checkpoint("g2", 0, 5)], at=between + timedelta(seconds=1))
    same_everywhere(spark, str(layout.checkpoints))

    operations = OperationTable(layout)
    operations.append(record(1))
    operations.append(record(2))
    operations.append(record(3, "B->A"))
    same_everywhere(spark, str(layout.operations))
    assert [o.id for o in operations.list()] == ["op3", "op2", "op1"]

    # A row Spark appends (a foreign writer, e.g. scripts/bench/translate.py's fill) reads the same in delta-rs.
    spark.createDataFrame(
        [("A->B", "g3", "orders", "A.orders", 0, 7, 7, "mirrored", None, datetime.now(UTC))],
        spark_ddl(CHECKPOINTS.schema),
    ).write.format("delta").mode("append").save(str(layout.checkpoints))
    assert ("g3", 7) in {(r.checkpoint.group, r.checkpoint.upstream_offset) for r in checkpoints.latest("A->B")}
    same_everywhere(spark, str(layout.checkpoints))

    # Maintenance (delta-rs): coalescing, OPTIMIZE, VACUUM; every answer stays, Spark reads it, appends follow.
    ranges, progress = syncs.ranges("A->B"), syncs.progress("A->B")
    latest, then = checkpoints.latest("A->B"), checkpoints.latest("A->B", as_of=between)
    figures = maintain(layout, config, keep_recent_batches=1, today=now.date())
    assert figures.coalesce.ranges_merged > 0
    assert syncs.ranges("A->B") == ranges and syncs.progress("A->B") == progress
    assert checkpoints.latest("A->B") == latest and checkpoints.latest("A->B", as_of=between) == then
    same_everywhere(spark, str(layout.offset_syncs))  # Spark reads maintenance's rewrite at every version
    same_everywhere(spark, str(layout.checkpoints))
    checkpoints.append([checkpoint("g2", 0, 6)])  # delta-rs appends after OPTIMIZE
    assert ("g2", 6) in {(r.checkpoint.group, r.checkpoint.upstream_offset) for r in checkpoints.latest("A->B")}
    same_everywhere(spark, str(layout.checkpoints))
    writer.batch(8, PARTS, today=True)  # and the mirror's next batch on top of the rewrite
    same_everywhere(spark, str(layout.offset_syncs))
