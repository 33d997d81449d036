"""The collaborators an operation receives: config, cluster admins, stores, state paths, clock.

The facade (``drkit.service``) builds one with the real adapters; unit tests build one with the
in-memory fakes of ``tests/support/fakes.py``. Operations never build adapters themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from drkit.config import DrkitConfig
from drkit.core.ports import CheckpointReader, Clusters, OperationLog, SyncReader, utc_now
from drkit.layout import StateLayout
from drkit.store.runs import RunFiles


@dataclass(frozen=True)
class OperateContext:
    config: DrkitConfig
    clusters: Clusters
    syncs: SyncReader
    checkpoints: CheckpointReader
    operations: OperationLog
    layout: StateLayout
    clock: Callable[[], datetime] = field(default=utc_now)

    @property
    def runs(self) -> RunFiles:
        return RunFiles(self.layout)

    def now_ms(self) -> float:
        return self.clock().timestamp() * 1000
