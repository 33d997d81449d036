"""Failback: move groups from the flow's target back to its source (the original cluster).

Both clusters must answer. Each group's offsets on the cluster being left are routed back (through the
flow's syncs, or the reverse flow's for topics that started there) by drkit.core.plan; what the group
had already read of copies past the synced end is read from their origin headers, so nothing is re-read.
The records the failover left on the origin that were never copied are named in the plan (they are read there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from drkit.config import FlowConfig
from drkit.core.audit import Action
from drkit.core.checkpoints import CommittedOffset
from drkit.core.origin import copied_below
from drkit.core.outcome import OperationResult
from drkit.core.plan import ReverseFlow, Route, failback_plan, failback_routes
from drkit.core.ports import ClusterAdmin, TopicPartition
from drkit.core.reach import Command
from drkit.core.recovery import failback_note
from drkit.core.translate import SyncIndex
from drkit.errors import RefusedError
from drkit.operate.apply import Confirm, finish
from drkit.operate.context import OperateContext
from drkit.operate.fencing import failback_fencing
from drkit.operate.groups import group_facts
from drkit.operate.hooks import after_apply
from drkit.operate.reach import probing, require
from drkit.operate.recovery import recovery


@dataclass(frozen=True)
class FailbackRequest:
    flow: FlowConfig
    groups: list[str] | None  # None: every group the flow selects on the cluster being left
    apply: bool = False


def _indexes(ctx: OperateContext, flow: str, topics: list[str] | None = None) -> dict[TopicPartition, SyncIndex]:
    return {key: SyncIndex(ranges) for key, ranges in ctx.syncs.ranges(flow, topics).items()}


def failback(ctx: OperateContext, request: FailbackRequest, confirm: Confirm | None = None) -> OperationResult:
    """Move groups from the flow's target back to its source (the original cluster)."""
    started = ctx.clock()
    flow = request.flow
    origin, leaving = flow.source, flow.target
    reverse = ctx.config.reverse_of(flow)
    # Both clusters are needed: probed at once, so a cluster that is gone stops it in one line at once.
    require(Command.FAILBACK, flow, probing(ctx, (origin, leaving)).result())
    admin_leaving = ctx.clusters.admin(leaving)
    names = request.groups or flow.group_selector().select(admin_leaving.list_groups())
    if not names:
        raise RefusedError(
            f"flow {flow.name}: no group the flow selects has committed offsets on {leaving}: nothing to fail "
            "back; check the flow's groups selection, or name the groups with --group"
        )
    offsets = [c for g in names for c in admin_leaving.committed_offsets(g) if c.offset >= 0]

    copies = {target: source for source, target in ctx.syncs.target_topics(flow.name).items()}
    reverse_flow = None
    if reverse is not None:
        reverse_flow = ReverseFlow(reverse.name, leaving, ctx.config.topic_selector(reverse), reverse.policy())
    routes = failback_routes({o.topic for o in offsets}, flow.name, copies, reverse_flow)

    indexes = {(flow.name, t, p): index for (t, p), index in _indexes(ctx, flow.name).items()}
    caught_up: dict[TopicPartition, tuple[int, int]] = {}
    if reverse is not None:
        indexes.update({(reverse.name, t, p): index for (t, p), index in _indexes(ctx, reverse.name).items()})
        local = {topic for topic, route in routes.items() if not route.inverse}
        if local:
            counts = admin_leaving.partition_counts()
            progress = ctx.syncs.progress(reverse.name)
            for key, end in admin_leaving.end_offsets({t: counts.get(t, 0) for t in local}).items():
                done = progress.get(key)
                caught_up[key] = (end, done.next_upstream if done is not None else 0)

    # What each group had processed on the origin, as its last checkpoint recorded: with the offsets it
    # still holds there, failback never re-reads those records unless the group was set back on B.
    checkpointed = {
        r.checkpoint.key: r.checkpoint.upstream_offset
        for r in (ctx.checkpoints.latest(flow.name, names) if names else [])
    }
    admin_origin = ctx.clusters.admin(origin)
    copied_back = _copied_back(admin_leaving, origin, offsets, routes, indexes, flow.name)
    plan = failback_plan(
        flow.name,
        origin,
        names,
        offsets,
        routes,
        indexes,
        group_facts(admin_origin, names),
        caught_up,
        leaving,
        reverse.name if reverse is not None else None,
        checkpointed,
        copied_back,
    )
    # The records the failover left on the origin and never copied are read there after the failback: said.
    note = failback_note(recovery(ctx, flow), origin, leaving)
    if note is not None:
        plan = replace(plan, warnings=(*plan.warnings, note))
    after = after_apply(ctx.config, flow, Action.FAILBACK)
    fencing = failback_fencing(ctx, flow)
    return finish(
        ctx, plan, names, None, request.apply, confirm, admin_origin, started, None, after=after, fencing=fencing
    )


def _copied_back(
    admin: ClusterAdmin,
    origin: str,
    offsets: list[CommittedOffset],
    routes: Mapping[str, Route],
    indexes: Mapping[tuple[str, str, int], SyncIndex],
    flow: str,
) -> dict[tuple[str, str, int], int]:
    """Per (group, copy topic, partition) whose offset on the cluster being left is past the synced end:
    one past the greatest original offset among the copies it read there (drkit.core.origin.copied_below).
    One read per partition, up to the greatest such offset."""
    past: dict[tuple[str, int], tuple[int, list[CommittedOffset]]] = {}
    for o in offsets:
        route = routes.get(o.topic)
        index = indexes.get((flow, route.to_topic, o.partition)) if route is not None and route.inverse else None
        start = index.next_downstream() if index is not None else None
        if start is None or o.offset <= start:
            continue
        _, group_offsets = past.setdefault((o.topic, o.partition), (start, []))
        group_offsets.append(o)
    out: dict[tuple[str, str, int], int] = {}
    for (topic, partition), (start, group_offsets) in sorted(past.items()):
        tail = admin.read_tail(topic, partition, start, max(o.offset for o in group_offsets), origin)
        for o in group_offsets:
            through = copied_below(tail, o.offset)
            if through is not None:
                out[(o.group, o.topic, o.partition)] = through
    return out
