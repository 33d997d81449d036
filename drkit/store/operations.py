"""The ``operations`` Delta table: the audit trail of every failover and failback, dry runs included.

One row per run: who, where, when, what was asked (flow, groups, as-of), the plan as JSON, and
the result as JSON (applied, refused, verified offsets, or the error).
"""

from __future__ import annotations

import getpass
import json
import socket
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from drkit import __version__
from drkit.store.tables import OPERATIONS_DDL, Tables, ensure_table, table_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Operation:
    action: str
    flow: str
    groups: list[str]
    as_of: str | None
    dry_run: bool
    plan: dict[str, Any]
    result: dict[str, Any]
    started_at: datetime
    finished_at: datetime
    id: str = ""

    def __post_init__(self) -> None:
        self.id = self.id or uuid.uuid4().hex


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


class OperationStore:
    def __init__(self, spark: SparkSession, tables: Tables) -> None:
        self.spark = spark
        self.path = tables.operations

    def append(self, op: Operation) -> None:
        ensure_table(self.spark, self.path, OPERATIONS_DDL, "operations")
        row = (op.id, op.action, op.flow, op.groups, op.as_of, op.dry_run, json.dumps(op.plan, default=str),
               json.dumps(op.result, default=str), _user(), socket.gethostname(), __version__,
               op.started_at.astimezone(UTC), op.finished_at.astimezone(UTC))
        self.spark.createDataFrame([row], OPERATIONS_DDL).write.format("delta").mode("append").save(self.path)

    def list(self, flow: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        if not table_exists(self.spark, self.path):
            return []
        df = self.spark.read.format("delta").load(self.path)
        if flow is not None:
            df = df.where(F.col("flow") == flow)
        rows = (df.withColumn("started_ms", F.expr("unix_millis(started_at)"))
                .withColumn("finished_ms", F.expr("unix_millis(finished_at)"))
                .orderBy(F.col("started_ms").desc()).limit(limit).collect())
        out = []
        for r in rows:
            out.append({
                "id": r["id"], "action": r["action"], "flow": r["flow"], "groups": list(r["groups"] or []),
                "as_of": r["as_of"], "dry_run": r["dry_run"], "user": r["user"], "host": r["host"],
                "drkit_version": r["drkit_version"],
                "started_at": datetime.fromtimestamp(r["started_ms"] / 1000, UTC).isoformat(),
                "finished_at": datetime.fromtimestamp(r["finished_ms"] / 1000, UTC).isoformat()
                if r["finished_ms"] is not None else None,
                "plan": json.loads(r["plan"]) if r["plan"] else None,
                "result": json.loads(r["result"]) if r["result"] else None,
            })
        return out
