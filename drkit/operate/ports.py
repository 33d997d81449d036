"""The run-log ports: the small files the jobs leave under the state root, as operations read them.

The translator's last run and each job's last look at the source's ends (``RunLog``), the mirror's
re-created topics and topology findings (``MirrorLog``). ``drkit.store.runs`` implements both
(``RunFiles``, ``MirrorFiles``); the facade injects them through
:class:`~drkit.operate.context.OperateContext`, so an operation reads them without knowing where or how
they are kept. Operations only read them.
"""

from __future__ import annotations

from typing import Protocol

from drkit.core.incarnation import Renewal
from drkit.core.status import EndsObservation
from drkit.core.topology import TopicIssue
from drkit.layout import JobKind


class LastRun(Protocol):
    """The translator's last finished run: when, how long, and the groups whose checkpoints it confirmed."""

    @property
    def finished_at_ms(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    @property
    def confirmed_groups(self) -> tuple[str, ...]: ...

    def confirmed_at(self, group: str) -> int | None:
        """When ``group``'s checkpoints were last confirmed current (None: not by the last run)."""
        ...


class RunLog(Protocol):
    def last_run(self, flow: str) -> LastRun | None: ...

    def source_ends(self, kind: JobKind, flow: str) -> tuple[EndsObservation | None, EndsObservation | None]:
        """(latest, the one before) observations of the source's end offsets by ``kind``; raises
        ``StoreError`` for a record that is there but damaged."""
        ...


class MirrorLog(Protocol):
    def renewals(self, flow: str) -> tuple[Renewal, ...]:
        """The flow's re-created source topics (drkit.core.incarnation), as the mirror recorded them."""
        ...

    def findings(self, flow: str) -> tuple[int | None, tuple[TopicIssue, ...]]:
        """(when, the topology findings) of the flow's latest reconciliation; (None, ()) if none."""
        ...
