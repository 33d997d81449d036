"""The whole configuration: one model over the component models, and the checks across components.

Invariant: a :class:`DrkitConfig` that exists is valid as a whole: every component checked alone
(:mod:`~drkit.config.clusters`, :mod:`~drkit.config.flows` and their sections, :mod:`~drkit.config.state`,
:mod:`~drkit.config.spark`) and across components (flows name defined clusters, are not duplicated, work
among the clusters, and form no topology :mod:`drkit.core.flows` refuses). Cross-field errors carry their
dotted key.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from drkit.config.base import ConfigModel, KeyedError
from drkit.config.clusters import ClusterConfig, check_aliases
from drkit.config.flows import FlowConfig, flow_problem
from drkit.config.spark import SparkConfig
from drkit.config.state import StateConfig
from drkit.config.topology import topology_problem
from drkit.core.heartbeat import HEARTBEAT_TOPIC
from drkit.core.selection import NameSelector, topic_selector
from drkit.core.storage import CACHE_ENV, DEFAULT_CACHE, RootUri, parse_root
from drkit.errors import ConfigError


class MetricsConfig(ConfigModel):
    """Prometheus metrics of the mirror and checkpoint processes (off unless a port is set)."""

    port: int | None = Field(default=None, ge=1, le=65535)
    host: str = "127.0.0.1"


class DrkitConfig(ConfigModel):
    """The whole configuration. Build it with :func:`load_config`."""

    clusters: dict[str, ClusterConfig]
    flows: list[FlowConfig] = Field(default_factory=list)
    state: StateConfig = Field(default_factory=StateConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    #: Where the file was loaded from; relative state paths are resolved against its folder.
    source_path: str | None = None

    @field_validator("clusters")
    @classmethod
    def _aliases(cls, value: dict[str, ClusterConfig]) -> dict[str, ClusterConfig]:
        return check_aliases(value)

    @model_validator(mode="after")
    def _flows(self) -> DrkitConfig:
        seen: set[str] = set()
        for i, flow in enumerate(self.flows):
            for side in ("source", "target"):
                alias = getattr(flow, side)
                if alias not in self.clusters:
                    raise KeyedError(
                        f"flows[{i}].{side}",
                        f"unknown cluster {alias!r}; defined clusters: {', '.join(sorted(self.clusters))}",
                    )
            if flow.source == flow.target:
                raise KeyedError(f"flows[{i}].target", f"a flow cannot mirror cluster {flow.source!r} to itself")
            if flow.name in seen:
                raise KeyedError(f"flows[{i}]", f"flow {flow.name} is defined twice")
            seen.add(flow.name)
            self._check_joined_patterns(i, flow)
            problem = flow_problem(i, flow, self.clusters, self.topic_selector(flow, heartbeats=False))
            if problem:
                raise KeyedError(*problem)
        # Without the heartbeat topic: heartbeats of many sources share one topic safely (keyed by flow).
        problem = topology_problem(self.flows, [self.topic_selector(f, heartbeats=False) for f in self.flows])
        if problem:
            raise KeyedError(*problem)
        return self

    def _check_joined_patterns(self, i: int, flow: FlowConfig) -> None:
        # Each pattern was checked alone; this checks them as drkit joins them (with its exclusions).
        for part, selector in (("topics", self.topic_selector(flow)), ("groups", flow.group_selector())):
            try:
                re.compile(selector.pattern)
            except re.error as exc:
                raise KeyedError(f"flows[{i}].{part}", f"the patterns joined are not valid: {exc.msg}") from None

    def flow(self, name: str | None) -> FlowConfig:
        """The flow called ``name`` (``A->B``); with None, the only flow there is."""
        if name is None:
            if len(self.flows) != 1:
                names = ", ".join(f.name for f in self.flows) or "none"
                raise ConfigError(f"choose a flow with --flow (defined: {names})")
            return self.flows[0]
        for flow in self.flows:
            if flow.name == name.replace(" ", ""):
                return flow
        names = ", ".join(f.name for f in self.flows) or "none"
        raise ConfigError(f"unknown flow {name!r}; defined flows: {names}")

    def flows_named(self, name: str | None) -> list[FlowConfig]:
        """All flows, or the one named."""
        return list(self.flows) if name is None else [self.flow(name)]

    def topic_selector(self, flow: FlowConfig, heartbeats: bool = True) -> NameSelector:
        """The source topics ``flow`` mirrors: never internal topics, never copies of its target's; with
        heartbeats on, the heartbeat topic too (its copy is how the target measures replication)."""
        include = list(flow.topics.include)
        if heartbeats and flow.heartbeats.interval_seconds > 0:
            include.append(re.escape(HEARTBEAT_TOPIC))
        return topic_selector(include, flow.topics.exclude, flow.policy(), flow.target, frozenset(self.clusters))

    def reverse_of(self, flow: FlowConfig) -> FlowConfig | None:
        """The flow that copies ``flow``'s target back to its source, if one is configured."""
        return next((f for f in self.flows if f.source == flow.target and f.target == flow.source), None)

    def state_uri(self) -> RootUri | None:
        """The state root when it is in an object store (None: a local folder, :meth:`state_root`)."""
        found = parse_root(self.state.root)
        return found if isinstance(found, RootUri) else None

    def state_root(self) -> Path:
        """The local folder of the state: the root itself, or for an object-store root this host's own
        folder for it (locks, PID files, logs: what only means something on one host)."""
        uri = self.state_uri()
        if uri is None:
            return self._local(str(parse_root(self.state.root)))
        if self.state.local_dir is not None:
            return self._local(self.state.local_dir)
        cache = Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()
        return (cache / "roots" / uri.digest).resolve()

    def _local(self, text: str) -> Path:
        root = Path(text).expanduser()
        if not root.is_absolute() and self.source_path:
            root = Path(self.source_path).parent / root
        return root.resolve()
