"""``drkit topics sync``: reconcile each flow's target topics with its source once, as a running mirror does.

The reconcilers are the facade's (confluent-kafka admins, the mirror's record of the topics it created);
this loop gives each the topics the flow has mirrored so far (from the offset-syncs) and plans, or applies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from drkit.config import FlowConfig
from drkit.core.topology import TopologyPlan
from drkit.operate.context import OperateContext

if TYPE_CHECKING:
    from drkit.kafka.topology import AppliedTopology


class Reconciler(Protocol):
    """One flow's topology reconciler (``drkit.kafka.topology.TopologyReconciler``)."""

    def plan(self, mirrored_before: Iterable[str] = ()) -> TopologyPlan: ...

    def reconcile(self, mirrored_before: Iterable[str] = ()) -> AppliedTopology: ...


def sync_topics(
    ctx: OperateContext, flows: Sequence[FlowConfig], reconciler: Callable[[FlowConfig], Reconciler], dry_run: bool
) -> list[TopologyPlan | AppliedTopology]:
    """Per flow, in order: the plan alone (``dry_run``: both clusters described, nothing changed), or what
    the reconciliation changed on the target (missing topics created, drkit's grown, changed configs set)."""
    out: list[TopologyPlan | AppliedTopology] = []
    for flow in flows:
        reconcile = reconciler(flow)
        mirrored = {topic for topic, _ in ctx.syncs.progress(flow.name)}
        out.append(reconcile.plan(mirrored) if dry_run else reconcile.reconcile(mirrored))
    return out
