"""The drill's disaster, struck and undone.

drkit signals no broker it did not start: a disaster on the source needs it to be a local cluster of
scripts/local-kafka, checked before the drill touches anything. The disaster counts as struck only once
its signal went out (a PID file refused signals nothing, so there is nothing to undo); once struck, a
frozen source is always thawed, and a killed one restarted when the spec says so (or a failback needs it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from drkit.config import ClusterConfig
from drkit.core.drill import DisasterKind, DrillPhase
from drkit.drill.clock import now_ms
from drkit.drill.jobs import Jobs, kill
from drkit.drill.spec import DrillSpec
from drkit.errors import RefusedError
from drkit.localdev.clusters import LocalKafka


def require_local_source(spec: DrillSpec, alias: str, source: ClusterConfig) -> None:
    """Refuse a disaster on the source unless drkit started that broker (one line, what to change)."""
    if not spec.drill.disaster.needs_local_source:
        return
    local = LocalKafka(spec.local_state())
    try:
        cluster = local.describe(alias)
    except (OSError, ValueError):
        cluster = None
    if cluster is None or not cluster.running or cluster.bootstrap_servers != source.bootstrap_servers:
        raise RefusedError(
            f"disaster {spec.drill.disaster.value} needs cluster {alias} "
            f"({source.bootstrap_servers}) to be a local cluster of "
            f"scripts/local-kafka under {spec.local_state()} (set [local_kafka] state_dir); "
            "drkit signals no broker it did not start"
        )


class Disaster:
    """The spec's disaster on the flow's source ``alias``: :meth:`strike` once, :meth:`restore` any number of times."""

    def __init__(self, spec: DrillSpec, alias: str, on_phase: Callable[[DrillPhase, str], None]) -> None:
        self.spec = spec
        self.alias = alias
        self.on_phase = on_phase
        self.struck = False

    def strike(self, jobs: Jobs) -> int:
        """The disaster; returns when it struck (epoch ms, taken before the signal)."""
        kind = self.spec.drill.disaster
        at = now_ms()
        if kind is DisasterKind.KILL_SOURCE:
            LocalKafka(self.spec.local_state()).stop(self.alias, kill=True)
        elif kind is DisasterKind.PARTITION_SOURCE:
            LocalKafka(self.spec.local_state()).freeze(self.alias)
        elif kind is DisasterKind.STOP_MIRROR and "mirror" in jobs:
            kill(jobs["mirror"])
        self.struck = True
        return at

    def restore(self) -> None:
        """Undo the disaster: a frozen source is always thawed; a killed one restarted if the spec says so."""
        if not self.struck:
            return
        kind, local = self.spec.drill.disaster, LocalKafka(self.spec.local_state())
        if kind is DisasterKind.PARTITION_SOURCE:
            # Thawed, the broker finds its controller session expired and is fenced until it registers
            # again: the source is back once it serves a produce and a fetch again.
            if local.thaw(self.alias):
                local.wait_ready(self.alias, time.monotonic() + 120)
            self.struck = False
        elif kind is DisasterKind.KILL_SOURCE and (self.spec.local_kafka.restore or self.spec.drill.failback):
            self.on_phase(DrillPhase.RESTORE, f"scripts/local-kafka start {self.alias}")
            local.start(self.alias)
            self.struck = False
