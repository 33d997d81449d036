"""The ``operations`` Delta table: the audit trail of every failover and failback, dry runs included.

One row per run: who, where, when, what was asked (flow, groups, as-of), the plan as JSON, and
the result as JSON (applied, refused, verified offsets, or the error).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from drkit.core.audit import Action, OperationRecord
from drkit.layout import StateLayout
from drkit.store.tables import OPERATIONS_DDL, ensure_table, table_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _time(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


class OperationStore:
    def __init__(self, spark: SparkSession, layout: StateLayout) -> None:
        self.spark = spark
        self.path = layout.operations

    def append(self, record: OperationRecord) -> None:
        ensure_table(self.spark, self.path, OPERATIONS_DDL, "operations")
        finished = None if record.finished_at is None else record.finished_at.astimezone(UTC)
        row = (
            record.id,
            record.action.value,
            record.flow,
            list(record.groups),
            record.as_of,
            record.dry_run,
            json.dumps(record.plan, default=str),
            json.dumps(record.result, default=str),
            record.user,
            record.host,
            record.drkit_version,
            record.started_at.astimezone(UTC),
            finished,
        )
        self.spark.createDataFrame([row], OPERATIONS_DDL).write.format("delta").mode("append").save(self.path)

    def list(self, flow: str | None = None, limit: int = 50) -> list[OperationRecord]:
        """The latest ``limit`` operations (of ``flow``), newest first."""
        from pyspark.sql import functions as F

        if not table_exists(self.spark, self.path):
            return []
        df = self.spark.read.format("delta").load(self.path)
        if flow is not None:
            df = df.where(F.col("flow") == flow)
        rows = (
            df.withColumn("started_ms", F.expr("unix_millis(started_at)"))
            .withColumn("finished_ms", F.expr("unix_millis(finished_at)"))
            .orderBy(F.col("started_ms").desc())
            .limit(limit)
            .collect()
        )
        return [
            OperationRecord(
                id=r["id"],
                action=Action(r["action"]),
                flow=r["flow"],
                groups=tuple(r["groups"] or ()),
                as_of=r["as_of"],
                dry_run=r["dry_run"],
                plan=json.loads(r["plan"]) if r["plan"] else {},
                result=json.loads(r["result"]) if r["result"] else {},
                user=r["user"],
                host=r["host"],
                drkit_version=r["drkit_version"],
                started_at=datetime.fromtimestamp(r["started_ms"] / 1000, UTC),
                finished_at=_time(r["finished_ms"]),
            )
            for r in rows
        ]
