"""The typed drkit configuration, loaded from TOML and validated once.

Every error names the file and the dotted key (``drkit.toml: flows[0].source: ...``) so an
operator can fix it without reading code. Client property values may reference environment
variables as ``${env:NAME}``; values of secret-looking keys (passwords, JAAS configs, keys) are
never shown: :func:`masked_dump` replaces them with ``********``.

Example::

    [state]
    root = ".drkit/state"

    [clusters.A]
    bootstrap_servers = "127.0.0.1:19092"

    [clusters.B]
    bootstrap_servers = "127.0.0.1:19102"
    properties = { "security.protocol" = "SASL_SSL", "sasl.password" = "${env:B_PASSWORD}" }

    [[flows]]
    source = "A"
    target = "B"
    topics.include = ["orders.*"]
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from drkit.core.policy import ReplicationPolicy, policy_for
from drkit.core.selection import NameSelector, group_selector, topic_selector
from drkit.errors import ConfigError

MASK = "********"
_SECRET_KEY = re.compile(r"(password|secret|jaas|token|credential|key\.pem|keystore\.key|user\.info)", re.I)
_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def is_secret_key(key: str) -> bool:
    """True for client property names whose values must never be printed or logged."""
    return bool(_SECRET_KEY.search(key))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_regexes(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    return patterns


def _flatten_properties(value: Any) -> Any:
    """Client or Spark properties as a flat ``{"a.b": "value"}`` dict of strings.

    TOML reads an unquoted dotted key (``sasl.password = "x"``) as a nested table; it is flattened
    back to the property the user meant, instead of becoming a property ``sasl`` whose value is the
    printed dict (wrong, and shown unmasked by ``config show``).
    """
    if not isinstance(value, dict):
        return value
    flat: dict[str, str] = {}

    def walk(prefix: str, table: dict[str, Any]) -> None:
        for k, item in table.items():
            name = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(item, dict):
                walk(name, item)
                continue
            if name in flat:
                raise ValueError(f"property {name!r} is defined twice")
            if isinstance(item, bool):
                flat[name] = str(item).lower()
            elif isinstance(item, int | float | str):
                flat[name] = str(item)
            else:
                raise ValueError(f"property {name!r} must be a string, number or boolean")

    walk("", value)
    return flat


class Selection(_Model):
    """Names selected by full-match regular expressions: included and not excluded."""

    include: list[str] = Field(default_factory=lambda: [".*"])
    exclude: list[str] = Field(default_factory=list)

    _check = field_validator("include", "exclude")(_check_regexes)


class ClusterConfig(_Model):
    """One Kafka cluster: where it is and how clients connect to it."""

    bootstrap_servers: str = Field(min_length=1)
    #: librdkafka/Java-style client properties (security.protocol, sasl.*, ssl.*, ...).
    properties: dict[str, str] = Field(default_factory=dict)

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, value: str) -> str:
        for server in value.split(","):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"expected host:port[,host:port...], got {value!r}")
        return value

    @field_validator("properties", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return _flatten_properties(value)


class MirrorSettings(_Model):
    """Tuning of the mirror job of one flow."""

    trigger_interval_seconds: float = Field(default=1.0, gt=0)
    max_offsets_per_trigger: int | None = Field(default=100_000, gt=0)
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
    observe_interval_seconds: float = Field(default=5.0, gt=0)

    @field_validator("target_replication_factor")
    @classmethod
    def _rf(cls, value: int) -> int:
        if value == 0 or value < -1:
            raise ValueError("must be -1 (broker default) or a positive number")
        return value

    _flat = field_validator("producer", "consumer", mode="before")(_flatten_properties)

    @field_validator("producer")
    @classmethod
    def _producer(cls, value: dict[str, str]) -> dict[str, str]:
        forced = {"enable.idempotence", "acks", "bootstrap.servers"} & set(value)
        if forced:
            raise ValueError(f"{sorted(forced)[0]!r} is set by drkit for no-loss delivery and cannot be overridden")
        return value

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
    interval_seconds: float = Field(default=2.0, gt=0)
    #: Also commit translated offsets to idle groups on the target (like MM2's sync.group.offsets).
    sync_group_offsets: bool = False
    #: Failover refuses checkpoints older than this unless told --allow-stale.
    max_age_seconds: float = Field(default=300.0, gt=0)


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

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def policy(self) -> ReplicationPolicy:
        return policy_for(self.replication_policy, self.separator)

    def group_selector(self) -> NameSelector:
        """The consumer groups this flow translates (never drkit's own or Connect's)."""
        return group_selector(self.groups.include, self.groups.exclude)


class StateConfig(_Model):
    """Where drkit keeps its Delta tables and Spark checkpoints."""

    root: str = ".drkit/state"


class SparkConfig(_Model):
    master: str = "local[2]"
    #: Extra Spark properties, applied last.
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return _flatten_properties(value)


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
            if not _ALIAS.match(alias):
                raise ValueError(
                    f"cluster alias {alias!r} must start with a letter or digit and contain only letters, "
                    "digits, '_' or '-'"
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
        for i, flow in enumerate(self.flows):
            reverse = f"{flow.target}->{flow.source}"
            if flow.replication_policy == "identity" and reverse in seen:
                raise _KeyedError(
                    f"flows[{i}].replication_policy",
                    f"flow {flow.name} uses the identity policy while flow {reverse} also exists, so records "
                    "would be copied back and forth forever; use the prefix policy for two-way replication",
                )
        return self

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

    def topic_selector(self, flow: FlowConfig) -> NameSelector:
        """The source topics ``flow`` mirrors: never internal topics, never copies of its target's."""
        return topic_selector(
            flow.topics.include, flow.topics.exclude, flow.policy(), flow.target, frozenset(self.clusters)
        )

    def reverse_of(self, flow: FlowConfig) -> FlowConfig | None:
        """The flow that copies ``flow``'s target back to its source, if one is configured."""
        return next((f for f in self.flows if f.source == flow.target and f.target == flow.source), None)

    def state_root(self) -> Path:
        root = Path(self.state.root).expanduser()
        if not root.is_absolute() and self.source_path:
            root = Path(self.source_path).parent / root
        return root.resolve()


class _KeyedError(ValueError):
    """A cross-field error that knows which key it is about."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def _substitute_env(value: Any, key: str, path: str) -> Any:
    if isinstance(value, dict):
        return {k: _substitute_env(v, f"{key}.{k}" if key else k, path) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env(v, f"{key}[{i}]", path) for i, v in enumerate(value)]
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(f"{path}: {key}: environment variable {name} is not set")
            return os.environ[name]

        return _ENV_REF.sub(replace, value)
    return value


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _format_error(path: str, exc: ValidationError) -> str:
    err = exc.errors(include_url=False, include_input=False)[0]
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, _KeyedError):
        return f"{path}: {ctx_error.key}: {ctx_error.message}"
    key = _format_loc(tuple(err["loc"])) or "(top level)"
    kind = err["type"]
    if kind == "extra_forbidden":
        message = "unknown key"
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "string_too_short" and err["ctx"]["min_length"] == 1:
        message = "must not be empty"
    elif kind == "literal_error":
        message = f"must be one of {err['ctx']['expected']}"
    elif isinstance(ctx_error, ValueError):
        message = str(ctx_error)
    else:
        message = err["msg"][0].lower() + err["msg"][1:]
    more = len(exc.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{path}: {key}: {message}{suffix}"


def parse_config(data: dict[str, Any], path: str = "<config>") -> DrkitConfig:
    """Validate an already-parsed TOML document."""
    data = _substitute_env(data, "", path)
    try:
        return DrkitConfig.model_validate({**data, "source_path": path if path != "<config>" else None})
    except ValidationError as exc:
        raise ConfigError(_format_error(path, exc)) from None


def load_config(path: str | Path) -> DrkitConfig:
    """Load and validate ``path``; every problem is a :class:`ConfigError` naming file and key."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{file}: config file not found (create one from examples/drkit.local.toml)")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    if "source_path" in data:
        raise ConfigError(f"{file}: source_path: unknown key")
    return parse_config(data, str(file))


def masked_dump(config: DrkitConfig) -> dict[str, Any]:
    """The config as plain data with every secret value replaced by ``********``."""
    data = config.model_dump(mode="json", exclude={"source_path"})

    def mask(props: dict[str, str]) -> dict[str, str]:
        return {k: (MASK if is_secret_key(k) else v) for k, v in props.items()}

    for cluster in data["clusters"].values():
        cluster["properties"] = mask(cluster["properties"])
    for flow in data["flows"]:
        flow["mirror"]["producer"] = mask(flow["mirror"]["producer"])
        flow["mirror"]["consumer"] = mask(flow["mirror"]["consumer"])
    data["spark"]["conf"] = mask(data["spark"]["conf"])
    return data
