"""Where the Delta tables live, their schemas, and the schema-version guard.

Every table carries the table property ``drkit.schema.version``; drkit refuses to run against a
table of another version with a message that says what to do, instead of writing rows of the
wrong shape into it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from drkit.errors import StoreError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA_VERSION = "1"

OFFSET_SYNCS_DDL = (
    "flow STRING NOT NULL, source_topic STRING NOT NULL, target_topic STRING NOT NULL, "
    "partition INT NOT NULL, upstream_first BIGINT NOT NULL, upstream_last BIGINT NOT NULL, "
    "downstream_first BIGINT NOT NULL, downstream_last BIGINT NOT NULL, record_count BIGINT NOT NULL, "
    "batch_id BIGINT NOT NULL, stream_id STRING NOT NULL, written_at TIMESTAMP NOT NULL, sync_date DATE NOT NULL"
)
#: ``offset_syncs`` is partitioned by the UTC date of ``written_at``. Why: open-source Delta commits every
#: data change at Serializable isolation and checks a concurrent append against a rewrite's *partition*
#: predicates only; without a partition column, maintenance's rewrite of old rows would conflict with every
#: append of a running mirror. With it, maintenance rewrites completed days while the mirror appends to today.
OFFSET_SYNCS_PARTITIONS = ("sync_date",)

CHECKPOINTS_DDL = (
    "flow STRING NOT NULL, `group` STRING NOT NULL, source_topic STRING NOT NULL, target_topic STRING NOT NULL, "
    "partition INT NOT NULL, upstream_offset BIGINT NOT NULL, downstream_offset BIGINT, "
    "position STRING NOT NULL, metadata STRING, checkpointed_at TIMESTAMP NOT NULL"
)

OPERATIONS_DDL = (
    "id STRING NOT NULL, action STRING NOT NULL, flow STRING NOT NULL, groups ARRAY<STRING>, as_of STRING, "
    "dry_run BOOLEAN NOT NULL, plan STRING, result STRING, user STRING, host STRING, drkit_version STRING, "
    "started_at TIMESTAMP NOT NULL, finished_at TIMESTAMP"
)


@dataclass(frozen=True)
class Tables:
    """The table paths under a state root."""

    root: Path

    @property
    def offset_syncs(self) -> str:
        return str(self.root / "delta" / "offset_syncs")

    @property
    def checkpoints(self) -> str:
        return str(self.root / "delta" / "checkpoints")

    @property
    def operations(self) -> str:
        return str(self.root / "delta" / "operations")


def ensure_table(spark: SparkSession, path: str, ddl: str, name: str, partitioned_by: tuple[str, ...] = ()) -> None:
    """Create the Delta table at ``path`` if missing; check its schema version if present."""
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, path):
        check_version(spark, path, name)
        return
    (
        DeltaTable.createIfNotExists(spark)
        .location(path)
        .addColumns(spark.createDataFrame([], ddl).schema)
        .partitionedBy(*partitioned_by)
        .property("drkit.schema.version", SCHEMA_VERSION)
        .property("delta.appendOnly", "false")
        .execute()
    )


def check_version(spark: SparkSession, path: str, name: str) -> None:
    rows = spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
    props = {r["key"]: r["value"] for r in rows}
    found = props.get("drkit.schema.version")
    if found != SCHEMA_VERSION:
        raise StoreError(
            f"Delta table {name} at {path} has schema version {found or 'none'}, this drkit needs "
            f"{SCHEMA_VERSION}: point [state] root at a new folder, or migrate the table"
        )


def table_exists(spark: SparkSession, path: str) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, path))
