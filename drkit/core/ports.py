"""The ports the operations talk through: cluster admin, offset-sync, checkpoint and audit stores.

Adapters implement them at the edges (confluent-kafka in ``drkit.kafka``, Delta in ``drkit.store``);
unit tests implement them in memory (``tests/support/fakes.py``). Every cluster port carries its
alias, and every broker error it raises is a ``ClusterError`` naming that cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from drkit.core.acls import TopicAcl
from drkit.core.audit import OperationRecord
from drkit.core.checkpoints import Checkpoint, CommittedOffset, RecordedCheckpoint
from drkit.core.groups import GroupState
from drkit.core.heartbeat import HeartbeatCopy
from drkit.core.mirror_lease import LeaseEntry
from drkit.core.offsets import SyncRange
from drkit.core.origin import TargetTail
from drkit.core.reach import Reach

#: (topic, partition)
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class SyncProgress:
    """What the mirror had done for one source partition when it last recorded offset-syncs."""

    last_upstream: int  # the greatest upstream offset mirrored
    last_downstream: int  # where it landed
    synced_at_ms: int | None  # epoch ms of the last sync row written

    @property
    def next_upstream(self) -> int:
        return self.last_upstream + 1


class ClusterAdmin(Protocol):
    """One Kafka cluster, by alias. Every method raises ``ClusterError`` naming the cluster."""

    @property
    def alias(self) -> str: ...

    def partition_counts(self) -> dict[str, int]: ...

    def end_offsets(self, partitions: Mapping[str, int]) -> dict[TopicPartition, int]:
        """read_committed end offsets of every partition of ``partitions`` (topic -> count)."""
        ...

    def start_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Log start offset of each partition; partitions the cluster does not have are left out."""
        ...

    def first_timestamps(self, positions: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Timestamp (ms) of the first record at or after each position, where one exists."""
        ...

    def read_tail(self, topic: str, partition: int, start: int, end: int, origin_alias: str) -> TargetTail:
        """The records of ``topic/partition`` in ``[start, end)`` with their origins on ``origin_alias``
        (drkit.core.origin); the result's ``end`` says where reading stopped."""
        ...

    def newest_heartbeat(self, topic: str, key: bytes) -> HeartbeatCopy | None:
        """The newest heartbeat with ``key`` in ``topic`` (drkit.core.heartbeat); None when there is none."""
        ...

    def lease_entries(self, flow: str) -> list[LeaseEntry] | None:
        """Every entry of ``flow`` on the cluster's mirror lease topic (drkit.core.mirror_lease); None when the
        topic does not exist."""
        ...

    def live_checkpoint_values(self, flow: str) -> dict[str, bytes] | None:
        """Per group of ``flow``, the newest value on the cluster's checkpoint topic (drkit.core.live_checkpoints);
        None when the topic does not exist (no follower ever wrote to this cluster)."""
        ...

    def fence_transactions(self, transactional_ids: Iterable[str]) -> None:
        """Initialise a producer of each transactional id: every older producer of it is fenced and its open
        transaction aborted (an exactly-once mirror's: drkit.core.exactly_once)."""
        ...

    def list_groups(self) -> list[str]: ...

    def committed_offsets(self, group: str) -> list[CommittedOffset]: ...

    def committed_offsets_many(self, groups: Iterable[str]) -> dict[str, list[CommittedOffset]]:
        """The committed offsets of many groups, requested concurrently."""
        ...

    def describe_groups(self, groups: Iterable[str]) -> dict[str, GroupState]: ...

    def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None: ...

    def commit_offsets_many(self, commits: Mapping[str, Mapping[TopicPartition, int]]) -> dict[str, str]:
        """Commit the offsets of many groups, requested concurrently (each group all or nothing); the groups
        the cluster refused, with its reason (the others are committed)."""
        ...

    def topic_acls(self) -> list[TopicAcl]:
        """Every LITERAL or PREFIXED binding on a topic (ClusterError when the cluster has no authorizer)."""
        ...

    def add_acls(self, acls: Iterable[TopicAcl]) -> None: ...

    def delete_acls(self, acls: Iterable[TopicAcl]) -> None:
        """Delete exactly these bindings."""
        ...

    def delete_groups(self, groups: Iterable[str]) -> dict[str, str]:
        """Delete groups without members (one that does not exist counts as deleted); the groups the cluster
        refused, with its reason."""
        ...


class Clusters(Protocol):
    """Hands out the admin of a configured cluster; ``probe`` gives a short timeout (the source side)."""

    def admin(self, alias: str, probe: bool = False) -> ClusterAdmin: ...

    def reach(self, aliases: Iterable[str]) -> dict[str, Reach]:
        """Whether each cluster answers now (drkit.core.reach), all asked at once, each within its probe
        timeout: an operator command's first question, so it asks nothing more of one that does not."""
        ...


class SyncReader(Protocol):
    def ranges(self, flow: str, topics: list[str] | None = None) -> dict[TopicPartition, list[SyncRange]]:
        """The flow's ranges per source partition (of ``topics`` only, when given), coalesced."""
        ...

    def progress(self, flow: str) -> dict[TopicPartition, SyncProgress]: ...

    def target_topics(self, flow: str) -> dict[str, str]:
        """source topic -> target topic, for every topic the flow has mirrored."""
        ...


class SyncLog(SyncReader, Protocol):
    """The translator's view: the table version, and the rows appended since the last read."""

    def version(self) -> int | None: ...

    def ranges_since(
        self, flow: str, seen: dict[str, int], version: int
    ) -> tuple[dict[TopicPartition, list[SyncRange]], dict[str, int]]: ...


class CheckpointReader(Protocol):
    def latest(
        self, flow: str, groups: list[str] | None = None, as_of: datetime | None = None, version: int | None = None
    ) -> list[RecordedCheckpoint]: ...


class CheckpointLog(CheckpointReader, Protocol):
    """The translator's view: append the checkpoints that changed."""

    def ensure(self) -> None: ...

    def append(self, rows: list[Checkpoint], at: datetime | None = None) -> int: ...


class OperationLog(Protocol):
    def append(self, record: OperationRecord) -> None: ...

    def versions(self, ids: Iterable[str]) -> dict[str, int]:
        """The commit version of the first row of each operation in ``ids`` (its intent, for an apply), where
        the recent commits hold it: the order of intents written by processes on any host."""
        ...

    def recent(self, limit: int) -> list[OperationRecord]:
        """The latest ``limit`` rows of every flow, newest first, without their plans (to find open intents)."""
        ...

    def list(self, flow: str | None = None, limit: int = 50) -> list[OperationRecord]: ...


def utc_now() -> datetime:
    """The real clock: the default of every context's ``clock`` port (tests pass their own)."""
    return datetime.now(UTC)
