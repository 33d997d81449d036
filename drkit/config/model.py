"""The pydantic model of drkit's configuration: one frozen model per component.

Invariant: a :class:`DrkitConfig` that exists is valid as a whole: every field checked alone (types,
bounds, patterns, properties) and across fields (flows name defined clusters, are not duplicated, and
form no topology :mod:`drkit.core.flows` refuses). Cross-field errors carry their dotted key.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drkit.config.properties import (
    _SPARK_MASTER,
    JAVA_ONLY_PROPERTIES,
    _check_client_properties,
    _flatten_properties,
    _PropertyError,
)
from drkit.config.regex import Pattern
from drkit.config.sanity import (
    MAX_ALIAS_LENGTH,
    MIN_INTERVAL_SECONDS,
    MIN_REFRESH_INTERVAL_SECONDS,
    address_problem,
    duplicate_alias,
    flow_problem,
    home_problem,
    interval_problem,
    separator_problem,
    shell_syntax_problem,
)
from drkit.config.topology import topology_problem
from drkit.core.exactly_once import TRANSACTION_SLOTS, Delivery
from drkit.core.heartbeat import HEARTBEAT_TOPIC
from drkit.core.policy import ReplicationPolicy, policy_for
from drkit.core.selection import NameSelector, group_selector, topic_selector
from drkit.core.storage import (
    CACHE_ENV,
    DEFAULT_CACHE,
    RootUri,
    StorageSettings,
    options_of,
    parse_root,
    storage_problem,
)
from drkit.core.topology import CONFIG_EXCLUDE_DEFAULT
from drkit.errors import ConfigError

_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
#: A port as Kafka reads it: ASCII digits only (Python's int() also takes '١٢٣' and '²').
_PORT = re.compile(r"[0-9]{1,5}")
#: Kafka stores a replication factor as a 16-bit number.
_MAX_REPLICATION_FACTOR = 32767


class _Model(BaseModel):
    # inf and nan read from TOML would pass every bound check (or fail it with a puzzling message).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Selection(_Model):
    """Names selected by full-match regular expressions: included and not excluded."""

    include: list[Pattern] = Field(default_factory=lambda: [".*"])
    exclude: list[Pattern] = Field(default_factory=list)


#: ``[clusters.<alias>] probe_timeout_seconds`` by default: a live broker answers a metadata request in
#: milliseconds, and status must answer within about three seconds with a cluster frozen.
PROBE_TIMEOUT_SECONDS = 2.0


class ClusterConfig(_Model):
    """One Kafka cluster: where it is and how clients connect to it."""

    bootstrap_servers: str = Field(min_length=1)
    #: librdkafka/Java-style client properties (security.protocol, sasl.*, ssl.*, ...).
    properties: dict[str, str] = Field(default_factory=dict)
    #: Seconds an operator command (status, offsets, failover, failback) waits for this cluster's first
    #: answer before it counts it unreachable (drkit.core.reach). Refused connections are known at once
    #: whatever this is; it bounds the wait on a broker that accepts connections and does not answer (frozen,
    #: partitioned). A first answer takes about eight round trips over SASL_SSL: raise it for a distant or
    #: overloaded cluster that answers slower than this.
    probe_timeout_seconds: float = Field(default=PROBE_TIMEOUT_SECONDS, ge=0.1, le=300)

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, value: str) -> str:
        servers = value.split(",")
        seen: dict[str, int] = {}
        for number, server in enumerate(servers, 1):
            host, sep, port = server.strip().rpartition(":")
            where = f"; entry {number} of {len(servers)} is not" if len(servers) > 1 else ""
            if port and not port.isascii():
                entry = f" of entry {number}" if len(servers) > 1 else ""
                raise ValueError(f"the port{entry} holds characters other than the ASCII digits 0-9")
            valid_host = bool(host) and not any(c.isspace() for c in host)
            if not sep or not valid_host or not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
                raise ValueError(f"expected host:port[,host:port...] with a port from 1 to 65535{where}")
            earlier = seen.setdefault(server.strip().lower(), number)
            if earlier != number:
                raise ValueError(f"entry {number} repeats entry {earlier}; name each server once")
        return value

    @field_validator("properties", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return _flatten_properties(value)

    @field_validator("properties")
    @classmethod
    def _known(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_client_properties(value, skip=JAVA_ONLY_PROPERTIES)


#: Batches of up to this many offsets are copied by the mirror's driver (``driver_copy_max_records``):
#: above ``max_offsets_per_trigger``'s default, so by default every batch whose start is known.
DRIVER_COPY_MAX_RECORDS = 1_000_000


class MirrorSettings(_Model):
    """Tuning of the mirror job of one flow."""

    trigger_interval_seconds: float = 1.0
    max_offsets_per_trigger: int | None = Field(default=100_000, gt=0)
    #: In local mode, a batch of at most this many planned offsets is read and copied by the driver itself
    #: (a streaming read: memory does not grow with the batch), without the Spark job of the copy tasks,
    #: whose fixed cost is most of a small batch's time; larger batches go to copy tasks. With a cluster
    #: master every batch is copied by tasks on the executors (drkit.core.copying). 0: always tasks.
    driver_copy_max_records: int = Field(default=DRIVER_COPY_MAX_RECORDS, ge=0)
    #: In local mode, the driver copies records as they arrive, ahead of the micro-batches, which record
    #: what the target acknowledged (drkit.mirror.continuous): tens of milliseconds from source to target
    #: instead of a trigger and a batch. false: each batch copies its own records. A one-shot run
    #: (``--once``) and a cluster master always copy per batch.
    continuous_copy: bool = True
    #: What the mirror promises (drkit.core.exactly_once). ``at_least_once``: no record is lost; a crash or a
    #: retried batch may copy records again (orphans, without syncs). ``exactly_once``: every batch copies its
    #: own records in Kafka transactions, so a consumer of the target with ``isolation.level=read_committed``
    #: sees each source record once, across crashes; a second mirror of the flow is fenced and stops. The
    #: continuous copy is at-least-once only: exactly-once copies per batch (latency about a trigger).
    delivery: Delivery = Delivery.AT_LEAST_ONCE
    #: exactly_once: the flow's transactional ids (at most this many copy tasks and transactions per batch).
    #: Every host that may run the flow's mirror must use the same value: a partition's id follows from it.
    transaction_slots: int = Field(default=TRANSACTION_SLOTS, ge=1, le=1024)
    #: Replication factor of target topics drkit creates; -1 is the target broker's default.
    target_replication_factor: int = Field(default=-1)
    #: Stop when records were removed from the source before they were mirrored (retention).
    fail_on_data_loss: bool = True
    #: Extra properties for the target producer (compression.type, linger.ms, batch.size, ...).
    producer: dict[str, str] = Field(default_factory=dict)
    #: Extra properties for the Spark Kafka source (without the ``kafka.`` prefix).
    consumer: dict[str, str] = Field(default_factory=dict)
    #: On SIGINT/SIGTERM, how long to let the running micro-batch finish before stopping it (a stopped
    #: batch is produced again after a restart: duplicates on the target, never a loss or a wrong sync).
    stop_grace_seconds: float = Field(default=10.0, ge=0)
    #: Seconds between observations of the source's end offsets (lag metrics, RPO) while no batch runs;
    #: after every batch the ends are observed at once, in the background.
    observe_interval_seconds: float = 5.0

    @field_validator("trigger_interval_seconds", "observe_interval_seconds")
    @classmethod
    def _interval(cls, value: float) -> float:
        return _checked_interval(value, MIN_INTERVAL_SECONDS)

    @field_validator("stop_grace_seconds")
    @classmethod
    def _grace(cls, value: float) -> float:
        # 0 is a deliberate "stop at once" (the running batch is copied again after a restart).
        return _checked_interval(value, 0.0)

    @field_validator("target_replication_factor")
    @classmethod
    def _rf(cls, value: int) -> int:
        if value == 0 or value < -1 or value > _MAX_REPLICATION_FACTOR:
            raise ValueError(f"must be -1 (broker default) or a number from 1 to {_MAX_REPLICATION_FACTOR}")
        return value

    _flat = field_validator("producer", "consumer", mode="before")(_flatten_properties)

    @field_validator("producer")
    @classmethod
    def _producer(cls, value: dict[str, str]) -> dict[str, str]:
        forced = {"enable.idempotence", "acks", "bootstrap.servers", "transactional.id"} & set(value)
        if forced:
            raise ValueError(f"{sorted(forced)[0]!r} is set by drkit for no-loss delivery and cannot be overridden")
        # The target producer is a librdkafka (confluent-kafka) producer in the Spark tasks.
        return _check_client_properties(value)

    @field_validator("consumer")
    @classmethod
    def _consumer(cls, value: dict[str, str]) -> dict[str, str]:
        forced = {"isolation.level", "group.id", "enable.auto.commit", "bootstrap.servers"} & set(value)
        if forced:
            raise ValueError(f"{sorted(forced)[0]!r} is set by drkit and cannot be overridden")
        return value


class CheckpointSettings(_Model):
    """Tuning of the checkpoint translator of one flow."""

    #: Seconds between translator runs. A run without changes costs one round of group-offset reads
    #: and no Delta commit, so the default keeps checkpoints a few seconds behind the source's commits
    #: (MirrorMaker 2 emits checkpoints every 60 s by default).
    interval_seconds: float = 2.0
    #: Also commit translated offsets to idle groups on the target (like MM2's sync.group.offsets).
    sync_group_offsets: bool = False
    #: Failover refuses checkpoints older than this unless told --allow-stale.
    max_age_seconds: float = Field(default=300.0, gt=0)

    @field_validator("interval_seconds")
    @classmethod
    def _interval(cls, value: float) -> float:
        return _checked_interval(value, MIN_INTERVAL_SECONDS)


class TopologySettings(_Model):
    """How a running mirror follows the source's topics (``[flows.topology]``)."""

    #: Seconds between reconciliations of a running mirror: new topics and partitions are created on the
    #: target and config changes propagated. 0 turns the periodic reconciliation off; a batch holding a
    #: new topic or partition still creates what it needs before it copies.
    refresh_interval_seconds: float = 10.0
    #: Copy topic configs (at creation, then every change) except ``config_exclude``.
    sync_configs: bool = True
    #: Topic properties never copied, as full-match regexes; the default list and why each entry is
    #: there: drkit.core.topology.CONFIG_EXCLUDE_DEFAULT.
    config_exclude: list[Pattern] = Field(default_factory=lambda: [p for p, _ in CONFIG_EXCLUDE_DEFAULT])
    #: Copy the topic ACLs of mirrored topics to their target names (READ and DESCRIBE only, never WRITE).
    sync_acls: bool = False

    @field_validator("refresh_interval_seconds")
    @classmethod
    def _interval(cls, value: float) -> float:
        return _checked_interval(value, MIN_REFRESH_INTERVAL_SECONDS, off=True)


class HeartbeatSettings(_Model):
    """Heartbeat records the mirror writes on the source and copies like data (``[flows.heartbeats]``)."""

    #: Seconds between heartbeats; 0 writes none.
    interval_seconds: float = 1.0

    @field_validator("interval_seconds")
    @classmethod
    def _interval(cls, value: float) -> float:
        return _checked_interval(value, MIN_INTERVAL_SECONDS, off=True)


class FlowConfig(_Model):
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


class StorageConfig(_Model):
    """How to reach an object-store state root (``[state.storage]``): S3's settings by name, anything else
    delta-rs takes as ``options``. Secrets (keys, token) are masked by ``config show`` like client properties."""

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    #: Path-style requests (``http://host/bucket/key``): what S3-compatible servers such as MinIO need.
    path_style: bool = False
    options: dict[str, str] = Field(default_factory=dict)

    @field_validator("options", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return _flatten_properties(value)

    def settings(self) -> StorageSettings:
        return StorageSettings(
            self.endpoint,
            self.region,
            self.access_key_id,
            self.secret_access_key,
            self.session_token,
            self.path_style,
            options_of(self.options),
        )


class StateConfig(_Model):
    """Where drkit keeps its Delta tables, Spark checkpoints and run files: a local folder or an object store."""

    root: str = ".drkit/state"
    #: This host's own folder for a remote root: job locks, PID files, logs, drill reports (default: a folder
    #: per root under ``$DRKIT_CACHE``, ``~/.cache/drkit``). With a local root they live under the root.
    local_dir: str | None = None
    storage: StorageConfig = Field(default_factory=StorageConfig)

    @field_validator("root")
    @classmethod
    def _root(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        problem = shell_syntax_problem(value) or home_problem(value)
        if problem:
            raise ValueError(problem)
        parse_root(value)  # ValueError: the reason, under state.root
        return value

    @field_validator("local_dir")
    @classmethod
    def _local_dir(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip():
            raise ValueError("must not be empty")
        problem = shell_syntax_problem(value) or home_problem(value)
        if problem:
            raise ValueError(problem)
        if "://" in value:
            raise ValueError("is this host's own folder: a local path, not a URI")
        return value

    @model_validator(mode="after")
    def _storage(self) -> StateConfig:
        found = parse_root(self.root)
        problem = storage_problem(found if isinstance(found, RootUri) else None, self.storage.settings())
        if problem is not None:
            raise _KeyedError(f"state.storage.{problem[0]}", problem[1])
        if self.local_dir is not None and not isinstance(found, RootUri):
            raise _KeyedError("state.local_dir", "applies to an object-store root only: a local root holds it all")
        return self


#: Spark properties of the driver's network that have a key of their own in ``[spark]`` (checked there).
_DRIVER_NETWORK = {
    "spark.driver.host": "driver_host",
    "spark.driver.bindAddress": "driver_bind_address",
    "spark.driver.port": "driver_port",
    "spark.driver.blockManager.port": "block_manager_port",
}


class SparkConfig(_Model):
    """The Spark master and how its executors reach the driver (drkit.runtime.spark, docs/deploy.md)."""

    master: str = "local[2]"
    #: The address executors connect to the driver at (``spark.driver.host``). Unset: 127.0.0.1 with a
    #: local master; with a cluster master, Spark's own choice (the address of this machine's host name).
    driver_host: str | None = None
    #: The address the driver listens on (``spark.driver.bindAddress``); unset as for ``driver_host``.
    driver_bind_address: str | None = None
    #: The driver's RPC port (``spark.driver.port``); unset: a free port. Fixed behind a firewall or for a
    #: Kubernetes headless Service.
    driver_port: int | None = Field(default=None, ge=1, le=65535)
    #: The driver's block manager port (``spark.driver.blockManager.port``); unset: a free port.
    block_manager_port: int | None = Field(default=None, ge=1, le=65535)
    #: With a cluster master, ship the driver's drkit to the executors (a zip through addPyFile).
    #: Off only when the executors' image holds the very same drkit version.
    ship_drkit: bool = True
    #: Extra Spark properties, applied last.
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("driver_host", "driver_bind_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        problem = None if value is None else address_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("master")
    @classmethod
    def _master(cls, value: str) -> str:
        if not _SPARK_MASTER.fullmatch(value):
            raise ValueError(
                "expected local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn or k8s://HOST:PORT"
            )
        return value

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return _flatten_properties(value)

    @field_validator("conf")
    @classmethod
    def _spark_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name == "spark.master":
                raise _PropertyError(name, "set the master as [spark] master, where it is checked")
            if name in _DRIVER_NETWORK:
                raise _PropertyError(name, f"set it as [spark] {_DRIVER_NETWORK[name]}, where it is checked")
            if not name.startswith("spark."):
                # spark-submit drops these with a warning nobody sees; Hadoop settings are spark.hadoop.*.
                raise _PropertyError(name, "Spark ignores properties that do not start with 'spark.'")
        return value


class MetricsConfig(_Model):
    """Prometheus metrics of the mirror and checkpoint processes (off unless a port is set)."""

    port: int | None = Field(default=None, ge=1, le=65535)
    host: str = "127.0.0.1"


class DrkitConfig(_Model):
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
        if not value:
            raise ValueError('define at least one cluster: [clusters.<alias>] with bootstrap_servers = "host:port"')
        for alias in value:
            if not _ALIAS.fullmatch(alias):
                raise ValueError(
                    f"cluster alias {alias!r} must start with a letter or digit and contain only letters, "
                    "digits, '_' or '-'"
                )
            if len(alias) > MAX_ALIAS_LENGTH:
                raise _KeyedError(f"clusters.{alias[:20]}...", f"an alias has at most {MAX_ALIAS_LENGTH} characters")
        twins = duplicate_alias(list(value))
        if twins:
            raise _KeyedError(
                f"clusters.{twins[1]}",
                f"aliases {twins[0]!r} and {twins[1]!r} differ only in case: their topic prefixes and state "
                "folders would collide on case-insensitive systems; use one alias per cluster",
            )
        return value

    @model_validator(mode="after")
    def _flows(self) -> DrkitConfig:
        seen: set[str] = set()
        for i, flow in enumerate(self.flows):
            for side in ("source", "target"):
                alias = getattr(flow, side)
                if alias not in self.clusters:
                    raise _KeyedError(
                        f"flows[{i}].{side}",
                        f"unknown cluster {alias!r}; defined clusters: {', '.join(sorted(self.clusters))}",
                    )
            if flow.source == flow.target:
                raise _KeyedError(f"flows[{i}].target", f"a flow cannot mirror cluster {flow.source!r} to itself")
            if flow.name in seen:
                raise _KeyedError(f"flows[{i}]", f"flow {flow.name} is defined twice")
            seen.add(flow.name)
            self._check_joined_patterns(i, flow)
            problem = flow_problem(i, flow, self.clusters, self.topic_selector(flow, heartbeats=False))
            if problem:
                raise _KeyedError(*problem)
        # Without the heartbeat topic: heartbeats of many sources share one topic safely (keyed by flow).
        problem = topology_problem(self.flows, [self.topic_selector(f, heartbeats=False) for f in self.flows])
        if problem:
            raise _KeyedError(*problem)
        return self

    def _check_joined_patterns(self, i: int, flow: FlowConfig) -> None:
        # Each pattern was checked alone; this checks them as drkit joins them (with its exclusions).
        for part, selector in (("topics", self.topic_selector(flow)), ("groups", flow.group_selector())):
            try:
                re.compile(selector.pattern)
            except re.error as exc:
                raise _KeyedError(f"flows[{i}].{part}", f"the patterns joined are not valid: {exc.msg}") from None

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


def _checked_interval(value: float, floor: float, off: bool = False) -> float:
    problem = interval_problem(value, floor, off)
    if problem:
        raise ValueError(problem)
    return value


class _KeyedError(ValueError):
    """A cross-field error that knows which key it is about."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message
