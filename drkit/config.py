"""The typed drkit configuration, loaded from TOML and validated once.

Every error names the file and the dotted key (``drkit.toml: flows[0].source: ...``) so an
operator can fix it without reading code, and never contains a value that could be secret.
Client property values may reference environment variables as ``${env:NAME}``.

What validation refuses beyond types, because a later layer would fail or misbehave:

- regular expressions that Spark's Java regex and Python would read differently (:func:`_regex_problem`);
- client properties the Kafka client (librdkafka) does not know or would reject, and Java class
  properties the Python clients cannot load;
- non-finite numbers (``inf``, ``nan``) and Spark masters Spark cannot parse;
- flow topologies where records would be copied forever or two flows would write the same topic
  (:func:`drkit.core.flows.topology_problem`).

Secrets are one notion (:func:`is_secret_key`, :func:`secret_values`): :func:`masked_dump` hides them
by key, inside JAAS/OAuth strings, and by value wherever else the same value appears.

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

import logging
import math
import os
import re
import stat
import tomllib
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from drkit.core.flows import FlowEdge, PolicyName, topology_problem
from drkit.core.heartbeat import HEARTBEAT_TOPIC
from drkit.core.policy import ReplicationPolicy, policy_for
from drkit.core.selection import NameSelector, group_selector, topic_selector
from drkit.core.topology import CONFIG_EXCLUDE_DEFAULT
from drkit.errors import ConfigError

MASK = "********"
_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")

# --- secrets -----------------------------------------------------------------------------------------

_SECRET_WORD = re.compile(r"password|passwd|secret|jaas|token|credential|user\.?info", re.I)
#: Last name parts that describe *where* or *what kind* a secret is, not the secret itself
#: (ssl.key.location, sasl.oauthbearer.token.endpoint.url, fs.s3a.aws.credentials.provider).
_DESCRIPTOR = frozenset({"location", "type", "file", "path", "url", "uri", "provider", "algorithm", "class", "method"})
#: ``name=value`` pairs inside a longer value: JAAS (``password="x"``), librdkafka's
#: sasl.oauthbearer.config (``clientSecret=x scope=y``), JVM options (``-Dtrust.password=x``).
_ASSIGNMENT = re.compile(r"""(?P<name>[A-Za-z0-9_.-]+)(?P<eq>\s*=\s*)(?P<value>"(?:[^"\\]|\\.)*"|'[^']*'|[^\s;,"']+)""")
#: ``scheme://user:password@host``
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/:@\s]+:)(?P<value>[^@/\s]+)(?=@)")
#: Shorter secret values are masked only where a whole value equals them: as substrings they would
#: mask unrelated text (and a secret this short protects nothing).
_MIN_SECRET_LEN = 4


def is_secret_key(key: str) -> bool:
    """True for property names whose values must never be printed or logged.

    Secret words anywhere (``sasl.password``, ``sasl.jaas.config``, ``fs.s3a.session.token``) or a part
    that is a key (``fs.s3a.access.key``, ``fs.azure.account.key.<account>...``, ``ssl.key.pem``),
    unless the last part says it is a location, type or similar (``ssl.key.location``).
    """
    parts = re.split(r"[._-]", key.lower())
    if parts[-1] in _DESCRIPTOR:
        return False
    return bool(_SECRET_WORD.search(key)) or any(p.endswith("key") for p in parts)


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def _embedded_secrets(text: str) -> list[str]:
    found = [_unquote(m["value"]) for m in _ASSIGNMENT.finditer(text) if is_secret_key(m["name"])]
    found += [m["value"] for m in _URL_PASSWORD.finditer(text)]
    return [s for s in found if s]


def secret_values(data: Any) -> set[str]:
    """Every secret value in a tree of config data: values of secret keys and secrets inside values."""
    found: set[str] = set()

    def walk(key: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(str(k), v)
        elif isinstance(node, list):
            for v in node:
                walk(key, v)
        elif isinstance(node, str):
            if node and is_secret_key(key):
                found.add(node)
            found.update(_embedded_secrets(node))

    walk("", data)
    return found


def mask_text(text: str, secrets: set[str]) -> str:
    """``text`` with each of ``secrets`` in it, and each secret assignment in it, replaced by the mask."""
    if text in secrets:
        return MASK

    def assignment(m: re.Match[str]) -> str:
        if not is_secret_key(m["name"]):
            return m[0]
        quote = m["value"][0] if m["value"][:1] in ("'", '"') else ""
        return f"{m['name']}{m['eq']}{quote}{MASK}{quote}"

    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", _ASSIGNMENT.sub(assignment, text))
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= _MIN_SECRET_LEN:
            text = text.replace(secret, MASK)
    return text


def _mask_tree(node: Any, secrets: set[str], key: str = "") -> Any:
    if isinstance(node, dict):
        return {k: _mask_tree(v, secrets, str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [_mask_tree(v, secrets, key) for v in node]
    if isinstance(node, str):
        return MASK if node and is_secret_key(key) else mask_text(node, secrets)
    return node


# --- regular expressions -----------------------------------------------------------------------------

_QUANTIFIER = re.compile(r"\{\d+(?:,\d*)?\}")
_INLINE_FLAGS = re.compile(r"\(\?([A-Za-z]*)(?:-([A-Za-z]*))?([:)])")


def _regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be used by both Python and Spark's Java regex with one meaning, or None.

    drkit joins a flow's patterns into one anchored expression (:mod:`drkit.core.selection`) that Python
    matches and the Spark Kafka source hands to ``java.util.regex``. Refused: Python-only syntax Java
    rejects, syntax both accept with different meanings, and what stops working once joined
    (whole-pattern flags, numbered backreferences).
    """
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt.isdigit():
                return (
                    f"'\\{nxt}' at position {i} is a backreference or octal escape, read differently by Java "
                    "and Python and renumbered when drkit joins the patterns; use \\x.. for a character"
                )
            if nxt in ("U", "v"):
                return f"'\\{nxt}' at position {i} means something else (or nothing) in Java's regex"
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[":
                return (
                    f"'[' at position {i} inside a character class is a nested class in Java but a plain '[' "
                    "in Python; escape it as \\["
                )
            elif pattern.startswith("&&", i):
                return f"'&&' at position {i} is a class intersection in Java but two '&' in Python; escape them"
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if pattern[i : i + 1] == "^":
                i += 1
            if pattern[i : i + 1] == "]":  # a ']' first in a class is a literal in both
                i += 1
            continue
        if c == "{":
            quantifier = _QUANTIFIER.match(pattern, i)
            if quantifier is None:
                return (
                    f"'{{' at position {i} does not start a repetition {{n}}, {{n,}} or {{n,m}}, which Java "
                    "rejects; escape it as \\{"
                )
            i = quantifier.end()
            continue
        if pattern.startswith("(?", i):
            problem = _group_problem(pattern, i)
            if problem:
                return problem
        i += 1
    return None


def _group_problem(pattern: str, i: int) -> str | None:
    ext = pattern[i + 2 :]
    if ext.startswith("P"):
        return f"'(?P' at position {i} is Python-only syntax (named groups); Java rejects it"
    if ext.startswith("#"):
        return f"'(?#' at position {i} is a Python-only comment; Java rejects it"
    if ext.startswith("("):
        return f"'(?(' at position {i} is a Python-only conditional group; Java rejects it"
    flags = _INLINE_FLAGS.match(pattern, i)
    if flags is None or not (flags[1] or flags[2]):
        return None
    if flags[3] == ")":
        return (
            f"inline flags at position {i} apply to the rest of the expression, and drkit joins patterns "
            "into one expression where Python accepts them only at its start; use the scoped form (?i:...)"
        )
    if set(flags[1] + (flags[2] or "")) - set("ims"):
        return f"inline flags at position {i}: only i, m and s mean the same in Java and Python"
    return None


def _check_pattern(pattern: str) -> str:
    problem = _regex_problem(pattern)
    if problem is None:
        with warnings.catch_warnings():
            # Python warns about syntax whose meaning it plans to change (nested sets, set operations).
            warnings.simplefilter("error")
            try:
                re.compile(pattern)
            except re.error as exc:
                problem = f"not a valid regular expression: {exc.msg} at position {exc.pos}"
            except (FutureWarning, DeprecationWarning) as warning:
                problem = f"ambiguous regular expression: {warning}"
    if problem:
        raise ValueError(problem)
    return pattern


Pattern = Annotated[str, AfterValidator(_check_pattern)]

# --- client and Spark properties ---------------------------------------------------------------------

#: Cluster properties only the Java client (Spark's Kafka source) reads; drkit.kafka.clients leaves
#: these out of its librdkafka clients, so librdkafka is not asked about them.
JAVA_ONLY_PROPERTIES = ("ssl.truststore.", "ssl.keystore.", "sasl.jaas.config", "ssl.endpoint.identification.algorithm")
#: librdkafka properties whose mere setting loads code or files; never probed.
_NOT_PROBED = frozenset({"plugin.library.paths", "ssl.engine.location", "ssl.providers"})
_RANGE = re.compile(r"allowed range (-?\d+\.\.-?\d+)")
_SILENT = logging.getLogger("drkit.config.librdkafka")
_SILENT.disabled = True  # the probe clients warn that they have no bootstrap servers; of course


class _PropertyError(ValueError):
    """A problem with one property of a property table; the key is the table's plus the property."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


def _librdkafka_problem(name: str, value: str) -> str | None:
    """Why librdkafka refuses ``name = value`` on its own, or None.

    Creating a client without bootstrap servers is offline and takes well under a millisecond; it
    checks the name and the value. Only the kind of error is kept: librdkafka's text quotes the value.
    Errors that depend on other properties (a keystore without its password) are left to the client.
    """
    if name.endswith((".class", ".classes")):
        return (
            "names a Java class, which drkit's Python Kafka clients (librdkafka) cannot load; use a mechanism "
            "librdkafka supports (for AWS MSK: SASL/SCRAM, or OAUTHBEARER with sasl.oauthbearer.* properties)"
        )
    if name in _NOT_PROBED:
        return None
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({name: value, "logger": _SILENT})
    except KafkaException as exc:
        text = exc.args[0].str() if exc.args else ""
        if "No such configuration property" in text:
            return "unknown Kafka client property (librdkafka, which drkit's Python clients use, does not know it)"
        allowed = _RANGE.search(text)
        if allowed:
            return f"value is outside the allowed range {allowed[1]}"
        if "Invalid value" in text:
            return "invalid value for this Kafka client property"
    return None


def _check_client_properties(props: dict[str, str], skip: tuple[str, ...] = ()) -> dict[str, str]:
    for name, value in props.items():
        if name.startswith(skip) and not name.endswith((".class", ".classes")):
            continue
        problem = _librdkafka_problem(name, value)
        if problem:
            raise _PropertyError(name, problem)
    return props


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
            elif isinstance(item, float) and not math.isfinite(item):
                raise _PropertyError(name, "must be a finite number")
            elif isinstance(item, int | float | str):
                flat[name] = str(item)
            else:
                raise ValueError(f"property {name!r} must be a string, number or boolean")

    walk("", value)
    return flat


#: What SparkContext accepts as a master (Spark 4): local, local[N|*], local[N|*,F], local-cluster,
#: standalone (HA: several host:port), YARN, Kubernetes.
_SPARK_MASTER = re.compile(
    r"local(?:\[(?:\*|[1-9]\d*)(?:,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[^\s,/:]+:\d+(?:,[^\s,/:]+:\d+)*"
    r"|yarn"
    r"|k8s://\S+"
)

# --- the models --------------------------------------------------------------------------------------


class _Model(BaseModel):
    # inf and nan read from TOML would pass every bound check (or fail it with a puzzling message).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Selection(_Model):
    """Names selected by full-match regular expressions: included and not excluded."""

    include: list[Pattern] = Field(default_factory=lambda: [".*"])
    exclude: list[Pattern] = Field(default_factory=list)


class ClusterConfig(_Model):
    """One Kafka cluster: where it is and how clients connect to it."""

    bootstrap_servers: str = Field(min_length=1)
    #: librdkafka/Java-style client properties (security.protocol, sasl.*, ssl.*, ...).
    properties: dict[str, str] = Field(default_factory=dict)

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, value: str) -> str:
        servers = value.split(",")
        for number, server in enumerate(servers, 1):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                where = f"; entry {number} of {len(servers)} is not" if len(servers) > 1 else ""
                raise ValueError(f"expected host:port[,host:port...] with a port from 1 to 65535{where}")
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

    trigger_interval_seconds: float = Field(default=1.0, gt=0)
    max_offsets_per_trigger: int | None = Field(default=100_000, gt=0)
    #: A batch of at most this many offsets is read by the driver's own consumer and copied by the driver
    #: (a streaming read: memory does not grow with the batch), instead of by Spark Python tasks, whose
    #: fixed cost is most of a small batch's time. Larger batches, and those whose start Spark's
    #: checkpoint does not give (a new topic or partition), get one task per core. 0: always tasks.
    driver_copy_max_records: int = Field(default=DRIVER_COPY_MAX_RECORDS, ge=0)
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
    interval_seconds: float = Field(default=2.0, gt=0)
    #: Also commit translated offsets to idle groups on the target (like MM2's sync.group.offsets).
    sync_group_offsets: bool = False
    #: Failover refuses checkpoints older than this unless told --allow-stale.
    max_age_seconds: float = Field(default=300.0, gt=0)


class TopologySettings(_Model):
    """How a running mirror follows the source's topics (``[flows.topology]``)."""

    #: Seconds between reconciliations of a running mirror: new topics and partitions are created on the
    #: target and config changes propagated. 0 turns the periodic reconciliation off; a batch holding a
    #: new topic or partition still creates what it needs before it copies.
    refresh_interval_seconds: float = Field(default=10.0, ge=0)
    #: Copy topic configs (at creation, then every change) except ``config_exclude``.
    sync_configs: bool = True
    #: Topic properties never copied, as full-match regexes; the default list and why each entry is
    #: there: drkit.core.topology.CONFIG_EXCLUDE_DEFAULT.
    config_exclude: list[Pattern] = Field(default_factory=lambda: [p for p, _ in CONFIG_EXCLUDE_DEFAULT])
    #: Copy the topic ACLs of mirrored topics to their target names (READ and DESCRIBE only, never WRITE).
    sync_acls: bool = False


class HeartbeatSettings(_Model):
    """Heartbeat records the mirror writes on the source and copies like data (``[flows.heartbeats]``)."""

    #: Seconds between heartbeats; 0 writes none.
    interval_seconds: float = Field(default=1.0, ge=0)


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

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def policy(self) -> ReplicationPolicy:
        return policy_for(self.replication_policy, self.separator)

    def edge(self) -> FlowEdge:
        """This flow as the topology rules see it (drkit.core.flows)."""
        return FlowEdge(self.name, self.source, self.target, PolicyName(self.replication_policy), self.separator)

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
            self._check_joined_patterns(i, flow)
        # Without the heartbeat topic: heartbeats of many sources share one topic safely (keyed by flow).
        edges = [f.edge() for f in self.flows]
        problem = topology_problem(edges, [self.topic_selector(f, heartbeats=False) for f in self.flows])
        if problem:
            raise _KeyedError(problem.key, problem.reason)
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


# --- loading -----------------------------------------------------------------------------------------


def _substitute_env(value: Any, key: str, path: str, used: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _substitute_env(v, f"{key}.{k}" if key else k, path, used) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env(v, f"{key}[{i}]", path, used) for i, v in enumerate(value)]
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(f"{path}: {key}: environment variable {name} is not set")
            used.add(os.environ[name])
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
    if isinstance(ctx_error, _PropertyError):
        key, message = f"{key}.{ctx_error.name}", ctx_error.message
    elif kind == "extra_forbidden":
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
    from_env: set[str] = set()
    data = _substitute_env(data, "", path, from_env)
    try:
        return DrkitConfig.model_validate({**data, "source_path": path if path != "<config>" else None})
    except ValidationError as exc:
        # Messages are written not to quote values; this is the net under that rule, for values that
        # came from the environment (where secrets are meant to come from) and secrets in the file.
        raise ConfigError(mask_text(_format_error(path, exc), secret_values(data) | from_env)) from None


def _read_config_text(file: Path) -> str:
    """The file's text; a directory, FIFO, device or non-UTF-8 file is a one-line ConfigError."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked on what was opened.
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{file}: config file not found (create one from examples/drkit.local.toml)") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot open the config file: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{file}: is a directory, not a config file; give the path of a TOML file")
        raise ConfigError(f"{file}: is not a regular file (a FIFO, socket or device); give the path of a TOML file")
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read()
    try:
        return raw.decode("utf-8-sig")  # a byte order mark is UTF-8 still; TOML would reject it
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: config file is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def load_config(path: str | Path) -> DrkitConfig:
    """Load and validate ``path``; every problem is a :class:`ConfigError` naming file and key."""
    file = Path(path)
    try:
        data = tomllib.loads(_read_config_text(file))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    if "source_path" in data:
        raise ConfigError(f"{file}: source_path: unknown key")
    return parse_config(data, str(file))


def masked_dump(config: DrkitConfig) -> dict[str, Any]:
    """The config as plain data with every secret replaced by ``********``: values of secret keys, secrets
    inside values (JAAS, OAuth configs, URLs), and any other occurrence of those values."""
    data = config.model_dump(mode="json", exclude={"source_path"})
    masked: dict[str, Any] = _mask_tree(data, secret_values(data))
    return masked
