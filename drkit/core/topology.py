"""Following the source's topology: which target topics to create or grow, which configs to set, and
which topics cannot be mirrored as they are.

A target topic mirrors one source topic partition for partition (a record keeps its partition number),
so a target topic needs at least as many partitions as its source. drkit grows the target topics it
created itself; a target topic it did not create and that has too few partitions is refused, for that
topic only: growing someone else's topic changes where their keyed records land. Topic configs are
copied from the source, except the properties in the exclude list (``CONFIG_EXCLUDE_DEFAULT``, each
with its reason), which describe the source cluster's own brokers, durability or storage; a copied
``max.message.bytes`` is raised by the bytes the origin header adds to each record, so that a record at
the source topic's limit fits its copy. drkit never
deletes a target topic, nor a config of one.

Everything here is a pure function of what was described on both clusters; the mirror and ``drkit
topics sync`` apply the plan.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from drkit.core.acls import AclCopy

#: Topic properties never copied to the target unless the flow's ``config_exclude`` says otherwise:
#: (full-match regex, why). Following MirrorMaker 2's ``config.properties.exclude``, plus the remote
#: storage settings.
CONFIG_EXCLUDE_DEFAULT: tuple[tuple[str, str], ...] = (
    (
        r"min\.insync\.replicas",
        "a durability choice tied to the cluster's broker count: the target may have fewer brokers, and a "
        "copied value higher than its replication factor makes every write to the copy fail",
    ),
    (
        r"(leader|follower)\.replication\.throttled\.replicas",
        "lists partition:broker-id pairs of the source cluster's reassignments; on the target they name "
        "other brokers or none",
    ),
    (
        r"message\.timestamp\..*",
        "the mirror keeps each record's source timestamp: a 'before/after/difference max ms' limit tuned "
        "for live producers would reject records copied late (after an outage), and LogAppendTime would "
        "replace the source timestamps",
    ),
    (
        r"unclean\.leader\.election\.enable",
        "the target's own trade-off between availability and durability",
    ),
    (
        r"remote\.storage\.enable|remote\.log\..*|local\.retention\.(ms|bytes)",
        "tiered storage belongs to the target cluster's storage setup (a topic cannot enable it where the "
        "brokers have no remote storage)",
    ),
)


#: The topic property bounding a record batch's size on a broker.
MAX_MESSAGE_BYTES = "max.message.bytes"
#: The largest value a broker accepts for it (a Java int).
MAX_MESSAGE_BYTES_CEILING = 2**31 - 1


def raised_limit(configs: Mapping[str, str], headroom: int) -> dict[str, str]:
    """``configs`` with ``max.message.bytes`` (when set) raised by ``headroom``: the bytes the copy adds to
    each record (its origin header), so that a record at the source topic's limit fits its copy. Unchanged
    when the property is not set (the target broker's default applies) or not a number."""
    value = configs.get(MAX_MESSAGE_BYTES)
    if value is None or not headroom or not value.isascii() or not value.isdigit():
        return dict(configs)
    return {**configs, MAX_MESSAGE_BYTES: str(min(MAX_MESSAGE_BYTES_CEILING, int(value) + headroom))}


#: librdkafka's producer limit on a request's record batch (``message.max.bytes``): its default, and the
#: most it accepts.
PRODUCER_MAX_BYTES_DEFAULT = 1_000_000
PRODUCER_MAX_BYTES_CEILING = 1_000_000_000


def _number(value: str | None) -> int | None:
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


def target_record_limits(plan: TopologyPlan, targets: Mapping[str, TargetTopic]) -> dict[str, int]:
    """Each routed target topic's ``max.message.bytes`` once ``plan`` is applied, where it is set on the topic
    (created or set by the plan, or found on the target); a topic under its broker's default is left out."""
    out: dict[str, int] = {}
    for target in plan.routes.values():
        existing = targets.get(target)
        value = _number(existing.configs.get(MAX_MESSAGE_BYTES)) if existing is not None else None
        if value is not None:
            out[target] = value
    for create in plan.creates:
        value = _number(create.configs.get(MAX_MESSAGE_BYTES))
        if value is not None:
            out[create.target] = value
    for change in plan.config_changes:
        value = _number(change.set.get(MAX_MESSAGE_BYTES))
        if value is not None:
            out[change.target] = value
    return out


def producer_limits(limits: Iterable[int]) -> dict[str, int]:
    """The copy's producer limits from the target topics' ``max.message.bytes``.

    ``message.max.bytes`` (what librdkafka accepts from one record, and at most per request's batch) makes
    room for a record at the largest limit: a record librdkafka refuses locally would never reach a broker
    that accepts it. ``batch.size`` keeps a batch of several records within the smallest limit: librdkafka
    sends a record larger than ``batch.size`` alone, so the broker sees a batch over a topic's limit only
    when one record is (then refused, in one line). Never below librdkafka's defaults for topics that set
    no limit, nor above its ceiling."""
    values = list(limits)
    largest = max(values, default=0)
    smallest = min(values, default=PRODUCER_MAX_BYTES_DEFAULT)
    return {
        "message.max.bytes": max(PRODUCER_MAX_BYTES_DEFAULT, min(PRODUCER_MAX_BYTES_CEILING, largest)),
        "batch.size": max(1, min(PRODUCER_MAX_BYTES_DEFAULT, smallest)),
    }


class TopicIssueKind(StrEnum):
    """Why a selected source topic is not (fully) mirrored."""

    #: The target topic exists, drkit did not create it, and it has fewer partitions than the source.
    TARGET_TOO_SMALL = "target_too_small"
    #: The source topic was mirrored and no longer exists on the source (deleted there).
    SOURCE_DELETED = "source_deleted"


@dataclass(frozen=True)
class SourceTopic:
    """A source topic as described: partitions, its Kafka topic id (the incarnation) and its configs that
    are not broker defaults."""

    name: str
    partitions: int
    topic_id: str = ""
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetTopic:
    """A target topic as described: partitions and its configs that are not broker defaults."""

    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicCreate:
    source: str
    target: str
    partitions: int
    configs: Mapping[str, str]


@dataclass(frozen=True)
class PartitionGrowth:
    source: str
    target: str
    current: int
    wanted: int


@dataclass(frozen=True)
class ConfigChange:
    """Properties to set on a target topic (incremental alter-configs, SET only)."""

    source: str
    target: str
    set: Mapping[str, str]
    previous: Mapping[str, str | None]  # the target's value of each property before (None: default)


@dataclass(frozen=True)
class TopicIssue:
    kind: TopicIssueKind
    source: str
    target: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "source": self.source, "target": self.target, "detail": self.detail}


@dataclass(frozen=True)
class TopologyPlan:
    """What one reconciliation of a flow does: create, grow, configure; and the topics it refuses."""

    flow: str
    creates: tuple[TopicCreate, ...] = ()
    growths: tuple[PartitionGrowth, ...] = ()
    config_changes: tuple[ConfigChange, ...] = ()
    issues: tuple[TopicIssue, ...] = ()
    #: source topic -> target topic of every selected topic that may be copied once the plan is applied.
    routes: Mapping[str, str] = field(default_factory=dict)
    #: Topic ACLs to create on the target (``sync_acls``; drkit.core.acls).
    acls: tuple[AclCopy, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.creates or self.growths or self.config_changes or self.acls)

    def refused(self) -> frozenset[str]:
        """Source topics whose records cannot be copied now (the others keep flowing)."""
        return frozenset(i.source for i in self.issues if i.kind is TopicIssueKind.TARGET_TOO_SMALL)

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "create": [
                {"source": c.source, "target": c.target, "partitions": c.partitions, "configs": dict(c.configs)}
                for c in self.creates
            ],
            "grow": [
                {"source": g.source, "target": g.target, "partitions_before": g.current, "partitions_after": g.wanted}
                for g in self.growths
            ],
            "configs": [
                {"source": c.source, "target": c.target, "set": dict(c.set), "previous": dict(c.previous)}
                for c in self.config_changes
            ],
            "issues": [i.as_dict() for i in self.issues],
            "acls": [a.as_dict() for a in self.acls],
        }


def _none(_topic: str) -> Mapping[str, str]:
    return {}


def config_filter(exclude: Iterable[str]) -> Callable[[str], bool]:
    """Whether a topic property is copied: it matches none of the ``exclude`` full-match regexes."""
    compiled = [re.compile(p) for p in exclude]
    return lambda name: not any(c.fullmatch(name) for c in compiled)


def copied_configs(source: Mapping[str, str], copied: Callable[[str], bool]) -> dict[str, str]:
    return {k: v for k, v in sorted(source.items()) if copied(k)}


def plan_topology(
    flow: str,
    target_alias: str,
    selected: Iterable[SourceTopic],
    target_topics: Mapping[str, TargetTopic],
    target_name: Callable[[str], str],
    owned: frozenset[str],
    copied: Callable[[str], bool],
    sync_configs: bool = True,
    mirrored_before: Iterable[str] = (),
    pinned: Callable[[str], Mapping[str, str]] | None = None,
    headroom: int = 0,
) -> TopologyPlan:
    """The reconciliation of one flow.

    ``selected``: the source topics the flow selects, as described now; ``target_topics``: every topic of
    the target; ``owned``: target topics drkit created (it grows only those); ``copied``: the config
    filter; ``mirrored_before``: source topics the flow has copied (a missing one was deleted on the
    source: an issue of its own, never a deletion on the target); ``pinned``: configs a source topic's target
    gets whatever the source and the filter say (the heartbeat copy's LogAppendTime); ``headroom``: the bytes
    the copy adds to a record, by which a copied ``max.message.bytes`` is raised (:func:`raised_limit`).
    """
    creates: list[TopicCreate] = []
    growths: list[PartitionGrowth] = []
    changes: list[ConfigChange] = []
    issues: list[TopicIssue] = []
    routes: dict[str, str] = {}
    present: set[str] = set()
    for topic in sorted(selected, key=lambda t: t.name):
        present.add(topic.name)
        target = target_name(topic.name)
        wanted = raised_limit(copied_configs(topic.configs, copied), headroom) | dict((pinned or _none)(topic.name))
        existing = target_topics.get(target)
        if existing is None:
            creates.append(TopicCreate(topic.name, target, topic.partitions, wanted))
            routes[topic.name] = target
            continue
        if existing.partitions < topic.partitions:
            if target not in owned:
                issues.append(
                    TopicIssue(
                        TopicIssueKind.TARGET_TOO_SMALL,
                        topic.name,
                        target,
                        f"target topic {target} on {target_alias} has {existing.partitions} partitions and source "
                        f"topic {topic.name} has {topic.partitions}; drkit did not create {target}, so it does not "
                        f"grow it: add partitions to it (at least {topic.partitions}) and the mirror copies "
                        f"{topic.name} from where it stopped",
                    )
                )
                continue
            growths.append(PartitionGrowth(topic.name, target, existing.partitions, topic.partitions))
        routes[topic.name] = target
        if sync_configs:
            differing = {k: v for k, v in wanted.items() if existing.configs.get(k) != v}
            if differing:
                previous = {k: existing.configs.get(k) for k in differing}
                changes.append(ConfigChange(topic.name, target, differing, previous))
    for gone in sorted(set(mirrored_before) - present):
        target = target_name(gone)
        issues.append(
            TopicIssue(
                TopicIssueKind.SOURCE_DELETED,
                gone,
                target,
                f"source topic {gone} was deleted; its copy {target} and its offset-syncs are kept (drkit never "
                f"deletes them); a topic created again under this name is copied from its start",
            )
        )
    return TopologyPlan(flow, tuple(creates), tuple(growths), tuple(changes), tuple(issues), routes)


def topics_to_prepare(
    needed: Mapping[str, int],
    source_partitions: Mapping[str, int],
    routes: Mapping[str, str],
    target_partitions: Mapping[str, int],
    refused: frozenset[str],
) -> list[str]:
    """The topics a batch needs reconciled before it copies: ``needed`` maps each of its topics to the partitions
    it reads (highest + 1); a topic without a route, whose target holds fewer partitions than the batch or the
    source has, or that is refused (its target may have been grown since), is reconciled at once. A topic the
    source no longer lists is left out (deleted meanwhile: nothing to create)."""
    out: list[str] = []
    for topic, count in sorted(needed.items()):
        if topic not in source_partitions:
            continue
        target = routes.get(topic)
        wanted = max(count, source_partitions[topic])
        if topic in refused or target is None or target_partitions.get(target, 0) < wanted:
            out.append(topic)
    return out
