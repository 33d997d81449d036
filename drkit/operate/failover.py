"""Failover: gather the facts, build the plan (drkit.core.plan), then apply and audit (drkit.operate.apply).

Failover never needs the source cluster: it probes it with a short timeout only to measure how
many records were not mirrored (drkit.operate.rpo), and falls back to the jobs' last observation. The
target must answer. ``plan_failover`` builds the same plan for a moment in the past and changes nothing.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import datetime

from drkit.config import FlowConfig
from drkit.core.audit import Action
from drkit.core.consistency import TargetDivergence
from drkit.core.exactly_once import Delivery, transactional_id
from drkit.core.incarnation import era_indexes
from drkit.core.origin import TargetTail, tail_reads, tail_spans
from drkit.core.outcome import OperationResult
from drkit.core.plan import CheckpointFact, Plan, failover_plan
from drkit.core.ports import ClusterAdmin, TopicPartition
from drkit.core.reach import Command, Reach
from drkit.core.translate import SyncIndex
from drkit.errors import RefusedError
from drkit.operate.apply import Confirm, finish
from drkit.operate.context import OperateContext
from drkit.operate.fencing import failover_fencing
from drkit.operate.groups import group_facts
from drkit.operate.hooks import after_apply
from drkit.operate.live import with_live
from drkit.operate.reach import probing, require
from drkit.operate.rpo import measure_rpo
from drkit.operate.targets import target_check
from drkit.runtime import background


@dataclass(frozen=True)
class FailoverRequest:
    flow: FlowConfig
    groups: list[str] | None  # None: every group with checkpoints in the flow
    as_of: datetime | None = None
    allow_stale: bool = False
    apply: bool = False


def failover(ctx: OperateContext, request: FailoverRequest, confirm: Confirm | None = None) -> OperationResult:
    """Move groups to the flow's target at their checkpoints, re-translated with the syncs now."""
    started = ctx.clock()
    flow = request.flow
    # Both clusters are probed at once while the tables are read; the source (it may be gone) only
    # for the RPO, measured meanwhile; the target must answer (drkit.core.reach).
    reaches = probing(ctx, (flow.source, flow.target))
    measured = background.started(measure_rpo, ctx, flow, reaches)
    try:
        _, names, plan, admin = _failover_plan(ctx, request, started, reaches)
    except BaseException:
        # The measure reads the syncs (delta-rs, pyarrow) in its thread: a command that ends while native code
        # runs in a thread ends in a segfault at the interpreter's exit (seen with the target refused, when the
        # refusal comes first). It costs little: the probe has answered, a source gone is not asked again.
        with contextlib.suppress(Exception):
            measured.result()
        raise
    rpo = measured.result()
    as_of = request.as_of.isoformat() if request.as_of else None
    fence = mirror_transactional_ids(flow)
    after = after_apply(ctx.config, flow, Action.FAILOVER)
    # Only the latest failover moves the producers: one --as-of a past time is a look back, and fences nothing.
    fencing = failover_fencing(ctx, flow, reaches.result()) if request.as_of is None else None
    return finish(ctx, plan, names, as_of, request.apply, confirm, admin, started, rpo, fence, after, fencing)


def mirror_transactional_ids(flow: FlowConfig) -> tuple[str, ...]:
    """The transactional ids an exactly-once mirror of ``flow`` writes with (none for at-least-once)."""
    if flow.mirror.delivery is not Delivery.EXACTLY_ONCE:
        return ()
    return tuple(transactional_id(flow.name, slot) for slot in range(flow.mirror.transaction_slots))


def plan_failover(ctx: OperateContext, request: FailoverRequest) -> Plan:
    """The plan :func:`failover` would show for ``request`` (``--as-of`` included), built by the same code:
    nothing is committed, the source is not probed and nothing is written to the audit trail."""
    return _failover_plan(ctx, request, ctx.clock(), probing(ctx, (request.flow.target,)))[2]


def _failover_plan(
    ctx: OperateContext, request: FailoverRequest, started: datetime, reaches: Future[dict[str, Reach]]
) -> tuple[FlowConfig, list[str], Plan, ClusterAdmin]:
    """The flow, the groups, the failover plan and the target's admin: shared by failover and plan_failover.
    ``reaches``: the probe of the flow's clusters; a target that did not answer stops it (exit 4)."""
    flow = request.flow
    recorded = ctx.checkpoints.latest(flow.name, request.groups, as_of=request.as_of)
    names = request.groups or sorted({r.checkpoint.group for r in recorded})
    missing = sorted(set(names) - {r.checkpoint.group for r in recorded})
    # Only when something is missing: why (no checkpoints ever, or only after --as-of) decides the answer.
    now = ctx.checkpoints.latest(flow.name, None) if not names or (missing and not recorded) else recorded
    if not now:
        raise RefusedError(
            f"flow {flow.name} has no checkpoints (none under the state root {ctx.layout.root}): run `drkit "
            "checkpoint` for the flow first, or check [state] root if it ran before"
        )
    if not names:
        raise RefusedError(
            f"flow {flow.name} has no checkpoints as of {request.as_of.isoformat() if request.as_of else 'now'}: its "
            "checkpoints start later; give a later --as-of, or leave it out for the latest"
        )
    later: set[str] = set()
    if missing and request.as_of is not None:
        later = {r.checkpoint.group for r in ctx.checkpoints.latest(flow.name, missing)}
    reference_ms = (request.as_of or started).timestamp() * 1000
    # Back in time, only the rows themselves tell their age; now, the translator's last confirmation too.
    last_run = ctx.runs.last_run(flow.name) if request.as_of is None else None
    require(Command.FAILOVER, flow, reaches.result())
    admin = ctx.clusters.admin(flow.target)
    unread_live = None
    if request.as_of is None:  # the newest: a live checkpoint where the follower has a newer one
        newest = with_live(
            admin, flow, names, recorded, lambda g: None if last_run is None else last_run.confirmed_at(g)
        )
        recorded, unread_live = newest.recorded, newest.refused
    checkpoints = [
        CheckpointFact(
            r.checkpoint.group,
            r.checkpoint.source_topic,
            r.checkpoint.target_topic,
            r.checkpoint.partition,
            r.checkpoint.upstream_offset,
            r.age_at(reference_ms, None if last_run is None else last_run.confirmed_at(r.checkpoint.group)),
            r.checkpoint.position,
            r.checkpoint.downstream_offset,  # a partition with nothing to mirror
            r.checkpointed_at_ms,
        )
        for r in recorded
    ]
    topics = sorted({c.source_topic for c in checkpoints})  # only the syncs this failover translates with
    # The groups' state and offsets on the target (a request per group) are read while the syncs are.
    facts = background.started(group_facts, admin, names)
    ranges = ctx.syncs.ranges(flow.name, topics)
    eras = era_indexes(ranges, ctx.mirror_runs.renewals(flow.name))
    # The newest incarnation's syncs stand for a renewed partition wherever one index is asked for.
    indexes = {key: eras[key].at(None) if key in eras else SyncIndex(rs) for key, rs in ranges.items()}
    tails = _tails(admin, flow, checkpoints, indexes)
    diverged = _diverged(ctx, admin, flow, set(topics))
    plan = failover_plan(
        flow.name,
        flow.target,
        names,
        checkpoints,
        indexes,
        facts.result(),
        flow.checkpoint.max_age_seconds,
        request.allow_stale,
        tails,
        diverged,
        eras,
        later,
    )
    if unread_live is not None:
        plan = replace(plan, warnings=(*plan.warnings, unread_live))
    return flow, names, plan, admin


def _diverged(
    ctx: OperateContext, admin: ClusterAdmin, flow: FlowConfig, topics: set[str]
) -> dict[TopicPartition, TargetDivergence]:
    """Per (source topic, partition) of ``topics``, a target partition that no longer holds what its syncs say."""
    found = target_check(admin, ctx.syncs.progress(flow.name), ctx.syncs.target_topics(flow.name), topics.__contains__)
    return {(d.source_topic, d.partition): d for d in found}


def _tails(
    admin: ClusterAdmin, flow: FlowConfig, checkpoints: list[CheckpointFact], indexes: dict[TopicPartition, SyncIndex]
) -> dict[TopicPartition, TargetTail]:
    """The target's unsynced records past the synced end, where a checkpoint lies past it."""
    starts = tail_reads((((c.source_topic, c.partition), c.upstream_offset) for c in checkpoints), indexes)
    if not starts:
        return {}
    target_of = {(c.source_topic, c.partition): c.target_topic for c in checkpoints}
    counts = admin.partition_counts()
    wanted = {target_of[key] for key in starts}
    ends = admin.end_offsets({t: counts[t] for t in wanted if t in counts})
    spans = tail_spans(
        starts, {key: ends[(target_of[key], key[1])] for key in starts if (target_of[key], key[1]) in ends}
    )
    return {
        key: admin.read_tail(target_of[key], key[1], start, end, flow.source)
        for key, (start, end) in sorted(spans.items())
    }
