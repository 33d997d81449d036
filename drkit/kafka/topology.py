"""One reconciliation of a flow's topics, against the real clusters: describe both sides, let
drkit.core.topology plan, apply the plan on the target (create, grow, configure; never delete).

The mirror runs it every ``refresh_interval_seconds`` and whenever a batch holds a topic or a partition
the target does not have yet; ``drkit topics sync`` runs it once (``--dry-run``: plan only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from drkit.config import FlowConfig
from drkit.core.acls import plan_acls
from drkit.core.heartbeat import HEARTBEAT_TARGET_CONFIGS, HEARTBEAT_TOPIC
from drkit.core.origin import origin_overhead
from drkit.core.selection import NameSelector
from drkit.core.topology import (
    SourceTopic,
    TargetTopic,
    TopologyPlan,
    config_filter,
    plan_topology,
    target_record_limits,
)
from drkit.errors import ClusterError
from drkit.kafka import topics
from drkit.kafka.acls import create_acls, topic_acls
from drkit.kafka.admin import KafkaAdmin


@dataclass(frozen=True)
class AppliedTopology:
    """What one reconciliation changed on the target."""

    plan: TopologyPlan
    created: tuple[str, ...]
    grown: tuple[str, ...]
    configured: tuple[str, ...]
    source_topics: tuple[SourceTopic, ...]
    acls_created: int = 0  # the selected source topics as described (partitions, ids)
    #: Each routed target topic's max.message.bytes once the plan is applied, where set on the topic.
    record_limits: Mapping[str, int] = field(default_factory=dict)


def _pinned(topic: str) -> dict[str, str]:
    """The heartbeat topic's copy keeps the target's append time: how the target measures latency alone."""
    return dict(HEARTBEAT_TARGET_CONFIGS) if topic == HEARTBEAT_TOPIC else {}


class TopologyReconciler:
    """Describes, plans and applies one flow's topology; knows its clusters by alias."""

    def __init__(
        self,
        flow: FlowConfig,
        selector: NameSelector,
        source: KafkaAdmin,
        target: KafkaAdmin,
        owned: Callable[[], frozenset[str]],
        on_created: Callable[[list[str]], None],
    ) -> None:
        self.flow = flow
        self.selector = selector
        self.source = source
        self.target = target
        self.policy = flow.policy()
        self._owned = owned
        self._on_created = on_created
        self._copied = config_filter(flow.topology.config_exclude)

    def target_name(self, topic: str) -> str:
        return self.policy.target_topic(self.flow.source, topic)

    def plan(self, mirrored_before: Iterable[str] = (), only: Iterable[str] | None = None) -> TopologyPlan:
        """Describe both clusters and plan; ``only`` limits the reconciliation to some source topics (a
        batch that needs them now), skipping configs."""
        return self._plan(mirrored_before, only)[0]

    def _plan(
        self, mirrored_before: Iterable[str], only: Iterable[str] | None
    ) -> tuple[TopologyPlan, tuple[SourceTopic, ...], dict[str, int]]:
        sync_configs = self.flow.topology.sync_configs and only is None
        names = self.selector.select(self.source.partition_counts()) if only is None else sorted(set(only))
        described = topics.describe_topics(self.source.client, self.source.alias, names, configs=sync_configs)
        selected = tuple(described.values())
        counts = self.target.partition_counts()
        wanted = [self.target_name(t.name) for t in selected]
        existing = [n for n in wanted if n in counts]
        configs = self._target_configs(existing, sync_configs) if only is None and existing else {}
        target_topics = {n: TargetTopic(n, counts[n], configs.get(n, {})) for n in existing}
        plan = plan_topology(
            self.flow.name,
            self.flow.target,
            selected,
            target_topics,
            self.target_name,
            self._owned(),
            self._copied,
            sync_configs,
            mirrored_before if only is None else (),
            _pinned,
            origin_overhead(self.flow.source),
        )
        if self.flow.topology.sync_acls and only is None:
            acls = plan_acls(
                topic_acls(self.source.client, self.source.alias),
                topic_acls(self.target.client, self.target.alias),
                [t.name for t in selected if t.name in plan.routes],
                self.target_name,
            )
            plan = replace(plan, acls=acls)
        return plan, selected, target_record_limits(plan, target_topics)

    def _target_configs(self, existing: list[str], sync_configs: bool) -> dict[str, dict[str, str]]:
        """The target topics' configs. Described on every full reconciliation, synced or not: their record
        limits bound the copy's producer batches (drkit.core.topology.producer_limits). Without config sync
        the mirror needs no right to describe them: refused, the limits stay unknown (librdkafka's defaults)."""
        try:
            return topics.topic_configs(self.target.client, self.target.alias, existing)
        except ClusterError:
            if sync_configs:
                raise
            return {}

    def reconcile(self, mirrored_before: Iterable[str] = (), only: Iterable[str] | None = None) -> AppliedTopology:
        """Plan and apply: create missing target topics, grow the ones drkit created, set changed configs."""
        plan, selected, limit = self._plan(mirrored_before, only)
        created: list[str] = []
        if plan.creates:
            created = topics.create_topics(
                self.target.client, self.target.alias, plan.creates, self.flow.mirror.target_replication_factor
            )
            self._on_created(created)
        grown = topics.create_partitions(self.target.client, self.target.alias, plan.growths)
        configured = topics.alter_configs(self.target.client, self.target.alias, plan.config_changes)
        granted = create_acls(self.target.client, self.target.alias, plan.acls)
        return AppliedTopology(plan, tuple(created), tuple(grown), tuple(configured), selected, granted, limit)
