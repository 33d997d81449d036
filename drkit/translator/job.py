"""The translator of one flow: committed offsets -> checkpoints; read, translate, append changes, sync.

One run: list the source's consumer groups the flow selects, read their committed offsets,
translate them with the flow's offset-syncs (reloaded only when the ``offset_syncs`` table has a
new version), append the checkpoints that changed, and record when the run finished (status
reads that file to report the checkpoint lag). With ``sync_group_offsets`` it also commits the
translated offsets to the target's groups that have no active members, never moving one back.

For partitions of which nothing was mirrored it reads the source's log start and end (after the
committed offsets, the start first) and the target partition's start: the core translates an offset
with nothing left to mirror after it to that start, and the checkpoint row keeps the verdict for a
failover without the source.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from drkit import metrics
from drkit.config import FlowConfig
from drkit.core.checkpoints import Checkpoint, CheckpointPlan, plan_checkpoints
from drkit.core.reports import TranslationRun
from drkit.core.status import EndsObservation
from drkit.core.translate import PartitionBounds, SyncIndex
from drkit.core.translator import confirmed_groups, forward_commits, translated_by_group, unmirrored_partitions
from drkit.errors import ClusterError
from drkit.layout import JobKind
from drkit.runtime.signals import stop_on_signals
from drkit.translator.context import TranslatorContext

if TYPE_CHECKING:
    from drkit.translator.follow import CommitFollower

log = logging.getLogger(__name__)


class TranslatorJob:
    def __init__(self, context: TranslatorContext, flow: FlowConfig) -> None:
        self.context = context
        self.config = context.config
        self.flow = flow
        self.syncs = context.syncs
        self.store = context.checkpoints
        self.runs = context.runs
        self.groups = flow.group_selector()
        self.topics = context.config.topic_selector(flow)
        self.source = context.clusters.admin(flow.source)
        self.target = context.clusters.admin(flow.target)
        self.policy = flow.policy()
        self.sync_cache = context.sync_indexes(flow.name)
        self._indexes_lock = threading.Lock()
        self._previous: dict[tuple[str, str, int], Checkpoint] | None = None

    def indexes(self) -> dict[tuple[str, int], SyncIndex]:
        """The flow's syncs per partition, updated with only the rows appended since the last run (one
        caller at a time: the commit follower's thread asks too)."""
        with self._indexes_lock:
            return self.sync_cache.indexes()

    def run_once(self) -> TranslationRun:
        started = time.monotonic()
        selected = self.groups.select(self.source.list_groups())
        # Before the read: a commit after this instant may be missing from what is read, so the checkpoints and
        # the confirmation are dated by it (a newer live checkpoint then wins: drkit.core.live_checkpoints).
        read_at = self.context.clock()
        committed = self.source.committed_offsets_many(selected)
        topics = {c.topic for offsets in committed.values() for c in offsets}
        topic_map = {t: self.policy.target_topic(self.flow.source, t) for t in self.topics.select(topics)}
        indexes = self.indexes()
        # After the committed offsets, and the starts before the ends (see PartitionBounds): a partition of
        # which nothing was mirrored translates only if the source holds nothing at or after the offset.
        unmirrored = unmirrored_partitions(committed, topic_map, indexes)
        starts = self.source.start_offsets(unmirrored) if unmirrored else {}
        ends = self._observe_source_ends()
        bounds = {key: PartitionBounds(start, ends[key]) for key, start in starts.items() if key in ends}
        target_starts = self.target.start_offsets({(topic_map[t], p) for t, p in bounds}) if bounds else {}
        self.store.ensure()
        if self._previous is None:
            self._previous = {r.checkpoint.key: r.checkpoint for r in self.store.latest(self.flow.name)}
        plan = plan_checkpoints(self.flow.name, committed, topic_map, indexes, self._previous, bounds, target_starts)
        appended = self.store.append(plan.changed, read_at)
        self._previous.update({c.key: c for c in plan.changed})
        synced = self.sync_target_groups(plan) if self.flow.checkpoint.sync_group_offsets else []
        run = TranslationRun(
            self.flow.name,
            len(selected),
            len(plan.current),
            appended,
            tuple(synced),
            tuple(plan.findings),
            time.monotonic() - started,
            self.context.now_ms(),
            int(read_at.timestamp() * 1000),
        )
        metrics.CHECKPOINT_RUNS.labels(self.flow.name).inc()
        metrics.CHECKPOINT_SECONDS.labels(self.flow.name).observe(run.seconds)
        metrics.CHECKPOINT_APPENDED.labels(self.flow.name).inc(run.appended)
        metrics.CHECKPOINT_LAST_SUCCESS.labels(self.flow.name).set_to_current_time()
        self._record(run, confirmed_groups(committed))
        return run

    def sync_target_groups(self, plan: CheckpointPlan) -> list[str]:
        """Commit translated offsets to target groups that have no members; never move one back."""
        by_group = translated_by_group(plan.current)
        states = self.target.describe_groups(by_group)
        synced = []
        for group, checkpoints in sorted(by_group.items()):
            state = states.get(group)
            if state is not None and state.active:
                log.info(
                    "flow %s: group %s is active on %s; not syncing its offsets",
                    self.flow.name,
                    group,
                    self.flow.target,
                )
                continue
            current = {(c.topic, c.partition): c.offset for c in self.target.committed_offsets(group) if c.offset >= 0}
            forward = forward_commits(checkpoints, current)
            if forward:
                self.target.commit_offsets(group, forward)
                synced.append(group)
        return synced

    def _observe_source_ends(self) -> dict[tuple[str, int], int]:
        """Record the source's end offsets of the mirrored topics: after the source is lost, this last
        observation is what tells failover how many records the mirror had not copied (RPO)."""
        counts = self.source.partition_counts()
        ends = self.source.end_offsets({t: counts[t] for t in self.topics.select(counts)})
        observation = EndsObservation(self.context.now_ms(), ends)
        self.runs.observe_source_ends(JobKind.TRANSLATOR, self.flow.name, observation)
        return ends

    def _record(self, run: TranslationRun, confirmed: list[str]) -> None:
        """The run file: when this run finished, and the groups whose checkpoints it confirmed as current
        (an idle group's checkpoint is as fresh as the last run that read its offsets, not its last change)."""
        self.runs.record_run(run, tuple(confirmed))


class TranslatorRunner:
    """Runs the jobs of one or more flows once, or every ``interval`` seconds until stopped."""

    def __init__(self, context: TranslatorContext, flows: list[FlowConfig]) -> None:
        self.jobs = [TranslatorJob(context, f) for f in flows]
        self.stopped = threading.Event()
        #: Set when the continuous run ends (a signal sets ``stopped``): the followers stop with it.
        self.follow_stopped = threading.Event()
        #: The commit followers started by the continuous run (their ``mode``: which way each flow follows).
        self.followers: list[CommitFollower] = []

    def run(self, once: bool, interval: float | None = None, max_runs: int | None = None) -> list[TranslationRun]:
        if once:
            return [job.run_once() for job in self.jobs]
        runs: list[TranslationRun] = []
        followers = self.start_followers()
        try:
            with stop_on_signals(self.stopped):
                runs = self._loop(interval, max_runs)
        finally:
            self.follow_stopped.set()
            for thread in followers:
                thread.join()
        return runs[-len(self.jobs) :] if runs else []

    def start_followers(self) -> list[threading.Thread]:
        """A commit follower per flow with ``follow_commits`` (drkit.translator.follow), each in its thread."""
        from drkit.translator.follow import CommitFollower

        context = self.jobs[0].context if self.jobs else None
        if context is None or context.commit_tail is None or context.checkpoint_topic is None:
            return []
        threads = []
        for job in self.jobs:
            if not job.flow.checkpoint.follow_commits:
                metrics.CHECKPOINT_FOLLOW_MODE.labels(job.flow.name).set(0)
                continue
            follower = CommitFollower(
                job, context.commit_tail(job.flow.source), context.checkpoint_topic(job.flow.target)
            )
            self.followers.append(follower)
            thread = threading.Thread(
                target=follower.run, args=(self.follow_stopped,), name=f"follow-{job.flow.name}", daemon=True
            )
            thread.start()
            threads.append(thread)
        return threads

    def _loop(self, interval: float | None, max_runs: int | None) -> list[TranslationRun]:
        runs: list[TranslationRun] = []
        n = 0
        while not self.stopped.is_set() and (max_runs is None or n < max_runs):
            for job in self.jobs:
                try:
                    runs.append(job.run_once())
                except ClusterError as exc:  # keep going: the source may come back
                    metrics.ERRORS.labels(job.flow.name, "checkpoint").inc()
                    log.error("flow %s: %s", job.flow.name, exc)
            n += 1
            wait = interval if interval is not None else min(j.flow.checkpoint.interval_seconds for j in self.jobs)
            self.stopped.wait(wait)
        return runs
