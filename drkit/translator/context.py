"""The collaborators a translator job receives: config, clusters, the sync log, the checkpoint log, state.

The facade (``drkit.service``) builds one with the real adapters (confluent-kafka, Delta); unit tests
build one with the in-memory fakes of ``tests/support/fakes.py``. Invariant: the translator never
builds an adapter itself; every cluster, table and state file it touches comes from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from drkit.config import DrkitConfig
from drkit.core.ports import CheckpointLog, Clusters, SyncLog, utc_now
from drkit.layout import StateLayout
from drkit.store.runs import MirrorFiles, RunFiles


@dataclass(frozen=True)
class TranslatorContext:
    config: DrkitConfig
    clusters: Clusters
    syncs: SyncLog
    checkpoints: CheckpointLog
    layout: StateLayout
    clock: Callable[[], datetime] = field(default=utc_now)

    @property
    def runs(self) -> RunFiles:
        return RunFiles(self.layout)

    @property
    def mirror_files(self) -> MirrorFiles:
        return MirrorFiles(self.layout)

    def now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)
