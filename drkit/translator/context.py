"""The collaborators a translator job receives: config, clusters, the sync and checkpoint logs, its run log.

The facade builds one with the real adapters (``drkit.wiring``: confluent-kafka, Delta, the run files);
unit tests build one with the in-memory fakes of ``tests/support/fakes.py``. Invariant: the translator never
builds an adapter itself; every cluster, table and state file it touches comes from here (an import-linter
contract keeps drkit.store out of it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from drkit.config import DrkitConfig
from drkit.core.group_commits import GroupRecord
from drkit.core.ports import CheckpointLog, Clusters, SyncLog, TopicPartition, utc_now
from drkit.core.reports import TranslationRun
from drkit.core.status import EndsObservation
from drkit.core.translate import SyncIndex
from drkit.errors import Refusal
from drkit.layout import JobKind


class SyncIndexes(Protocol):
    """A flow's sync indexes, kept up to date with what the mirror appended since the last call."""

    def indexes(self) -> dict[TopicPartition, SyncIndex]: ...


class RunLog(Protocol):
    """The translator's run files: the last run (what status reads to tell a stale translator) and the
    source's ends it saw (what failover reads for the RPO once the source is gone)."""

    def observe_source_ends(self, kind: JobKind, flow: str, observation: EndsObservation) -> None: ...

    def record_run(self, run: TranslationRun, confirmed: tuple[str, ...]) -> None:
        """Record ``run`` as the flow's last, with the groups whose committed offsets it read."""
        ...


class CommitTail(Protocol):
    """One cluster's ``__consumer_offsets`` read from its start (drkit.kafka.consumer_offsets); raises
    ``AccessDenied`` when the principal may not read it."""

    def read(self, timeout: float = 0.1) -> list[GroupRecord]: ...

    def caught_up(self, idle: bool = False) -> bool:
        """Whether every partition was read to its end as of the first call (``idle``: the last read was empty)."""
        ...

    def close(self) -> None: ...


class CheckpointAppender(Protocol):
    """The target's checkpoint topic, written (drkit.kafka.checkpoint_topic): appends answered on ``poll``."""

    def ensure(self) -> None:
        """Create the topic if missing."""
        ...

    def append(self, key: bytes, value: bytes | None, answer: Callable[[Refusal | None], None]) -> None:
        """Start appending one record (None: a tombstone); ``answer`` gets None once appended, else why not
        (AccessDenied: the principal lacks an ACL), from a later :meth:`poll`."""
        ...

    def poll(self, timeout: float = 0.0) -> None:
        """Serve the answers that came; raises ClusterError (AccessDenied: a missing ACL) when the writer failed for
        good: the appends in flight are then never answered."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class TranslatorContext:
    config: DrkitConfig
    clusters: Clusters
    syncs: SyncLog
    checkpoints: CheckpointLog
    runs: RunLog
    #: The sync indexes of a flow, by name (one per job, kept for its life).
    sync_indexes: Callable[[str], SyncIndexes]
    clock: Callable[[], datetime] = field(default=utc_now)
    #: A cluster's ``__consumer_offsets`` tail, by alias (the follower's source side); None: no follower.
    commit_tail: Callable[[str], CommitTail] | None = None
    #: A cluster's checkpoint topic, by alias (the follower's target side).
    checkpoint_topic: Callable[[str], CheckpointAppender] | None = None

    def now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)
