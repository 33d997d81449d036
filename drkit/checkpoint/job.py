"""The checkpoint translator of one flow: read, translate, append changes, optionally sync.

One run: list the source's consumer groups the flow selects, read their committed offsets,
translate them with the flow's offset-syncs (reloaded only when the ``offset_syncs`` table has a
new version), append the checkpoints that changed, and record when the run finished (status
reads that file to report the checkpoint lag). With ``sync_group_offsets`` it also commits the
translated offsets to the target's groups that have no active members, never moving one back.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drkit import metrics
from drkit.config import DrkitConfig, FlowConfig
from drkit.core.checkpoints import Checkpoint, CheckpointPlan, Finding, plan_checkpoints
from drkit.core.selection import group_selector, topic_selector
from drkit.core.translate import SyncIndex
from drkit.errors import ClusterError
from drkit.kafka import clients, groups
from drkit.mirror.job import flow_dir_name
from drkit.store.checkpoints import CheckpointStore
from drkit.store.offset_syncs import OffsetSyncStore, SyncIndexCache
from drkit.store.tables import Tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass
class CheckpointRun:
    flow: str
    groups: int = 0
    checkpoints: int = 0
    appended: int = 0
    synced_groups: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    finished_at_ms: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow, "groups": self.groups, "checkpoints": self.checkpoints, "appended": self.appended,
            "synced_groups": self.synced_groups, "seconds": round(self.seconds, 3),
            "finished_at_ms": self.finished_at_ms,
            "findings": [{"kind": f.kind.value, "group": f.group, "topic": f.topic, "partition": f.partition,
                          "detail": f.detail} for f in self.findings],
        }


def last_run_path(config: DrkitConfig, flow: FlowConfig) -> Path:
    return config.state_root() / "checkpoint" / flow_dir_name(flow) / "last_run.json"


def source_ends_path(config: DrkitConfig, flow: FlowConfig) -> Path:
    return config.state_root() / "checkpoint" / flow_dir_name(flow) / "source_ends.json"


def read_source_ends(config: DrkitConfig, flow: FlowConfig) -> tuple[int, dict[tuple[str, int], int]] | None:
    """(epoch ms observed, {(topic, partition): end offset}) of the last observation, if any."""
    try:
        data = json.loads(source_ends_path(config, flow).read_text())
    except (OSError, ValueError):
        return None
    ends = {(k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1])): int(v) for k, v in data["ends"].items()}
    return int(data["at_ms"]), ends


def read_last_run(config: DrkitConfig, flow: FlowConfig) -> dict[str, Any] | None:
    path = last_run_path(config, flow)
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


class CheckpointJob:
    def __init__(self, config: DrkitConfig, flow: FlowConfig, spark: SparkSession) -> None:
        self.config = config
        self.flow = flow
        tables = Tables(config.state_root())
        self.syncs = OffsetSyncStore(spark, tables)
        self.store = CheckpointStore(spark, tables)
        self.groups = group_selector(flow.groups.include, flow.groups.exclude)
        self.topics = topic_selector(flow.topics.include, flow.topics.exclude, flow.policy(), flow.target,
                                     frozenset(config.clusters))
        self.policy = flow.policy()
        self.sync_cache = SyncIndexCache(self.syncs, flow.name)
        self._previous: dict[tuple[str, str, int], Checkpoint] | None = None

    def indexes(self) -> dict[tuple[str, int], SyncIndex]:
        """The flow's syncs per partition, updated with only the rows appended since the last run."""
        return self.sync_cache.indexes()

    def run_once(self) -> CheckpointRun:
        started = time.monotonic()
        run = CheckpointRun(self.flow.name)
        source = self.config.clusters[self.flow.source]
        admin = clients.admin(source, self.flow.source)
        selected = self.groups.select(groups.list_groups(admin, self.flow.source))
        committed = {g: groups.committed_offsets(admin, self.flow.source, g) for g in selected}
        self._observe_source_ends(admin)
        self.store.ensure()
        if self._previous is None:
            self._previous = {r.checkpoint.key: r.checkpoint for r in self.store.latest(self.flow.name)}
        topics = {c.topic for offsets in committed.values() for c in offsets}
        topic_map = {t: self.policy.target_topic(self.flow.source, t) for t in self.topics.select(topics)}
        plan = plan_checkpoints(self.flow.name, committed, topic_map, self.indexes(), self._previous)
        run.appended = self.store.append(plan.changed)
        self._previous.update({c.key: c for c in plan.changed})
        if self.flow.checkpoint.sync_group_offsets:
            run.synced_groups = self.sync_target_groups(plan)
        run.groups = len(selected)
        run.checkpoints = len(plan.current)
        run.findings = plan.findings
        run.seconds = time.monotonic() - started
        metrics.CHECKPOINT_RUNS.labels(self.flow.name).inc()
        metrics.CHECKPOINT_SECONDS.labels(self.flow.name).observe(run.seconds)
        metrics.CHECKPOINT_APPENDED.labels(self.flow.name).inc(run.appended)
        metrics.CHECKPOINT_LAST_SUCCESS.labels(self.flow.name).set_to_current_time()
        run.finished_at_ms = int(datetime.now(UTC).timestamp() * 1000)
        self._record(run)
        return run

    def sync_target_groups(self, plan: CheckpointPlan) -> list[str]:
        """Commit translated offsets to target groups that have no members; never move one back."""
        target = self.config.clusters[self.flow.target]
        admin = clients.admin(target, self.flow.target)
        by_group: dict[str, list[Checkpoint]] = {}
        for c in plan.current:
            if c.downstream_offset is not None:
                by_group.setdefault(c.group, []).append(c)
        states = groups.describe(admin, self.flow.target, by_group)
        synced = []
        for group, checkpoints in sorted(by_group.items()):
            state = states.get(group)
            if state is not None and state.active:
                log.info("flow %s: group %s is active on %s; not syncing its offsets", self.flow.name, group,
                         self.flow.target)
                continue
            current = groups.offsets_of(admin, self.flow.target, group)
            forward = {
                (c.target_topic, c.partition): c.downstream_offset
                for c in checkpoints
                if c.downstream_offset is not None
                and c.downstream_offset > current.get((c.target_topic, c.partition), -1)
            }
            if forward:
                groups.commit_offsets(admin, self.flow.target, group, forward)
                synced.append(group)
        return synced

    def _observe_source_ends(self, admin: Any) -> None:
        """Record the source's end offsets of the mirrored topics: after the source is lost, this last
        observation is what tells failover how many records the mirror had not copied (RPO)."""
        from drkit.kafka.topics import end_offsets, partition_counts

        counts = partition_counts(admin, self.flow.source)
        selected = {t: counts[t] for t in self.topics.select(counts)}
        ends = end_offsets(admin, self.flow.source, selected)
        path = source_ends_path(self.config, self.flow)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"at_ms": int(datetime.now(UTC).timestamp() * 1000),
                                   "ends": {f"{t}/{p}": o for (t, p), o in ends.items()}}))
        tmp.replace(path)

    def _record(self, run: CheckpointRun) -> None:
        path = last_run_path(self.config, self.flow)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"finished_at_ms": run.finished_at_ms, "seconds": run.seconds,
                                   "groups": run.groups, "checkpoints": run.checkpoints, "appended": run.appended}))
        tmp.replace(path)


class CheckpointRunner:
    """Runs the jobs of one or more flows once, or every ``interval`` seconds until stopped."""

    def __init__(self, config: DrkitConfig, flows: list[FlowConfig], spark: SparkSession) -> None:
        self.jobs = [CheckpointJob(config, f, spark) for f in flows]
        self.stopped = threading.Event()

    def run(self, once: bool, interval: float | None = None, max_runs: int | None = None) -> list[CheckpointRun]:
        if once:
            return [job.run_once() for job in self.jobs]
        import signal

        runs: list[CheckpointRun] = []
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        if threading.current_thread() is threading.main_thread():
            for s in previous:
                signal.signal(s, lambda *_: self.stopped.set())
        try:
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
        finally:
            if threading.current_thread() is threading.main_thread():
                for s, handler in previous.items():
                    signal.signal(s, handler)
        return runs[-len(self.jobs):] if runs else []
