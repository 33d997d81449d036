"""Fencing at failover and failback: gather each cluster's topic ACLs and drkit's own from the trail, let
drkit.core.fencing decide, and apply the changes before the groups' offsets are committed.

The plan is made before the apply (a dry run shows it, and a cluster without an authorizer stops the command
in one line, before anything is written); the apply records each change made in the operation's audit row
under ``fencing.applied`` as it goes, so the trail always shows what drkit added, even when a later step
fails. Only those records decide what a later apply lifts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from drkit.config import FlowConfig
from drkit.core.audit import FLOW_TRAIL_ROWS
from drkit.core.fencing import FENCING_KEY, ClusterAcls, FenceSide, FencingPlan, added_by_drkit, plan_fencing
from drkit.core.reach import Reach
from drkit.operate.context import OperateContext


def _trail(ctx: OperateContext, flow: FlowConfig) -> list[Mapping[str, Any]]:
    """The audit results of the flow's applies that changed ACLs, oldest first."""
    rows = [r for r in ctx.operations.list(flow.name, FLOW_TRAIL_ROWS) if not r.dry_run and FENCING_KEY in r.result]
    return [r.result for r in reversed(rows)]


def _acls(ctx: OperateContext, alias: str, answers: bool, trail: list[Mapping[str, Any]]) -> ClusterAcls:
    present = frozenset(ctx.clusters.admin(alias).topic_acls()) if answers else None
    return ClusterAcls(alias, present, added_by_drkit(trail, alias))


def failover_fencing(ctx: OperateContext, flow: FlowConfig, reaches: Mapping[str, Reach]) -> FencingPlan | None:
    """The source fenced (when it answers), drkit's denials on the copies lifted (``read_only_copies``); None
    when the flow has no ``[flows.fencing]`` producers."""
    if not flow.fencing.on:
        return None
    topics = sorted(ctx.syncs.target_topics(flow.name))
    trail = _trail(ctx, flow)
    source = reaches.get(flow.source)
    leaving = _acls(ctx, flow.source, source is not None and source.reachable, trail)
    arriving = _acls(ctx, flow.target, flow.fencing.read_only_copies, trail)
    if not flow.fencing.read_only_copies:
        arriving = ClusterAcls(flow.target, frozenset(), arriving.added)
    return plan_fencing(
        leaving,
        topics,
        arriving,
        flow.fencing.producers,
        flow.fencing.read_only_copies,
        FenceSide.SOURCE,
        flow=flow.name,
    )


def failback_fencing(ctx: OperateContext, flow: FlowConfig) -> FencingPlan | None:
    """drkit's denials on the source lifted; the copies fenced again (``read_only_copies``). Both clusters answer
    (failback needs them)."""
    if not flow.fencing.on:
        return None
    copies = sorted(ctx.syncs.target_topics(flow.name).values())
    trail = _trail(ctx, flow)
    leaving = _acls(ctx, flow.target, flow.fencing.read_only_copies, trail)
    if not flow.fencing.read_only_copies:
        leaving = ClusterAcls(flow.target, frozenset(), leaving.added)
    arriving = _acls(ctx, flow.source, True, trail)
    return plan_fencing(
        leaving,
        copies,
        arriving,
        flow.fencing.producers,
        flow.fencing.read_only_copies,
        FenceSide.TARGET,
        flow=flow.name,
    )


def apply_fencing(ctx: OperateContext, plan: FencingPlan, record: Callable[[dict[str, Any]], None]) -> None:
    """Make ``plan``'s changes, cluster by cluster; ``record`` gets the audit entry after each one (and before
    the first), so what was made is known whatever fails next."""
    applied: list[dict[str, Any]] = []
    record({"applied": applied, "warnings": list(plan.warnings)})
    for change in plan.changes:
        admin = ctx.clusters.admin(change.cluster)
        admin.add_acls(change.add)
        applied.append({**change.as_dict(), "delete": []})
        record({"applied": list(applied), "warnings": list(plan.warnings)})
        admin.delete_acls(change.delete)
        applied[-1] = change.as_dict()
        record({"applied": list(applied), "warnings": list(plan.warnings)})
