"""The first question of every operator command: which of its clusters answer (all asked at once).

core decides what a command does without a cluster (drkit.core.reach.blocking); this module asks and
raises the one line when a cluster the command needs did not answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Future

from drkit.config import FlowConfig
from drkit.core.reach import Command, Reach, blocking, refusal_line
from drkit.errors import ClusterError
from drkit.operate.context import OperateContext
from drkit.runtime import background


def probing(ctx: OperateContext, aliases: Iterable[str]) -> Future[dict[str, Reach]]:
    """Every cluster of ``aliases`` probed at once, in the background (the caller reads its tables meanwhile)."""
    return background.started(ctx.clusters.reach, list(dict.fromkeys(aliases)))


def require(command: Command, flow: FlowConfig, reaches: Mapping[str, Reach]) -> None:
    """Raise ``ClusterError`` (exit 4), naming each cluster and why, when a cluster ``command`` needs is down."""
    # A cluster the command did not probe is not known to be down (plan_failover never probes the source).
    down = blocking(command, reaches.get(flow.source, Reach(flow.source)), reaches.get(flow.target, Reach(flow.target)))
    if down:
        raise ClusterError(refusal_line(command, flow.name, flow.source, down))
