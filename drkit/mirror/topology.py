"""The running mirror's view of its flow's topology, kept in step with the source.

A background thread reconciles every ``refresh_interval_seconds`` (drkit.kafka.topology: new topics
created on the target, partitions added, configs propagated). A batch never waits for it: before a batch
copies, ``prepare`` makes sure every topic and partition the batch holds has its target, reconciling those
topics at once when one is missing (Spark's Kafka source sees a new topic or partition at its next
trigger, possibly before the thread does). A topic whose target cannot hold it is refused on its own; the
batch holds it (drkit.core.batch) and the other topics keep flowing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from drkit.core.topology import TopicIssue, TopicIssueKind, TopologyPlan, topics_to_prepare
from drkit.errors import DrkitError
from drkit.kafka import topics
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.topology import AppliedTopology, TopologyReconciler
from drkit.mirror.ports import MirrorStateLog

log = logging.getLogger(__name__)


class TopologyFollower:
    def __init__(
        self, flow_name: str, reconciler: TopologyReconciler, files: MirrorStateLog, interval: float, source: KafkaAdmin
    ) -> None:
        self.flow = flow_name
        self.reconciler = reconciler
        self.files = files
        self.interval = interval
        self.source = source
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self.routes: dict[str, str] = {}  # source topic -> target topic, for topics that may be copied
        self.target_partitions: dict[str, int] = {}  # target topic -> partitions it has (as last known)
        self.refused: frozenset[str] = frozenset()
        self.issues: tuple[TopicIssue, ...] = ()
        self.mirrored: set[str] = set()  # source topics this mirror copied (a missing one was deleted)
        self.created: set[str] = set()  # target topics created by this run
        self.refreshes = 0
        #: target topic -> its max.message.bytes where set (as last known): the copy's producer limits.
        self.record_limits: dict[str, int] = {}
        self.last_error: str | None = None

    # -- the thread ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self.interval > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"drkit-topology-{self.flow}", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._closed.set()

    def _loop(self) -> None:
        while not self._closed.wait(self.interval):
            try:
                self.refresh()
            except DrkitError as exc:  # a source or target that does not answer: the batches say so
                if str(exc) != self.last_error:
                    log.warning("flow %s: topology not refreshed: %s", self.flow, exc)
                self.last_error = str(exc)
            except Exception as exc:  # the refresh must never stop the mirror
                log.warning("flow %s: topology not refreshed: %s", self.flow, exc)

    # -- reconciliation -----------------------------------------------------------------------------

    def warm(self) -> None:
        """Plan the flow's topology without applying it (a standby's preparation: both clusters' admin clients
        connected, nothing changed)."""
        with self._lock:
            self.reconciler.plan(self.mirrored)

    def refresh(self) -> AppliedTopology:
        """A full reconciliation of the flow: every selected topic, configs included."""
        with self._lock:
            applied = self.reconciler.reconcile(self.mirrored)
            self._learn(applied.plan, full=True)
            self._ready(applied)
            self.refreshes += 1
            self.last_error = None
            return applied

    def _learn(self, plan: TopologyPlan, full: bool) -> None:
        for c in plan.creates:
            self.target_partitions[c.target] = c.partitions
            self.created.add(c.target)
            log.info("flow %s: created target topic %s (%d partitions)", self.flow, c.target, c.partitions)
        for g in plan.growths:
            self.target_partitions[g.target] = g.wanted
            log.info(
                "flow %s: target topic %s grown from %d to %d partitions", self.flow, g.target, g.current, g.wanted
            )
        for change in plan.config_changes:
            log.info(
                "flow %s: target topic %s configs set: %s", self.flow, change.target, ", ".join(sorted(change.set))
            )
        refused = {i.source for i in plan.issues if i.kind is TopicIssueKind.TARGET_TOO_SMALL}
        if full:
            self.routes = dict(plan.routes)
            self.refused = frozenset(refused)
            issues = plan.issues
        else:
            self.routes.update(plan.routes)
            examined = set(plan.routes) | refused
            self.refused = frozenset((self.refused - examined) | refused)
            issues = tuple(i for i in self.issues if i.source not in examined) + plan.issues
        for issue in issues:
            if issue not in self.issues:
                log.warning("flow %s: %s", self.flow, issue.detail)
        self.issues = issues
        self.files.write_findings(self.flow, int(time.time() * 1000), issues)

    def _ready(self, applied: AppliedTopology) -> None:
        """A routed topic's target holds at least its source's partitions once the plan is applied."""
        self.record_limits.update(applied.record_limits)
        for t in applied.source_topics:
            target = applied.plan.routes.get(t.name)
            if target is not None:
                self.target_partitions[target] = max(self.target_partitions.get(target, 0), t.partitions)

    def prepare(self, partitions: Iterable[tuple[str, int]]) -> dict[str, str]:
        """Make sure each topic of ``partitions`` (the batch's) has a target with enough partitions, at
        once if needed; the topic ids of those topics as the source describes them now. Refused topics
        keep their refusal until a reconciliation finds their target grown."""
        wanted: dict[str, int] = {}
        for topic, partition in partitions:
            wanted[topic] = max(wanted.get(topic, 0), partition + 1)
        with self._lock:
            described = topics.describe_topics(self.source.client, self.source.alias, wanted, configs=False)
            missing = topics_to_prepare(
                wanted,
                {t: d.partitions for t, d in described.items()},
                self.routes,
                self.target_partitions,
                self.refused,
            )
            if missing:
                applied = self.reconciler.reconcile(only=missing)
                self._learn(applied.plan, full=False)
                self._ready(applied)
            self.mirrored |= {t for t in described if t not in self.refused}
            return {t: d.topic_id for t, d in described.items() if d.topic_id}
