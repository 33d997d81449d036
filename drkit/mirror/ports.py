"""The ports of the mirror: what it needs of the state it records, declared here, satisfied by the store.

The facade (``drkit.service``) hands the mirror adapters that satisfy these (the Delta ``offset_syncs``
table, the run and state files of ``drkit.store.runs``); unit tests hand it fakes. Invariant: no module
of drkit.mirror builds a store class or imports drkit.store to write state; it writes through these.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from drkit.core.batch import MirrorState
from drkit.core.incarnation import Renewal
from drkit.core.ports import SyncProgress, TopicPartition
from drkit.core.status import EndsObservation
from drkit.core.topology import TopicIssue
from drkit.layout import JobKind

if TYPE_CHECKING:
    import pyarrow as pa


class MirrorSyncLog(Protocol):
    """The mirror's view of ``offset_syncs``: make sure it exists, tell a recorded batch, record one."""

    def ensure(self) -> None: ...

    def batch_written(self, stream_id: str, batch_id: int) -> bool: ...

    def write(
        self,
        flow: str,
        stream_id: str,
        batch_id: int,
        ranges: pa.Table,
        at: datetime | None = None,
        epoch: int | None = None,
    ) -> int:
        """Record a batch's ranges (the range columns of ``drkit.mirror.copied.COPY_SCHEMA``, Arrow); 0 when
        recorded before. ``epoch``: the writer's lease epoch; refused (``FencedError``) once a newer one was taken."""
        ...

    def fence(self, flow: str) -> int:
        """Take the flow's next lease epoch (drkit.store.offset_syncs)."""
        ...

    def progress(self, flow: str) -> dict[TopicPartition, SyncProgress]: ...

    def target_topics(self, flow: str) -> dict[str, str]: ...


class MirrorStateLog(Protocol):
    """The mirror's own state per flow: what it decided per batch, renewed topics, created topics, findings."""

    def states(self, flow: str) -> list[MirrorState]: ...

    def record_state(self, flow: str, state: MirrorState) -> None: ...

    def add_renewals(self, flow: str, renewals: list[Renewal]) -> None: ...

    def created_topics(self, flow: str) -> frozenset[str]: ...

    def add_created_topics(self, flow: str, topics: list[str]) -> None: ...

    def write_findings(self, flow: str, at_ms: int, issues: tuple[TopicIssue, ...]) -> None: ...


class SourceEndsLog(Protocol):
    """Where a job records what it saw of the source's end offsets (``drkit status`` reads them)."""

    def observe_source_ends(self, kind: JobKind, flow: str, observation: EndsObservation) -> None: ...
