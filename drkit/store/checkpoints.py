"""The ``checkpoints`` Delta table: the append-only history of translated group offsets.

Each row is one (flow, group, source topic, partition) at one time. Only changes are appended,
so the latest state per key is the row with the greatest ``checkpointed_at``. Two ways back in
time: ``as_of`` (a wall-clock time: the latest row per key written at or before it, read from the
history itself, so it survives VACUUM) and ``version`` (Delta time travel to a table version).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from drkit.core.checkpoints import Checkpoint, RecordedCheckpoint
from drkit.core.translate import Position
from drkit.errors import StoreError
from drkit.layout import StateLayout
from drkit.store.tables import CHECKPOINTS_DDL, ensure_table, table_exists

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class CheckpointStore:
    def __init__(self, spark: SparkSession, tables: StateLayout) -> None:
        self.spark = spark
        self.path = tables.checkpoints

    def ensure(self) -> None:
        ensure_table(self.spark, self.path, CHECKPOINTS_DDL, "checkpoints")

    def append(self, rows: list[Checkpoint], at: datetime | None = None) -> int:
        if not rows:
            return 0
        when = at or datetime.now(UTC)
        data = [
            (
                c.flow,
                c.group,
                c.source_topic,
                c.target_topic,
                c.partition,
                c.upstream_offset,
                c.downstream_offset,
                c.position.value,
                c.metadata,
                when,
            )
            for c in rows
        ]
        self.spark.createDataFrame(data, CHECKPOINTS_DDL).write.format("delta").mode("append").save(self.path)
        return len(data)

    def _frame(self, version: int | None) -> DataFrame:
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        try:
            return reader.load(self.path)
        except Exception as exc:  # Delta raises AnalysisException subclasses for a bad version
            if version is not None and "version" in str(exc).lower():
                raise StoreError(f"checkpoints table has no version {version}: {str(exc).splitlines()[0]}") from None
            raise

    def latest(
        self, flow: str, groups: list[str] | None = None, as_of: datetime | None = None, version: int | None = None
    ) -> list[RecordedCheckpoint]:
        """The latest checkpoint per (group, topic, partition) of ``flow``, now or back in time."""
        from pyspark.sql import functions as F

        if not table_exists(self.spark, self.path):
            return []
        df = self._frame(version).where(F.col("flow") == flow)
        if groups is not None:
            df = df.where(F.col("group").isin(groups))
        if as_of is not None:
            df = df.where(F.col("checkpointed_at") <= F.lit(as_of.astimezone(UTC)))
        keys = ["group", "source_topic", "partition"]
        cols = ["target_topic", "upstream_offset", "downstream_offset", "position", "metadata"]
        latest = (
            df.withColumn("_ms", F.expr("unix_millis(checkpointed_at)"))
            .groupBy(*keys)
            .agg(F.max_by(F.struct("_ms", *cols), F.struct("_ms", "upstream_offset")).alias("r"))
            .select(*keys, "r.*")
        )
        out = []
        for row in latest.collect():
            out.append(
                RecordedCheckpoint(
                    Checkpoint(
                        flow,
                        row["group"],
                        row["source_topic"],
                        row["target_topic"],
                        row["partition"],
                        row["upstream_offset"],
                        row["downstream_offset"],
                        Position(row["position"]),
                        row["metadata"],
                    ),
                    row["_ms"],
                )
            )
        return sorted(out, key=lambda r: r.checkpoint.key)

    def history(self, flow: str, group: str) -> list[RecordedCheckpoint]:
        """Every recorded row of one group, oldest first (for notebooks and audits)."""
        from pyspark.sql import functions as F

        if not table_exists(self.spark, self.path):
            return []
        df = self._frame(None).where((F.col("flow") == flow) & (F.col("group") == group))
        rows = df.withColumn("_ms", F.expr("unix_millis(checkpointed_at)")).orderBy("_ms").collect()
        return [
            RecordedCheckpoint(
                Checkpoint(
                    flow,
                    r["group"],
                    r["source_topic"],
                    r["target_topic"],
                    r["partition"],
                    r["upstream_offset"],
                    r["downstream_offset"],
                    Position(r["position"]),
                    r["metadata"],
                ),
                r["_ms"],
            )
            for r in rows
        ]
