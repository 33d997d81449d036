"""The collaborators an operation receives: config, cluster admins, stores, run files, state paths, clock.

The facade (``drkit.service``) builds one with the real adapters; unit tests build one with the
in-memory fakes of ``tests/support/fakes.py``. Operations never build adapters themselves: every cluster,
table and run file they read comes from here (an import-linter contract keeps drkit.store out of them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from drkit.config import DrkitConfig
from drkit.core.ports import CheckpointReader, Clusters, OperationLog, SyncReader, utc_now
from drkit.layout import StateLayout
from drkit.operate.ports import MirrorLog, RunLog


@dataclass(frozen=True)
class OperateContext:
    config: DrkitConfig
    clusters: Clusters
    syncs: SyncReader
    checkpoints: CheckpointReader
    operations: OperationLog
    layout: StateLayout
    runs: RunLog
    mirror_runs: MirrorLog
    clock: Callable[[], datetime] = field(default=utc_now)

    def now_ms(self) -> float:
        return self.clock().timestamp() * 1000
