"""Failover and failback: gather the facts, build the plan (drkit.core.plan), apply, verify, audit.

Failover never needs the source cluster: it probes it with a short timeout only to measure how
many records were not mirrored, and falls back to the translator's last observation. Every run,
dry runs and refusals included, is appended to the audit trail, whatever its end. An apply writes
its intent (what it will commit) before any commit and its outcome (what reads back) after; it
commits only while it holds its groups' lease (drkit.core.lease) and the offsets it planned from
have not moved, so two applies never interleave on a group and none silently rewinds one.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from drkit._version import __version__
from drkit.config import FlowConfig
from drkit.core.audit import OperationRecord, OperationStatus, fold, last_apply, to_complete
from drkit.core.checkpoints import CommittedOffset
from drkit.core.consistency import TargetDivergence
from drkit.core.exactly_once import Delivery, transactional_id
from drkit.core.incarnation import era_indexes
from drkit.core.lease import decide_lease, open_intents
from drkit.core.origin import TargetTail, copied_below, copied_through, tail_reads, tail_spans
from drkit.core.outcome import OperationResult, decide_apply, decide_status, drifted
from drkit.core.plan import (
    CheckpointFact,
    GroupFacts,
    Plan,
    ReverseFlow,
    Route,
    failback_plan,
    failback_routes,
    failover_plan,
)
from drkit.core.ports import ClusterAdmin, SyncProgress, TopicPartition
from drkit.core.reach import Command, Reach
from drkit.core.status import RpoReport, rpo_report
from drkit.core.translate import SyncIndex
from drkit.errors import DrkitError, RefusedError, StoreError
from drkit.layout import JobKind
from drkit.operate.context import OperateContext
from drkit.operate.lag import source_ends
from drkit.operate.reach import probing, require
from drkit.operate.targets import target_check
from drkit.runtime import background
from drkit.runtime.signals import stop_on_signals
from drkit.store.runs import MirrorFiles

log = logging.getLogger(__name__)

#: Asked with the plan before an apply; False declines (nothing changes).
Confirm = Callable[[Plan], bool]


@dataclass(frozen=True)
class FailoverRequest:
    flow: str
    groups: list[str] | None  # None: every group with checkpoints in the flow
    as_of: datetime | None = None
    allow_stale: bool = False
    apply: bool = False


@dataclass(frozen=True)
class FailbackRequest:
    flow: str
    groups: list[str] | None  # None: every group the flow selects on the cluster being left
    apply: bool = False


def _indexes(ctx: OperateContext, flow: str, topics: list[str] | None = None) -> dict[TopicPartition, SyncIndex]:
    return {key: SyncIndex(ranges) for key, ranges in ctx.syncs.ranges(flow, topics).items()}


def _facts(admin: ClusterAdmin, names: list[str]) -> dict[str, GroupFacts]:
    states = admin.describe_groups(names)
    committed = admin.committed_offsets_many(names)
    return {name: GroupFacts(states.get(name), _offsets(committed.get(name, []))) for name in names}


def _offsets(committed: list[CommittedOffset]) -> dict[TopicPartition, int]:
    """Only real commits: Kafka reports a partition without one as a negative offset."""
    return {(c.topic, c.partition): c.offset for c in committed if c.offset >= 0}


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def failover(ctx: OperateContext, request: FailoverRequest, confirm: Confirm | None = None) -> OperationResult:
    """Move groups to the flow's target at their checkpoints, re-translated with the syncs now."""
    started = ctx.clock()
    flow = ctx.config.flow(request.flow)
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
    return _finish(ctx, plan, names, as_of, request.apply, confirm, admin, started, rpo, fence)


def mirror_transactional_ids(flow: FlowConfig) -> tuple[str, ...]:
    """The transactional ids an exactly-once mirror of ``flow`` writes with (none for at-least-once)."""
    if flow.mirror.delivery is not Delivery.EXACTLY_ONCE:
        return ()
    return tuple(transactional_id(flow.name, slot) for slot in range(flow.mirror.transaction_slots))


def plan_failover(ctx: OperateContext, request: FailoverRequest) -> Plan:
    """The plan :func:`failover` would show for ``request`` (``--as-of`` included), built by the same code:
    nothing is committed, the source is not probed and nothing is written to the audit trail."""
    return _failover_plan(ctx, request, ctx.clock(), probing(ctx, (ctx.config.flow(request.flow).target,)))[2]


def _failover_plan(
    ctx: OperateContext, request: FailoverRequest, started: datetime, reaches: Future[dict[str, Reach]]
) -> tuple[FlowConfig, list[str], Plan, ClusterAdmin]:
    """The flow, the groups, the failover plan and the target's admin: shared by failover and plan_failover.
    ``reaches``: the probe of the flow's clusters; a target that did not answer stops it (exit 4)."""
    flow = ctx.config.flow(request.flow)
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
    require(Command.FAILOVER, flow, reaches.result())
    admin = ctx.clusters.admin(flow.target)
    topics = sorted({c.source_topic for c in checkpoints})  # only the syncs this failover translates with
    # The groups' state and offsets on the target (a request per group) are read while the syncs are.
    facts = background.started(_facts, admin, names)
    ranges = ctx.syncs.ranges(flow.name, topics)
    eras = era_indexes(ranges, MirrorFiles(ctx.layout).renewals(flow.name))
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


def measure_rpo(ctx: OperateContext, flow: FlowConfig, reaches: Future[dict[str, Reach]] | None = None) -> RpoReport:
    """How much the mirror had not copied: live when the source answers, else from the freshest
    observation of the source's ends (the mirror's per batch or the translator's per run). ``reaches``:
    the probe of the source (started here when not given); one that did not answer is not asked again."""
    if reaches is None:
        reaches = probing(ctx, (flow.source,))
    progress = ctx.syncs.progress(flow.name)
    live = (
        source_ends(ctx.clusters.admin(flow.source, probe=True), ctx.config.topic_selector(flow))
        if reaches.result()[flow.source].reachable
        else None
    )
    # The freshest observation, and for the produce rate the newest one before it, whichever job made them.
    try:
        seen = [o for kind in (JobKind.MIRROR, JobKind.TRANSLATOR) for o in ctx.runs.source_ends(kind, flow.name)]
    except StoreError:
        if live is None:
            raise  # the source is down: the damaged file was the only measure of the RPO
        seen = []  # the live ends measure it; the damaged file is replaced at the next observation
    observations = sorted((o for o in seen if o is not None), key=lambda o: o.at_ms, reverse=True)
    latest = observations[0] if observations else None
    previous = next((o for o in observations if latest is not None and o.at_ms < latest.at_ms), None)
    target = reaches.result().get(flow.target)
    copied = _copied_past_syncs(ctx, flow, progress) if target is not None and target.reachable else {}
    return rpo_report(progress, live, latest, previous, ctx.now_ms(), copied)


def _copied_past_syncs(
    ctx: OperateContext, flow: FlowConfig, progress: Mapping[TopicPartition, SyncProgress]
) -> dict[TopicPartition, int]:
    """Per source partition whose target holds records past the synced end, one past the greatest source
    offset they copy (their origin headers): the continuous copy puts records there before a batch syncs
    them. Asked only of a target the probe reached; one that fails meanwhile gives nothing (the RPO then
    counts from the syncs, as without copies ahead)."""
    try:
        admin = ctx.clusters.admin(flow.target)
        targets = ctx.syncs.target_topics(flow.name)
        starts = {key: p.last_downstream + 1 for key, p in progress.items() if key[0] in targets}
        if not starts:
            return {}
        counts = admin.partition_counts()
        ends = admin.end_offsets({t: counts[t] for t in {targets[k[0]] for k in starts} if t in counts})
        spans = tail_spans(
            starts, {key: ends[(targets[key[0]], key[1])] for key in starts if (targets[key[0]], key[1]) in ends}
        )
        out: dict[TopicPartition, int] = {}
        for key, (start, end) in sorted(spans.items()):
            through = copied_through(admin.read_tail(targets[key[0]], key[1], start, end, flow.source))
            if through is not None:
                out[key] = through
        return out
    except DrkitError:
        return {}


def failback(ctx: OperateContext, request: FailbackRequest, confirm: Confirm | None = None) -> OperationResult:
    """Move groups from the flow's target back to its source (the original cluster)."""
    started = ctx.clock()
    flow = ctx.config.flow(request.flow)
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
        _facts(admin_origin, names),
        caught_up,
        leaving,
        reverse.name if reverse is not None else None,
        checkpointed,
        copied_back,
    )
    return _finish(ctx, plan, names, None, request.apply, confirm, admin_origin, started, None)


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


def _finish(
    ctx: OperateContext,
    plan: Plan,
    names: list[str],
    as_of: str | None,
    apply: bool,
    confirm: Confirm | None,
    admin: ClusterAdmin,
    started: datetime,
    rpo: RpoReport | None,
    fence: tuple[str, ...] = (),
) -> OperationResult:
    """Apply when asked and allowed, and record the run in the audit trail whatever happens. ``fence``: the
    transactional ids of an exactly-once mirror writing to the destination, fenced before the commits."""
    confirmed = None
    if plan.ok and apply and confirm is not None:
        confirmed = confirm(plan)
    status = decide_status(plan, apply, confirmed)
    audit = _Audit(ctx, uuid.uuid4().hex, plan, names, as_of, not apply, started, rpo)
    if status is not OperationStatus.APPLIED:
        audit.write({"status": status.value, "error": None, "verified": {}})
        return OperationResult(plan, status, audit.id, rpo)
    return _apply(ctx, plan, admin, audit, fence)


@dataclass(frozen=True)
class _Audit:
    """Writes the rows of one operation (one id): the intent and the outcome of an apply, or the one row."""

    ctx: OperateContext
    id: str
    plan: Plan
    names: list[str]
    as_of: str | None
    dry_run: bool
    started: datetime
    rpo: RpoReport | None

    def write(self, result: dict[str, Any], intent: bool = False) -> None:
        self.ctx.operations.append(
            OperationRecord(
                self.id,
                self.plan.action,
                self.plan.flow,
                tuple(self.names),
                self.as_of,
                self.dry_run,
                self.plan.as_dict(),
                result | {"rpo": {} if self.rpo is None else self.rpo.as_dict()},
                _user(),
                socket.gethostname(),
                __version__,
                self.started,
                None if intent else self.ctx.clock(),
            )
        )


def _apply(
    ctx: OperateContext, plan: Plan, admin: ClusterAdmin, audit: _Audit, fence: tuple[str, ...] = ()
) -> OperationResult:
    """Record the intent, take the groups' lease, commit what differs in batches, read back, record the outcome.

    ``fence``: an exactly-once mirror's transactional ids, fenced first. A mirror that died with a transaction
    open holds its target partitions' last stable offset, so the groups (read_committed) would wait for the
    broker's transaction timeout; fencing aborts it now, and stops that mirror if it still runs. Best effort:
    a refusal is recorded and logged, and the groups are moved anyway.

    From the intent on, SIGINT and SIGTERM only ask the apply to stop between batches: the outcome
    row is always written, naming what was committed and what was not (a rerun completes it).
    """
    planned = plan.commits()
    completes = to_complete(fold(ctx.operations.recent(HISTORY_READ)), plan.action, plan.flow, planned)
    stop, received = threading.Event(), list[int]()
    base: dict[str, Any] = {"completes": completes}
    with stop_on_signals(stop, received):
        audit.write(base | {"status": OperationStatus.APPLYING.value, "commits": _keyed(planned)}, intent=True)
        try:
            recent = ctx.operations.recent(HISTORY_READ)
            intents = open_intents(recent, ctx.operations.versions(r.id for r in recent if r.intent))
            try:
                lease = decide_lease(audit.id, intents, ctx.now_ms())
            except ValueError:
                raise StoreError(
                    f"the operations table does not show the intent of operation {audit.id} just written: nothing "
                    "was committed; check that [state] root is one folder every host sees whole, then run again"
                ) from None
            stale = tuple(i.describe() for i in lease.stale)
            base |= {"stale_intents": list(stale)}
            if not lease.granted:
                assert lease.holder is not None
                _refuse(audit, base | {"holder": lease.holder.id}, lease.refusal())
            moved = drifted(plan, _held(admin, planned))
            if moved:
                more = f" (and {len(moved) - 1} more)" if len(moved) > 1 else ""
                last = last_apply(fold(recent), planned, audit.id)
                by = "" if last is None else f" (last moved by {last.describe()})"
                _refuse(
                    audit,
                    base,
                    f"{plan.action} {plan.flow}: offsets on {plan.destination} changed since the plan was made{by}, "
                    f"{moved[0]}{more}: nothing was committed; run the command again to see the new plan",
                )
            if fence:
                base |= _fence(admin, plan, fence)
            errors: dict[str, str] = {}
            todo = _changes(plan)
            groups = sorted(todo)
            for i in range(0, len(groups), COMMIT_BATCH_GROUPS):
                if stop.is_set():
                    break
                errors |= admin.commit_offsets_many({g: todo[g] for g in groups[i : i + COMMIT_BATCH_GROUPS]})
            outcome = decide_apply(planned, _held(admin, planned), errors, stop.is_set())
        except RefusedError:
            raise
        except Exception as exc:  # a cluster or the store failed mid-way: what holds on the cluster is unknown
            audit.write(base | {"status": OperationStatus.FAILED.value, "error": str(exc), "verified": {}})
            raise
        result = base | {
            "status": outcome.status.value,
            "error": next(iter(outcome.errors.values()), None),
            "verified": outcome.as_dict()["committed"],
        }
        audit.write(result | outcome.as_dict())
    return OperationResult(
        plan,
        outcome.status,
        audit.id,
        audit.rpo,
        outcome.committed if outcome.status is OperationStatus.APPLIED else {},
        outcome,
        completes,
        stale,
        received[0] if received else None,
    )


#: Groups whose commits are in flight at once; a stop request (SIGINT, SIGTERM) is honoured between batches.
COMMIT_BATCH_GROUPS = 50
#: Rows read back from the audit trail to find open intents and the unfinished apply a rerun completes.
HISTORY_READ = 1000


def _fence(admin: ClusterAdmin, plan: Plan, ids: tuple[str, ...]) -> dict[str, Any]:
    """Fence ``ids`` on the destination (see ``_apply``); what to record of it."""
    try:
        admin.fence_transactions(ids)
    except DrkitError as exc:
        log.warning(
            "%s %s: the mirror's transactions were not fenced (%s): a transaction it left open holds its target "
            "partitions until the broker's transaction timeout",
            plan.action,
            plan.flow,
            exc,
        )
        return {"fenced": [], "fence_error": str(exc)}
    return {"fenced": list(ids)}


def _refuse(audit: _Audit, base: dict[str, Any], message: str) -> NoReturn:
    audit.write(base | {"status": OperationStatus.REFUSED.value, "error": message, "verified": {}})
    raise RefusedError(message)


def _held(
    admin: ClusterAdmin, planned: Mapping[str, Mapping[TopicPartition, int]]
) -> dict[str, dict[TopicPartition, int]]:
    now = admin.committed_offsets_many(planned)
    return {group: _offsets(now.get(group, [])) for group in planned}


def _changes(plan: Plan) -> dict[str, dict[TopicPartition, int]]:
    """Only what differs from the destination's offsets: a rerun commits what an earlier apply left."""
    out: dict[str, dict[TopicPartition, int]] = {}
    for m in plan.moves:
        if m.changes and m.new is not None:
            out.setdefault(m.group, {})[(m.to_topic, m.partition)] = m.new
    return out


def _keyed(commits: Mapping[str, Mapping[TopicPartition, int]]) -> dict[str, dict[str, int]]:
    return {g: {f"{t}/{p}": o for (t, p), o in sorted(offsets.items())} for g, offsets in sorted(commits.items())}
