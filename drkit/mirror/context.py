"""The collaborators a mirror receives: config, Spark, the clusters, the offset-sync log, its state files.

The facade (``drkit.service``) builds one with the real adapters (``KafkaMirrorClusters``, the Delta
``offset_syncs`` table, the state files of drkit.store.runs, all through the ports of drkit.mirror.ports);
unit tests build one with fakes. Invariant: the mirror builds no cluster client and opens no table itself;
every admin, consumer, table and state file comes from here (drkit.mirror.wiring hands them to the job).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from drkit.config import DrkitConfig, FlowConfig
from drkit.errors import DrkitError
from drkit.kafka import clients
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.tail import TAIL_CONSUMER_SETTINGS
from drkit.layout import StateLayout, flow_dir_name
from drkit.mirror.faults import NO_FAULTS, FaultPlan
from drkit.mirror.lease import LeaseEntries
from drkit.mirror.ports import MirrorStateLog, MirrorSyncLog, SourceEndsLog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE_FETCH_MAX_WAIT_MS = 20
#: The source's isolation level (the config refuses another): Spark's reader and the driver's must agree,
#: or one would stop at the last stable offset where the other reads past it.
SOURCE_ISOLATION = "read_committed"


def reader_group_id(flow: FlowConfig) -> str:
    """The group id of the mirror's source readers (the driver's and the copy tasks'): librdkafka requires
    one; the readers only assign partitions, so the group is never joined and nothing is committed to it."""
    return f"drkit-mirror-reader-{flow_dir_name(flow.name)}"


def tail_group_id(flow: str) -> str:
    """The group id of the exactly-once mirror's read-back consumers on the target (they never commit)."""
    return f"drkit-mirror-readback-{flow_dir_name(flow)}"


def source_consumer_settings() -> dict[str, Any]:
    """The source readers' consumer settings (the driver's and the copy tasks'): they read exactly the
    ranges the driver planned, never commit."""
    return {
        "enable.auto.offset.store": False,
        # Removed records are an error the reader settles: fail the batch, or go on past them when the flow
        # accepts the loss (drkit.core.copying.read_failure_action).
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "isolation.level": SOURCE_ISOLATION,
        "fetch.wait.max.ms": SOURCE_FETCH_MAX_WAIT_MS,
    }


class MirrorClusters(Protocol):
    """The clusters as the mirror uses them: admins, the driver's source consumer, a reachability probe."""

    def admin(self, alias: str) -> KafkaAdmin: ...

    def source_consumer(self, flow: FlowConfig) -> Any: ...

    def target_tail_consumer(self, flow: FlowConfig) -> Any:
        """A read_committed consumer of the flow's target, for reading copies back (exactly-once)."""
        ...

    def reachable(self, alias: str, timeout: float) -> bool: ...

    def lease_entries(self, flow: FlowConfig) -> LeaseEntries:
        """The flow's entries on its target's lease topic (drkit.mirror.lease)."""
        ...


class KafkaMirrorClusters:
    """The configured clusters through confluent-kafka; implements ``MirrorClusters``."""

    def __init__(self, config: DrkitConfig) -> None:
        self._config = config

    def admin(self, alias: str) -> KafkaAdmin:
        return KafkaAdmin(self._config.clusters[alias], alias)

    def source_consumer(self, flow: FlowConfig) -> Any:
        return clients.consumer(
            self._config.clusters[flow.source],
            flow.source,
            reader_group_id(flow),
            **source_consumer_settings(),
        )

    def target_tail_consumer(self, flow: FlowConfig) -> Any:
        return clients.consumer(
            self._config.clusters[flow.target], flow.target, tail_group_id(flow.name), **TAIL_CONSUMER_SETTINGS
        )

    def lease_entries(self, flow: FlowConfig) -> LeaseEntries:
        from drkit.kafka.lease_log import LeaseLog

        return LeaseLog(self._config.clusters[flow.target], flow.target, flow.name)

    def reachable(self, alias: str, timeout: float) -> bool:
        try:
            KafkaAdmin(self._config.clusters[alias], alias, timeout=timeout).partition_counts()
        except DrkitError:
            return False
        return True


@dataclass(frozen=True)
class MirrorContext:
    config: DrkitConfig
    spark: SparkSession
    clusters: MirrorClusters
    syncs: MirrorSyncLog
    layout: StateLayout
    #: the mirror's state per flow (drkit.store.runs.MirrorFiles)
    files: MirrorStateLog
    #: where the source's observed ends are recorded (drkit.store.runs.RunFiles)
    runs: SourceEndsLog
    #: Tests only inject faults (drkit.mirror.faults); a mirror the facade makes has none.
    faults: FaultPlan = NO_FAULTS
