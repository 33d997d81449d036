"""The flows of the config (``[[flows]]``): what each copies from which cluster to which, and its checks.

Invariant: a :class:`FlowConfig` that exists has a separator Kafka allows in topic names and valid
sections (:mod:`drkit.config.flow_settings`); :func:`flow_problem` finds what a flow valid on its own
cannot do among the configured clusters. Each check returns ``(dotted key, reason)`` or None and quotes
no value that could be secret (cluster aliases and topic names are not). What it refuses and why:

- names the replication policy would turn into topic names Kafka refuses: a separator with characters
  Kafka does not allow, a literal topic include whose copy (``A.<topic>``) is longer than 249 characters,
  the heartbeat topic's copy;
- a ``prefix`` separator that occurs inside a cluster alias: the origin of ``us-east.orders`` could not
  be told with separator ``-`` (read as from ``us``), so copies would go round two-way flows;
- selections that select nothing: an empty ``include`` list, an empty pattern, an exclude of everything,
  plain-text includes the flow's ``exclude`` removes all of (one of several is a deliberate pause), a
  plain-text include drkit itself never selects (an internal topic, a copy of the target's, drkit's own
  groups);
- a flow between two aliases of one cluster (the same bootstrap servers): it would copy into itself.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from drkit.config.base import ConfigModel
from drkit.config.clusters import ClusterConfig
from drkit.config.fencing import FencingConfig
from drkit.config.flow_settings import CheckpointSettings, HeartbeatSettings, MirrorSettings, TopologySettings
from drkit.config.hooks import FlowHooks
from drkit.config.regex import Pattern
from drkit.core.flows import alternatives, literal_names
from drkit.core.heartbeat import HEARTBEAT_TOPIC
from drkit.core.policy import TOPIC_NAME_CHARS, ReplicationPolicy, policy_for, topic_name_problem
from drkit.core.selection import NameSelector, group_selector, topic_selector

#: Exclude patterns that match every name.
_EVERYTHING = frozenset({".*", ".+", ".*?", ".+?", "(.*)", "(.+)", "^.*$", "^.+$", "(?s:.*)", "(?s).*"})


class Selection(ConfigModel):
    """Names selected by full-match regular expressions: included and not excluded."""

    include: list[Pattern] = Field(default_factory=lambda: [".*"])
    exclude: list[Pattern] = Field(default_factory=list)


class FlowConfig(ConfigModel):
    """One replication flow, ``source -> target``."""

    source: str
    target: str
    topics: Selection = Field(default_factory=Selection)
    groups: Selection = Field(default_factory=Selection)
    replication_policy: Literal["prefix", "identity"] = "prefix"
    separator: str = Field(default=".", min_length=1)
    mirror: MirrorSettings = Field(default_factory=MirrorSettings)
    checkpoint: CheckpointSettings = Field(default_factory=CheckpointSettings)
    topology: TopologySettings = Field(default_factory=TopologySettings)
    heartbeats: HeartbeatSettings = Field(default_factory=HeartbeatSettings)
    hooks: FlowHooks = Field(default_factory=FlowHooks)
    fencing: FencingConfig = Field(default_factory=FencingConfig)

    @field_validator("separator")
    @classmethod
    def _separator(cls, value: str) -> str:
        problem = separator_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def policy(self) -> ReplicationPolicy:
        return policy_for(self.replication_policy, self.separator)

    def group_selector(self) -> NameSelector:
        """The consumer groups this flow translates (never drkit's own or Connect's)."""
        return group_selector(self.groups.include, self.groups.exclude)


def separator_problem(separator: str) -> str | None:
    """Why ``separator`` cannot be part of topic names, or None."""
    bad = next((c for c in separator if c not in TOPIC_NAME_CHARS), None)
    if bad is not None:
        return f"holds {bad!r}, which Kafka does not allow in topic names (only ASCII letters, digits, '.', '_', '-')"
    return None


def flow_problem(
    i: int,
    flow: FlowConfig,
    clusters: dict[str, ClusterConfig],
    topics: NameSelector,
) -> tuple[str, str] | None:
    """(key, reason) of the first way flow ``i`` cannot work on its own, or None.

    ``topics`` is the flow's topic selection as drkit builds it (with its own exclusions).
    """
    key = f"flows[{i}]"
    if _servers(clusters[flow.source]) == _servers(clusters[flow.target]):
        return (
            f"{key}.target",
            f"clusters {flow.source!r} and {flow.target!r} have the same bootstrap servers: the flow would copy "
            "a cluster into itself",
        )
    if flow.replication_policy == "prefix":
        inside = sorted(a for a in clusters if flow.separator in a)
        if inside:
            return (
                f"{key}.separator",
                f"the prefix separator occurs in cluster alias {inside[0]!r}, so the origin of a copied topic "
                "could not be told and copies could go round two-way flows; use a separator no alias holds",
            )
    copy = flow.policy().target_topic(flow.source, HEARTBEAT_TOPIC)
    problem = topic_name_problem(copy)
    if problem:
        return f"{key}.separator", f"the copies' names would be invalid: {copy[:40]}... {problem}"
    for part in ("topics", "groups"):
        selection = getattr(flow, part)
        if not selection.include:
            return (
                f"{key}.{part}.include",
                f"selects no {_NOUN[part]}; leave the key out to select every {_NOUN[part]}, or name some",
            )
        for j, pattern in enumerate(selection.exclude):
            if pattern in _EVERYTHING:
                return f"{key}.{part}.exclude[{j}]", f"excludes every {_NOUN[part]}, so the flow selects none"
        selector = topics if part == "topics" else flow.group_selector()
        own = _without_user_excludes(part, flow, clusters)
        plain = True  # every include is plain text: the selection is known, and may be known empty
        literals: list[str] = []
        for j, pattern in enumerate(selection.include):
            found = _include_problem(pattern, part, flow, own)
            if found:
                return f"{key}.{part}.include[{j}]", found
            names = literal_names(pattern)
            plain = plain and len(names) == len(alternatives(pattern))
            literals.extend(names)
        if plain and not any(selector.matches(name) for name in literals):
            return f"{key}.{part}.exclude", f"excludes every {_NOUN[part]} the flow includes, so it selects none"
    return None


_NOUN = {"topics": "topic", "groups": "consumer group"}


def _without_user_excludes(part: str, flow: FlowConfig, clusters: dict[str, ClusterConfig]) -> NameSelector:
    """The selection with drkit's own exclusions only (internal names, copies of the target's)."""
    if part == "groups":
        return group_selector(flow.groups.include, [])
    return topic_selector(flow.topics.include, [], flow.policy(), flow.target, frozenset(clusters))


def _include_problem(pattern: str, part: str, flow: FlowConfig, own: NameSelector) -> str | None:
    if pattern == "":
        return f"an empty pattern selects no {_NOUN[part]}"
    for name in literal_names(pattern):
        if not name:
            continue  # an empty alternative beside others selects nothing more; harmless
        if part == "topics":
            problem = topic_name_problem(name)
            if problem:
                return f"selects {name[:60]!r}, which is no valid Kafka topic name: it {problem}"
            copy = flow.policy().target_topic(flow.source, name)
            problem = topic_name_problem(copy)
            if problem:
                return f"the copy of {name[:40]!r} on {flow.target!r} would be no valid Kafka topic name: it {problem}"
        if not own.matches(name):
            # Excluded by drkit itself, whatever the flow's own exclude says (which may pause a topic on purpose).
            noun = "an internal name or a copy of the target's" if part == "topics" else "drkit's or Connect's own"
            return (
                f"selects {name[:60]!r}, which the flow never {'mirrors' if part == 'topics' else 'translates'}: {noun}"
            )
    return None


def _servers(cluster: ClusterConfig) -> frozenset[str]:
    return frozenset(s.strip().lower() for s in cluster.bootstrap_servers.split(","))
