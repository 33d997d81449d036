"""The Delta tables' schemas, and the schema-version guard.

Every table carries the table property ``drkit.schema.version``; drkit refuses to run against a
table of another version with a message that says what to do, instead of writing rows of the
wrong shape into it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from drkit.errors import StoreError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

SCHEMA_VERSION = "1"

#: A column as (name, Spark SQL type).
ColumnSpec = tuple[str, str]

#: The columns of one offset-sync range, in table order: declared once, for the rows a mirror task
#: returns (drkit.mirror.deliver) and for the middle of an ``offset_syncs`` row.
RANGE_COLUMNS: tuple[ColumnSpec, ...] = (
    ("source_topic", "STRING"),
    ("target_topic", "STRING"),
    ("partition", "INT"),
    ("upstream_first", "BIGINT"),
    ("upstream_last", "BIGINT"),
    ("downstream_first", "BIGINT"),
    ("downstream_last", "BIGINT"),
    ("record_count", "BIGINT"),
)
OFFSET_SYNCS_COLUMNS: tuple[ColumnSpec, ...] = (
    ("flow", "STRING"),
    *RANGE_COLUMNS,
    ("batch_id", "BIGINT"),
    ("stream_id", "STRING"),
    ("written_at", "TIMESTAMP"),
    ("sync_date", "DATE"),
)


def column_names(columns: tuple[ColumnSpec, ...]) -> list[str]:
    return [name for name, _ in columns]


def ddl(columns: tuple[ColumnSpec, ...], not_null: bool = True) -> str:
    """A Spark DDL schema string: ``name TYPE NOT NULL, ...`` (without ``NOT NULL`` if not ``not_null``)."""
    suffix = " NOT NULL" if not_null else ""
    return ", ".join(f"{name} {kind}{suffix}" for name, kind in columns)


def arrow_schema(ddl: str) -> pa.Schema:
    """The pyarrow schema of a DDL string of this module: one declaration serves Spark, the Arrow batches
    of the mirror's tasks and the delta-rs readers and writers (``NOT NULL`` maps to non-nullable)."""
    import pyarrow as pa

    types = {
        "STRING": pa.string(),
        "INT": pa.int32(),
        "BIGINT": pa.int64(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMP": pa.timestamp("us", tz="UTC"),
        "DATE": pa.date32(),
        "ARRAY<STRING>": pa.list_(pa.string()),
    }
    fields = []
    for column in (c.strip() for c in ddl.split(",")):
        m = re.fullmatch(r"`?(\w+)`?\s+([A-Z<>]+)(\s+NOT NULL)?", column)
        if m is None:
            raise ValueError(f"cannot map column {column!r} to pyarrow")
        fields.append(pa.field(m.group(1), types[m.group(2)], nullable=m.group(3) is None))
    return pa.schema(fields)


OFFSET_SYNCS_DDL = ddl(OFFSET_SYNCS_COLUMNS)
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


DRILLS_DDL = (
    "id STRING NOT NULL, name STRING NOT NULL, flow STRING NOT NULL, disaster STRING NOT NULL, "
    "verdict STRING NOT NULL, reasons ARRAY<STRING>, acked BIGINT NOT NULL, lost BIGINT NOT NULL, "
    "redelivered BIGINT NOT NULL, rpo_records BIGINT NOT NULL, rpo_ms BIGINT NOT NULL, rto_ms BIGINT, "
    "report STRING NOT NULL, spec STRING NOT NULL, drkit_version STRING NOT NULL, "
    "started_at TIMESTAMP NOT NULL, finished_at TIMESTAMP NOT NULL"
)


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
