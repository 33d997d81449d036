"""A MirrorMaker 2 dedicated-mode file as a drkit config: pure, over the properties as Java reads them.

Invariant: every property of the file is accounted for, carried to a drkit key or dropped with a
:class:`DropReason`; selections and policies keep MM2's meaning (its defaults written out where the file
leaves them unset); a secret is written as ``${env:NAME}``, never as its value. Input drkit cannot map
faithfully (no clusters, a flow naming an unknown cluster, a replication policy of the user's, a value with
what looks like an end-of-line comment, which Java properties do not have) is one :class:`ConfigError`.

How MM2 resolves a flow's settings, followed here: a top-level property is every flow's default, a
``<source>-><target>.`` one overrides it for that flow; a cluster's client properties are
``<alias>.<name>`` (top-level ``bootstrap.servers``, ``security.protocol``, ``ssl.*`` and ``sasl.*`` are every
cluster's defaults); ``<alias>.consumer.``/``<alias>.producer.`` apply to the clients reading from / writing to
that cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from drkit.config.clusters import ALIAS
from drkit.config.mm2 import catalogue as cat
from drkit.config.mm2.clients import ClientCheck, ClusterClients, SecretNames
from drkit.config.mm2.model import Carried, Dropped, DropReason, EnvSecret, Mm2Mapping, Mm2Properties
from drkit.config.secrets import secret_values
from drkit.core.topology import CONFIG_EXCLUDE_DEFAULT
from drkit.errors import ConfigError

_LIST_SPLIT = re.compile(r"\s*,\s*")
_COMMENT = re.compile(r"\s#")
Flow = tuple[str, str]


def _comment_problem(key: str, value: str) -> None:
    if _COMMENT.search(value):
        raise ConfigError(
            f"{key}: the value holds ' #...', read as part of the value: a .properties file has no end-of-line "
            "comments ('#' starts a comment only at the start of a line); move the comment to its own line"
        )


def _list(key: str, value: str) -> list[str]:
    """A ConfigDef LIST: comma-separated, each item trimmed; an empty value is the empty list."""
    _comment_problem(key, value)
    value = value.strip()
    return [] if not value else _LIST_SPLIT.split(value)


def _bool(key: str, value: str) -> bool:
    _comment_problem(key, value)
    word = value.strip().lower()
    if word not in ("true", "false"):
        raise ConfigError(f"{key}: expected true or false")
    return word == "true"


def _seconds(key: str, value: str) -> int:
    _comment_problem(key, value)
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"{key}: expected a whole number of seconds") from None


def _policy(key: str, value: str) -> str:
    simple = value.strip().rsplit(".", 1)[-1]
    if simple == "DefaultReplicationPolicy":
        return "prefix"
    if simple == "IdentityReplicationPolicy":
        return "identity"
    raise ConfigError(
        f"{key}: drkit has DefaultReplicationPolicy (prefix) and IdentityReplicationPolicy (identity) only; "
        "another policy names the target topics differently, so drkit's copies would not be MM2's"
    )


def _clusters(props: Mm2Properties) -> list[str]:
    raw = props.get("clusters")
    aliases = [] if raw is None else list(dict.fromkeys(_list("clusters", raw)))
    if not aliases:
        raise ConfigError("no clusters: a MirrorMaker 2 file lists its cluster aliases as clusters = A, B")
    for alias in aliases:
        if not ALIAS.fullmatch(alias):
            raise ConfigError(
                f"clusters: alias {alias!r} is not a drkit alias (letters, digits, '_' or '-', starting with a letter "
                "or digit); the alias is the prefix of the copies' names, so drkit cannot rename it"
            )
    return aliases


class _Mapper:
    def __init__(self, props: Mm2Properties, check: ClientCheck) -> None:
        self.props = props
        self.check = check
        self.aliases = _clusters(props)
        self.names = SecretNames()
        self.carried: dict[str, list[Carried]] = {}
        self.dropped: dict[str, Dropped] = {}
        self.secrets: list[EnvSecret] = []
        self.notes: list[str] = []
        self.top: dict[str, str] = {}
        self.cluster: dict[str, dict[str, str]] = {a: {} for a in self.aliases}
        self.flow: dict[Flow, dict[str, str]] = {}
        for key, value in props.values.items():
            self._classify(key, value)
        self.flows = [
            f for f, p in self.flow.items() if "enabled" in p and _bool(self._fkey(f, "enabled"), p["enabled"])
        ]

    # -- bookkeeping
    def carry(self, key: str, to: str) -> None:
        self.carried.setdefault(key, []).append(Carried(key, to))
        self.dropped.pop(key, None)

    def drop(self, key: str, reason: DropReason, detail: str) -> None:
        if key not in self.carried and key not in self.dropped:
            self.dropped[key] = Dropped(key, reason, detail)

    @staticmethod
    def _fkey(flow: Flow, name: str) -> str:
        return f"{flow[0]}->{flow[1]}.{name}"

    @staticmethod
    def _fname(flow: Flow) -> str:
        return f"flows[{flow[0]}->{flow[1]}]"

    def _alias_prefix(self, text: str) -> str | None:
        """The longest alias ``text`` starts with, followed by a dot."""
        found = [a for a in self.aliases if text.startswith(f"{a}.")]
        return max(found, key=len) if found else None

    def _classify(self, key: str, value: str) -> None:
        if key == "clusters":
            self.carry(key, "clusters")
        elif "->" in key:
            source, rest = key.split("->", 1)
            target = self._alias_prefix(rest)
            if source not in self.aliases or target is None:
                raise ConfigError(
                    f"{key}: names a flow between clusters that are not in clusters ({', '.join(self.aliases)}); "
                    "a flow is <source>-><target>.<property>, both aliases listed in clusters"
                )
            if source == target:
                raise ConfigError(f"{key}: a flow cannot mirror cluster {source} to itself")
            self.flow.setdefault((source, target), {})[rest[len(target) + 1 :]] = value
        elif (alias := self._alias_prefix(key)) is not None:
            self.cluster[alias][key[len(alias) + 1 :]] = value
        else:
            self.top[key] = value

    # -- the whole file
    def run(self) -> Mm2Mapping:
        if not self.flows:
            self.notes.append(
                "no flow is enabled (<source>-><target>.enabled = true): the config defines clusters only"
            )
        clusters = {alias: self._cluster(alias) for alias in self.aliases}
        flows = [self._flow(f) for f in self.flows]
        self._rest()
        carried = tuple(c for key in sorted(self.carried) for c in self.carried[key])
        dropped = tuple(self.dropped[key] for key in sorted(self.dropped))
        config: dict[str, Any] = {"clusters": clusters}
        if flows:
            config["flows"] = flows
        return Mm2Mapping(config, carried, dropped, tuple(self.secrets), tuple(dict.fromkeys(self.notes)))

    def _cluster(self, alias: str) -> dict[str, Any]:
        mine = self.cluster[alias]
        defaults = {
            n: (n, v)
            for n, v in self.top.items()
            if n in cat.CLIENT_DEFAULT_NAMES or n.startswith(cat.CLIENT_DEFAULT_PREFIXES)
        }
        client: dict[str, tuple[str, str]] = dict(defaults)
        for name, value in mine.items():
            key = f"{alias}.{name}"
            if name.startswith(("consumer.", "producer.")):
                continue  # the flows that read from / write to this cluster take them
            if name.startswith("admin."):
                self.drop(key, DropReason.NO_EQUIVALENT, "drkit's admin clients use the cluster's properties")
            elif name.startswith(cat.WORKER_PREFIXES):
                self.drop(
                    key, DropReason.CONNECT_WORKER, "a Kafka Connect worker setting; drkit runs no Connect worker"
                )
            else:
                client[name] = (key, value)
        if "bootstrap.servers" not in client:
            twin = next((k for k in self.props.values if k.lower() == f"{alias}.bootstrap.servers".lower()), None)
            hint = f" ({twin} differs in case: aliases are case-sensitive)" if twin else ""
            raise ConfigError(f"{alias}.bootstrap.servers: missing for cluster {alias} of clusters{hint}")
        key, servers = client.pop("bootstrap.servers")
        _comment_problem(key, servers)
        if "${" in servers:
            raise ConfigError(f"{key}: read through a Connect config provider; write the servers themselves")
        self.carry(key, f"clusters.{alias}.bootstrap_servers")
        account = ClusterClients(alias, self.check, self.names).map(client)
        self._take(account.carried, account.dropped, account.secrets, account.notes)
        out: dict[str, Any] = {"bootstrap_servers": ",".join(_list(key, servers))}
        if account.properties:
            out["properties"] = account.properties
        return out

    def _take(
        self, carried: Iterable[Carried], dropped: Iterable[Dropped], secrets: Iterable[EnvSecret], notes: Iterable[str]
    ) -> None:
        for c in carried:
            self.carry(c.key, c.to)
        for d in dropped:
            self.drop(d.key, d.reason, d.detail)
        self.secrets.extend(secrets)
        self.notes.extend(notes)

    # -- one flow
    def _setting(self, flow: Flow, name: str) -> tuple[str, str] | None:
        """(MM2 key, value) of connector property ``name`` for ``flow``: its own, else the top-level one."""
        own = self.flow[flow]
        if name in own:
            return self._fkey(flow, name), own[name]
        if name in self.top:
            return name, self.top[name]
        return None

    def _renamed(self, flow: Flow, name: str) -> tuple[str, str] | None:
        """The setting under its current name, else under its deprecated one (which MM2 still reads)."""
        old = next(o for o, n in cat.RENAMED.items() if n == name)
        current, deprecated = self._setting(flow, name), self._setting(flow, old)
        if current and deprecated:
            self.drop(deprecated[0], DropReason.SUPERSEDED, f"{name} is set too, and MM2 reads that one")
        return current or deprecated

    def _flow(self, flow: Flow) -> dict[str, Any]:
        source, target = flow
        at = self._fname(flow)
        self.carry(self._fkey(flow, "enabled"), at)
        out: dict[str, Any] = {"source": source, "target": target}
        policy = "prefix"
        if found := self._setting(flow, "replication.policy.class"):
            policy = _policy(*found)
            self.carry(found[0], f"{at}.replication_policy")
        out["replication_policy"] = policy
        separator = "."
        if found := self._setting(flow, "replication.policy.separator"):
            separator = found[1]
            out["separator"] = separator
            self.carry(found[0], f"{at}.separator")
        out["topics"] = self._selection(flow, "topics", cat.TOPICS_DEFAULT, cat.TOPICS_EXCLUDE_DEFAULT)
        heartbeats = [cat.MM2_HEARTBEATS_TOPIC, f".+{re.escape(separator)}{cat.MM2_HEARTBEATS_TOPIC}"]
        out["topics"]["exclude"] = [*out["topics"]["exclude"], *heartbeats]
        self.notes.append(
            f"flow {source}->{target} excludes MM2's heartbeat topics ({', '.join(heartbeats)}): MM2 writes them; "
            "drkit measures replication with its own (drkit-heartbeats)"
        )
        out["groups"] = self._selection(flow, "groups", cat.GROUPS_DEFAULT, cat.GROUPS_EXCLUDE_DEFAULT)
        self._settings(flow, out)
        self._clients(flow, out)
        return out

    def _selection(self, flow: Flow, name: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> dict[str, Any]:
        at = f"{self._fname(flow)}.{name}"
        out = {"include": list(include), "exclude": list(exclude)}
        if found := self._setting(flow, name):
            out["include"] = _list(*found)
            self.carry(found[0], f"{at}.include")
        if found := self._renamed(flow, f"{name}.exclude"):
            out["exclude"] = _list(*found)
            self.carry(found[0], f"{at}.exclude")
        return out

    def _settings(self, flow: Flow, out: dict[str, Any]) -> None:
        at = self._fname(flow)
        mirror: dict[str, Any] = {}
        checkpoint: dict[str, Any] = {}
        topology: dict[str, Any] = {}
        heartbeats: dict[str, Any] = {}
        if found := self._setting(flow, "replication.factor"):
            _comment_problem(*found)
            try:
                mirror["target_replication_factor"] = int(found[1].strip())
            except ValueError:
                raise ConfigError(f"{found[0]}: expected a whole number") from None
            self.carry(found[0], f"{at}.mirror.target_replication_factor")
        if found := self._setting(flow, "sync.topic.configs.enabled"):
            topology["sync_configs"] = _bool(*found)
            self.carry(found[0], f"{at}.topology.sync_configs")
        if found := self._setting(flow, "sync.topic.acls.enabled"):
            topology["sync_acls"] = _bool(*found)
            self.carry(found[0], f"{at}.topology.sync_acls")
        if found := self._renamed(flow, "config.properties.exclude"):
            drkit_default = [p for p, _ in CONFIG_EXCLUDE_DEFAULT]
            topology["config_exclude"] = list(dict.fromkeys([*drkit_default, *_list(*found)]))
            self.carry(found[0], f"{at}.topology.config_exclude")
        self._switched(flow, "refresh.topics", topology, "refresh_interval_seconds", f"{at}.topology")
        self._switched(flow, "emit.heartbeats", heartbeats, "interval_seconds", f"{at}.heartbeats")
        if found := self._setting(flow, "emit.checkpoints.interval.seconds"):
            checkpoint["interval_seconds"] = _seconds(*found)
            self.carry(found[0], f"{at}.checkpoint.interval_seconds")
        if found := self._setting(flow, "sync.group.offsets.enabled"):
            checkpoint["sync_group_offsets"] = _bool(*found)
            self.carry(found[0], f"{at}.checkpoint.sync_group_offsets")
            if checkpoint["sync_group_offsets"]:
                self.notes.append(
                    f"flow {flow[0]}->{flow[1]} commits translated offsets to idle groups on {flow[1]} "
                    "(sync_group_offsets): run its translator only once MM2's checkpoints are stopped, or both "
                    "commit the same groups' offsets (runbooks/migrate-from-mm2.md)"
                )
        for table, values in (("mirror", mirror), ("checkpoint", checkpoint), ("topology", topology)):
            if values:
                out[table] = values
        if heartbeats:
            out["heartbeats"] = heartbeats
        for name, (mm2, drkit) in cat.DIFFERING_DEFAULTS.items():
            if self._setting(flow, name) is None:
                self.notes.append(f"{name} is not set: MM2's default is {mm2}, drkit's is {drkit}")

    def _switched(self, flow: Flow, stem: str, table: dict[str, Any], field: str, at: str) -> None:
        """``<stem>.enabled`` and ``<stem>.interval.seconds`` as one drkit interval, 0 when off."""
        enabled = self._setting(flow, f"{stem}.enabled")
        interval = self._setting(flow, f"{stem}.interval.seconds")
        if interval:
            table[field] = max(0, _seconds(*interval))  # MM2 schedules nothing for a negative interval
            self.carry(interval[0], f"{at}.{field}")
        if enabled:
            if not _bool(*enabled):
                table[field] = 0
            self.carry(enabled[0], f"{at}.{field}")

    def _clients(self, flow: Flow, out: dict[str, Any]) -> None:
        source, target = flow
        mirror = out.setdefault("mirror", {})
        for side, alias, forced in (
            ("consumer", source, cat.FORCED_CONSUMER),
            ("producer", target, cat.FORCED_PRODUCER),
        ):
            props: dict[str, str] = {}
            for name, value in sorted(self.cluster[alias].items()):
                if not name.startswith(f"{side}."):
                    continue
                prop, key = name.removeprefix(f"{side}."), f"{alias}.{name}"
                if prop in forced:
                    self.drop(key, DropReason.ALWAYS, forced[prop])
                    continue
                problem = self._client_problem(side, prop, value)
                if problem:
                    self.drop(key, *problem)
                    continue
                to = f"{self._fname(flow)}.mirror.{side}.{prop}"
                if secret_values({prop: value}) or "${" in value:
                    env = self.names.take(alias, f"{side}.{prop}")
                    self.secrets.append(EnvSecret(env, key, to))
                    value = f"${{env:{env}}}"
                props[prop] = value
                self.carry(key, to)
            if props:
                mirror[side] = props
        if not mirror:
            del out["mirror"]

    def _client_problem(self, side: str, prop: str, value: str) -> tuple[DropReason, str] | None:
        if prop.endswith((".class", ".classes")):
            return DropReason.CUSTOM_CLASS, "names a Java class of the user's; drkit does not load it"
        if side == "producer":
            # drkit's target producer is librdkafka; the source consumer is Spark's Java client (any property).
            problem = self.check(prop, value)
            if problem:
                return DropReason.CLIENT_UNSUPPORTED, problem
        return None

    # -- what no flow or cluster took
    def _rest(self) -> None:
        for alias, props in self.cluster.items():
            for name in props:
                if name.startswith(("consumer.", "producer.")):
                    side = "reads from" if name.startswith("consumer.") else "writes to"
                    self.drop(f"{alias}.{name}", DropReason.UNUSED, f"no enabled flow {side} {alias}")
        for flow, props in self.flow.items():
            for name in props:
                self._leftover(self._fkey(flow, name), name, enabled=flow in self.flows)
        for name in self.top:
            self._leftover(name, name, enabled=True)

    def _leftover(self, key: str, name: str, enabled: bool) -> None:
        if key in self.carried or key in self.dropped:
            return
        if not enabled:
            self.drop(key, DropReason.DISABLED_FLOW, "its flow is not enabled (<source>-><target>.enabled = true)")
        elif name in cat.CLASSES:
            self._class(key, name)
        elif name in cat.NOT_MAPPED:
            self.drop(key, *cat.NOT_MAPPED[name])
        elif name.startswith(cat.WORKER_PREFIXES):
            self.drop(key, DropReason.CONNECT_WORKER, "a Kafka Connect worker setting; drkit runs no Connect worker")
        elif name in cat.MAPPED or name == "enabled":
            self.drop(key, *self._unused_mapped(key))
        elif key == name and (name in cat.CLIENT_DEFAULT_NAMES or name.startswith(cat.CLIENT_DEFAULT_PREFIXES)):
            self.drop(key, DropReason.OVERRIDDEN, "every cluster sets its own")
        else:
            hint = f" ({name}.enabled is)" if f"{name}.enabled" in cat.MAPPED | set(cat.NOT_MAPPED) else ""
            self.drop(key, DropReason.UNKNOWN, f"not a property MirrorMaker 2 reads here{hint}; MM2 ignores it too")

    def _unused_mapped(self, key: str) -> tuple[DropReason, str]:
        if "->" in key:
            return DropReason.DISABLED_FLOW, "its flow is not enabled"
        if not self.flows:
            return DropReason.UNUSED, "no flow is enabled"
        return DropReason.OVERRIDDEN, "every enabled flow sets its own"

    def _class(self, key: str, name: str) -> None:
        value = self.props.values.get(key, "")
        if value.strip().rsplit(".", 1)[-1] == cat.CLASSES[name]:
            self.drop(key, DropReason.ALWAYS, "MM2's default class; drkit selects with its include and exclude lists")
        else:
            self.drop(key, DropReason.CUSTOM_CLASS, "a class of the user's; drkit cannot load Java classes")
            self.notes.append(f"{key} names a class of the user's: check the flow's selection does what it did")


def map_mm2(props: Mm2Properties, check: ClientCheck) -> Mm2Mapping:
    """The drkit config ``props`` maps to, and what became of every property; bad input is a ConfigError.

    ``check``: why librdkafka refuses a client property on its own, or None (offline; drkit.config.properties).
    """
    return _Mapper(props, check).run()
