"""The mirror's streaming query as Spark sees it: its name, and its Kafka source (which only plans).

Invariant: Spark's Kafka source plans the batches (their offsets in the offset log) and its DataFrame is
never read: drkit copies the planned ranges itself (drkit.mirror.copy_path). Its options follow the flow's
config, never weakening what drkit decides itself (data loss, isolation).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from drkit.config import ClusterConfig, FlowConfig
from drkit.core.selection import NameSelector
from drkit.kafka import clients
from drkit.layout import StatePath, flow_dir_name
from drkit.mirror.context import SOURCE_FETCH_MAX_WAIT_MS, SOURCE_ISOLATION

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Spark's Kafka source retries a failed read of the source's offsets (the planning of a batch) this many
#: times, this far apart, each attempt bounded by the client's ``default.api.timeout.ms``: a continuous
#: mirror waits out a source outage of any length there too, instead of failing its query.
PLANNING_RETRIES = 2**31 - 1
PLANNING_RETRY_INTERVAL_MS = 10_000


def query_name(flow: str, stream_checkpoint: StatePath | Path) -> str:
    """The streaming query's name: the flow, and a digest of its checkpoint (so of its state root).

    Spark refuses a second active query of one name in a session, and a query stopped while its source
    is down stays registered until Spark's Kafka source has closed its admin client, which waits on the
    dead broker (``Admin.close()`` without a timeout): minutes. The same flow under another state root is
    another mirror and must be able to start meanwhile."""
    remote = isinstance(stream_checkpoint, StatePath) and stream_checkpoint.remote
    where = str(stream_checkpoint) if remote else str(Path(stream_checkpoint).absolute())
    digest = hashlib.sha256(where.encode()).hexdigest()[:8]
    return f"drkit-mirror-{flow_dir_name(flow)}-{digest}"


def registration_refusal(flow: str, source: str, name: str, registered: Iterable[tuple[str, bool]]) -> str | None:
    """Why a mirror cannot start while a query of its name is in the Spark session (``registered``: each
    query's name and whether it is active), or None. Spark would refuse it too, naming neither cause."""
    for other, active in registered:
        if other != name:
            continue
        if active:
            return f"flow {flow}: its mirror is already running in this Spark session; stop it before starting another"
        return (
            f"flow {flow}: its previous mirror was stopped but Spark has not released it yet (its Kafka client "
            f"still waits on source cluster {source}); start it from a new process, or wait and retry"
        )
    return None


def source_stream(
    spark: SparkSession, flow: FlowConfig, source: ClusterConfig, selector: NameSelector, once: bool = False
) -> DataFrame:
    """The query's Kafka source: it plans the batches (their offsets), its records are never read."""
    m = flow.mirror
    reader = (
        spark.readStream.format("kafka")
        .options(**clients.java_client_options(source))
        .option("subscribePattern", selector.pattern)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        # Spark's own data-loss check would stop every topic of the flow when one topic is deleted, and
        # copy a re-created topic from the old incarnation's offsets: drkit decides (drkit.core.batch).
        .option("failOnDataLoss", "false")
        .option("kafka.isolation.level", SOURCE_ISOLATION)
        # A batch reads up to ends planned beforehand; where a partition's range ends at its last
        # record, Spark's consumer still polls once more and the broker holds that fetch for
        # fetch.max.wait.ms (500 ms) before answering empty: per partition, so 3 s per batch on a
        # 12-partition topic whenever its producers pause. Configurable ([flows.mirror] consumer).
        .option("kafka.fetch.max.wait.ms", str(SOURCE_FETCH_MAX_WAIT_MS))
    )
    if m.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(m.max_offsets_per_trigger))
    if not once:  # drkit.core.outage: a continuous mirror waits for its source, a one-shot run stops
        reader = reader.option("fetchOffset.numRetries", str(PLANNING_RETRIES)).option(
            "fetchOffset.retryIntervalMs", str(PLANNING_RETRY_INTERVAL_MS)
        )
    for key, value in m.consumer.items():
        reader = reader.option(f"kafka.{key}", value)
    return reader.load().selectExpr(
        "topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "headers"
    )


def open_checkpoint_store(spark: SparkSession, checkpoint: StatePath) -> None:
    """Open the Hadoop file system Spark will write ``checkpoint`` with (S3A's client and thread pools take
    seconds to start): a standby does it while it waits, so a takeover does not."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(str(checkpoint.parent))  # type: ignore[union-attr]
    path.getFileSystem(conf).exists(path)
