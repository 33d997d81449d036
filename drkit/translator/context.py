"""The collaborators a translator job receives: config, clusters, the sync and checkpoint logs, its run log.

The facade builds one with the real adapters (``drkit.wiring``: confluent-kafka, Delta, the run files);
unit tests build one with the in-memory fakes of ``tests/support/fakes.py``. Invariant: the translator never
builds an adapter itself; every cluster, table and state file it touches comes from here (an import-linter
contract keeps drkit.store out of it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
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


class ShadowGroups(Protocol):
    """The target's side of the live checkpoints: commits with metadata, group deletions (drkit.kafka.admin)."""

    def commit_with_metadata_started(
        self, commits: Mapping[str, Mapping[TopicPartition, tuple[int, str]]]
    ) -> dict[str, Future[Refusal | None]]:
        """Start committing each group's offsets, all requests in flight at once: per group a future of why it
        was refused (None: committed; AccessDenied: the principal lacks an ACL)."""
        ...

    def delete_groups(self, groups: Iterable[str]) -> dict[str, str]:
        """Delete the groups (one that does not exist counts as deleted); the refused ones with the reason."""
        ...


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
    #: A cluster's shadow groups, by alias (the follower's target side).
    shadow_groups: Callable[[str], ShadowGroups] | None = None

    def now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)
