"""``status`` and ``offsets``: gather what the mirror and translator have done; core decides the rest.

Both work with the source gone (they say so): everything but the live lag and the source's
committed offsets comes from the stores and the state folder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime

from drkit.config import FlowConfig
from drkit.core.checkpoints import CommittedOffset, RecordedCheckpoint
from drkit.core.consistency import TargetDivergence, divergence_message
from drkit.core.heartbeat import HEARTBEAT_TOPIC, HeartbeatReading, heartbeat_key, reading
from drkit.core.mirror_lease import LeaseReport, LeaseView, fold, lease_report
from drkit.core.offsets import SyncRange
from drkit.core.ports import SyncProgress, TopicPartition
from drkit.core.reach import Command, Reach, unreachable_lines
from drkit.core.readiness import GroupFacts, readiness
from drkit.core.recovery import RecoveryVerdict, recovery_report
from drkit.core.status import (
    FlowStatus,
    GroupOffsets,
    StatusReport,
    flow_verdict,
    group_offset_rows,
    overall_verdict,
    partition_lags,
)
from drkit.core.topology import TopicIssueKind
from drkit.errors import ClusterError, DrkitError, StoreError
from drkit.layout import JobKind
from drkit.operate.context import OperateContext
from drkit.operate.lag import oldest_unmirrored, source_ends
from drkit.operate.live import not_read, with_live
from drkit.operate.ports import LastRun
from drkit.operate.reach import probing, require
from drkit.operate.recovery import open_failover
from drkit.operate.targets import target_check
from drkit.runtime import background
from drkit.runtime.process import running


def _divergences(
    ctx: OperateContext, flow: FlowConfig, progress: dict[TopicPartition, SyncProgress]
) -> tuple[TargetDivergence, ...] | None:
    """The flow's target partitions that no longer hold what the syncs say; None: the target did not answer."""
    # A probe, like the source's: status must answer quickly with either cluster gone.
    admin = ctx.clusters.admin(flow.target, probe=True)
    try:
        if not progress:  # nothing to compare: still ask, an unreachable target is a verdict of its own
            admin.partition_counts()
            return ()
        return target_check(admin, progress, ctx.syncs.target_topics(flow.name))
    except ClusterError:
        return None


def _heartbeat(ctx: OperateContext, flow: FlowConfig, target_up: bool) -> HeartbeatReading:
    """The flow's replication latency and liveness, read on the target alone (the source may be gone); its
    age counts to the moment after the read (never younger than the truth)."""
    if flow.heartbeats.interval_seconds <= 0 or not target_up:
        return reading(None, ctx.now_ms())
    topic = flow.policy().target_topic(flow.source, HEARTBEAT_TOPIC)
    try:
        newest = ctx.clusters.admin(flow.target, probe=True).newest_heartbeat(
            topic, heartbeat_key(flow.source, flow.target)
        )
    except ClusterError:
        newest = None
    return reading(newest, ctx.now_ms())


def _lease(ctx: OperateContext, flow: FlowConfig) -> LeaseReport | None:
    """Who mirrors the flow, read on its target's lease topic; None when it cannot be known."""
    try:
        entries = ctx.clusters.admin(flow.target, probe=True).lease_entries(flow.name)
    except DrkitError:
        return None
    return None if entries is None else lease_report(fold(LeaseView(), entries), int(ctx.now_ms()))


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class _GroupsRead:
    """What the groups' readiness is decided from (drkit.core.readiness.GroupFacts) as read here."""

    recorded: list[RecordedCheckpoint]
    committed: dict[str, list[CommittedOffset]] | None
    ranges: dict[TopicPartition, list[SyncRange]]
    live_unread: str = ""


def _group_offsets(
    ctx: OperateContext,
    flow: FlowConfig,
    recorded_read: Future[list[RecordedCheckpoint]],
    last_run: LastRun | None,
    source_up: bool,
    target_up: bool,
) -> _GroupsRead:
    """The checkpoints a failover now would use (with the follower's live ones where the target answers), the
    offset-syncs of their topics (the failover translates with them), and the groups' committed offsets on the
    source now (None: unknown, the source did not answer or refused)."""
    recorded = recorded_read.result()
    groups = sorted({r.checkpoint.group for r in recorded})
    unread = ""
    if target_up and groups:
        try:
            admin = ctx.clusters.admin(flow.target, probe=True)
            newest = with_live(
                admin, flow, groups, recorded, lambda g: None if last_run is None else last_run.confirmed_at(g)
            )
            recorded, unread = newest.recorded, newest.refused or ""
        except DrkitError as exc:  # the rows alone, as without the follower, and the line saying so
            unread = not_read(exc)
    topics = sorted({r.checkpoint.source_topic for r in recorded})
    ranges = ctx.syncs.ranges(flow.name, topics) if topics else {}
    if not source_up or not groups:
        return _GroupsRead(recorded, None if not source_up else {}, ranges, unread)
    try:
        committed = ctx.clusters.admin(flow.source, probe=True).committed_offsets_many(groups)
        return _GroupsRead(recorded, committed, ranges, unread)
    except DrkitError:
        return _GroupsRead(recorded, None, ranges, unread)


def flow_status(ctx: OperateContext, flow: FlowConfig, reaches: Future[dict[str, Reach]] | None = None) -> FlowStatus:
    """One flow's status. ``reaches``: the probe of its clusters (started here when not given); a cluster
    that did not answer is asked nothing more, so its side is told at once, without a timeout per question."""
    if reaches is None:
        reaches = probing(ctx, (flow.source, flow.target))
    source = ctx.clusters.admin(flow.source, probe=True)
    # Every question that does not need another's answer is asked at once: the tables first (delta-rs and
    # pyarrow read without the interpreter's lock) while the clusters are probed, then the clusters that
    # answered, both at the same time.
    recorded_read = background.started(ctx.checkpoints.latest, flow.name)
    try:
        progress = ctx.syncs.progress(flow.name)
        last_run = ctx.runs.last_run(flow.name)
        checked_at, issues = ctx.mirror_runs.findings(flow.name)
    except BaseException:
        # A command must not end while delta-rs or pyarrow runs in a thread (a segfault at the interpreter's
        # exit): the other table's read is waited for before the error goes up.
        with contextlib.suppress(Exception):
            recorded_read.result()
        raise
    reach = reaches.result()
    source_up, target_up = reach[flow.source].reachable, reach[flow.target].reachable
    selector = ctx.config.topic_selector(flow)
    on_source = background.started(source_ends, source, selector) if source_up else background.started(_nothing)
    beat_read = background.started(_heartbeat, ctx, flow, target_up)
    lease_read = background.started(_lease, ctx, flow) if target_up else background.started(_nothing)
    on_target = background.started(_divergences, ctx, flow, progress) if target_up else background.started(_nothing)
    groups_read = background.started(_group_offsets, ctx, flow, recorded_read, last_run, source_up, target_up)
    failover_read = background.started(open_failover, ctx, flow)
    ends = on_source.result()
    oldest = oldest_unmirrored(source, progress, ends)
    divergences, beat, lease = on_target.result(), beat_read.result(), lease_read.result()
    read = groups_read.result()
    now = ctx.now_ms()  # after every read: ages and lags are never younger than the truth
    confirmed: dict[str, int] = {}
    for g in () if last_run is None else last_run.confirmed_groups:
        at = None if last_run is None else last_run.confirmed_at(g)
        if at is not None:
            confirmed[g] = at
    facts = GroupFacts(
        read.recorded,
        now,
        flow.checkpoint.max_age_seconds,
        read.ranges,
        {tp: p.next_upstream for tp, p in progress.items()},
        read.committed,
        ends,
        confirmed,
    )
    # The syncs alone say what of the gap is on the target (drkit recover also reads the copies past them).
    try:
        left = recovery_report(flow.name, failover_read.result(), progress, {}, ends)
        left_behind, left_offsets = left.verdict, left.unrecovered
    except StoreError:  # the audit trail is unreadable (drkit history says why): what was left is not known
        left_behind, left_offsets = RecoveryVerdict.UNKNOWN, None
    diverged = {(d.source_topic, d.partition) for d in divergences or ()}
    lags = partition_lags(progress, ends, oldest, now, diverged)
    last_run_age = None if last_run is None else round((now - last_run.finished_at_ms) / 1000, 1)
    # The heartbeat topic's lag is told by the heartbeat's age, not by the verdict: it gets a record a second.
    verdict = flow_verdict(
        ends is not None,
        last_run_age,
        flow.checkpoint.max_age_seconds,
        bool(progress),
        [p for p in lags if p.topic != HEARTBEAT_TOPIC],
        bool(divergences),
        any(i.kind is TopicIssueKind.TARGET_TOO_SMALL for i in issues),
        target_reachable=divergences is not None,
    )
    return FlowStatus(
        flow=flow.name,
        verdict=verdict,
        source_reachable=ends is not None,
        mirror_running=running(ctx.layout.pid_file(JobKind.MIRROR, flow.name)),
        checkpoint_running=running(ctx.layout.pid_file(JobKind.TRANSLATOR, flow.name)),
        lag_records=None
        if ends is None or diverged
        else sum(p.lag_records or 0 for p in lags if p.topic != HEARTBEAT_TOPIC),
        checkpoint_last_run_age_seconds=last_run_age,
        checkpoint_last_run_seconds=None if last_run is None else round(last_run.seconds, 3),
        groups=readiness(facts),
        partitions=lags,
        target_reachable=divergences is not None,
        target_divergences=divergences or (),
        target_problem=divergence_message(flow.name, flow.target, divergences or ()),
        heartbeat_latency_seconds=beat.latency_seconds,
        heartbeat_age_seconds=beat.age_seconds,
        topic_issues=issues,
        topology_age_seconds=None if checked_at is None else round((now - checked_at) / 1000, 1),
        unreachable=unreachable_lines(reach, (flow.source, flow.target)),
        mirror_lease=lease,
        left_behind=left_behind,
        left_behind_offsets=left_offsets,
        live_checkpoints_unread=read.live_unread,
    )


def status(ctx: OperateContext, flows: Sequence[FlowConfig]) -> StatusReport:
    """Per flow status and the overall verdict (the worst of the flows). Every cluster of the selected
    flows is probed once, all at the same time, whatever the number of flows."""
    reaches = probing(ctx, (a for f in flows for a in (f.source, f.target)))
    statuses = tuple(flow_status(ctx, f, reaches) for f in flows)
    return StatusReport(overall_verdict(f.verdict for f in statuses), statuses)


def group_offsets(
    ctx: OperateContext,
    flow: FlowConfig,
    group: str,
    as_of: datetime | None = None,
    version: int | None = None,
    reaches: Future[dict[str, Reach]] | None = None,
) -> GroupOffsets:
    """Per partition: source committed offset (live when reachable), checkpointed offset, the
    translation with the syncs as they are now, the target group's offset, the checkpoint age.
    ``reaches``: the probe of the flow's clusters (started here when not given); a target that did not
    answer stops it (exit 4, drkit.core.reach), a source that did not answer leaves its column unknown."""
    if reaches is None:
        reaches = probing(ctx, (flow.source, flow.target))
    # The tables are read while the clusters are probed (a damaged table is told before a cluster that is down).
    recorded = ctx.checkpoints.latest(flow.name, [group], as_of=as_of, version=version)
    ranges = ctx.syncs.ranges(flow.name)
    reach = reaches.result()
    require(Command.OFFSETS, flow, reach)
    on_source = (
        background.started(ctx.clusters.admin(flow.source, probe=True).committed_offsets, group)
        if reach[flow.source].reachable
        else None
    )
    try:
        on_target = {
            (c.topic, c.partition): c.offset
            for c in ctx.clusters.admin(flow.target).committed_offsets(group)
            if c.offset >= 0
        }
    finally:
        # Never end the command while the source's answer is pending in the client library's thread.
        live: dict[tuple[str, int], int] | None = None
        if on_source is not None:
            try:
                live = {(c.topic, c.partition): c.offset for c in on_source.result() if c.offset >= 0}
            except ClusterError:
                live = None
    last_run = ctx.runs.last_run(flow.name) if as_of is None and version is None else None
    confirmed = None if last_run is None else last_run.confirmed_at(group)
    rows = group_offset_rows(recorded, ranges, live, on_target, ctx.now_ms(), confirmed)
    return GroupOffsets(flow.name, group, rows, unreachable_lines(reach, (flow.source, flow.target)))


def offsets(
    ctx: OperateContext,
    flows: Sequence[FlowConfig],
    group: str,
    as_of: datetime | None = None,
    version: int | None = None,
) -> tuple[GroupOffsets, ...]:
    """:func:`group_offsets` in each of ``flows``; every cluster of the flows probed once, all at once, however
    many flows share it."""
    reaches = probing(ctx, (a for f in flows for a in (f.source, f.target)))
    return tuple(group_offsets(ctx, f, group, as_of, version, reaches) for f in flows)
