"""A MirrorMaker 2 cluster's Java client properties as drkit's cluster properties (librdkafka names).

Invariant: a secret value never leaves this module as a value: it becomes an ``${env:NAME}`` reference and
an :class:`EnvSecret`. Java settings librdkafka has a name for are renamed (a PLAIN/SCRAM JAAS config to
``sasl.username``/``sasl.password``, a PEM truststore to ``ssl.ca.location``, a PEM keystore to
``ssl.certificate.location``/``ssl.key.location``); drkit derives the Java ones back for Spark
(drkit.kafka.clients.java_properties). Java-only stores (JKS, PKCS12) are kept for Spark and named in a note,
since drkit's librdkafka clients cannot read them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from drkit.config.mm2.model import Carried, Dropped, DropReason, EnvSecret
from drkit.config.properties import JAVA_ONLY_PROPERTIES
from drkit.config.secrets import secret_values

#: Why librdkafka refuses ``name = value`` on its own, or None (drkit.config.properties' offline probe).
ClientCheck = Callable[[str, str], "str | None"]

#: Java login modules whose user name and password drkit turns back into the same JAAS config.
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_JAAS = re.compile(r"\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)(?P<options>.*?);?\s*")
_JAAS_OPTION = re.compile(r"""\s*(?P<name>[\w.-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))""")
#: A value Connect's config providers resolve (``${file:/path:key}``, ``${vault:...}``).
_PROVIDER_REF = re.compile(r"\$\{[^}]*\}")


def env_name(alias: str, name: str) -> str:
    """``DRKIT_<ALIAS>_<PROPERTY>`` in upper case, every other character an underscore."""
    return re.sub(r"[^A-Z0-9]", "_", f"DRKIT_{alias}_{name}".upper())


@dataclass
class ClientAccount:
    """What the client properties of one cluster (or one flow's producer or consumer) became."""

    properties: dict[str, str] = field(default_factory=dict)
    carried: list[Carried] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    secrets: list[EnvSecret] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class SecretNames:
    """Environment variable names, one per secret, never two alike (``a-b`` and ``a_b`` would collide)."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def take(self, alias: str, name: str) -> str:
        base = env_name(alias, name)
        candidate, n = base, 1
        while candidate in self._used:
            n += 1
            candidate = f"{base}_{n}"
        self._used.add(candidate)
        return candidate


def _jaas_credentials(value: str) -> tuple[str, str, str] | None:
    """(login module, user name, password) of a single-module JAAS config with exactly those two options."""
    match = _JAAS.fullmatch(value)
    if match is None:
        return None
    options: dict[str, str] = {}
    rest = match["options"]
    for option in _JAAS_OPTION.finditer(rest):
        quoted = option["quoted"]
        options[option["name"]] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else option["bare"]
    leftover = _JAAS_OPTION.sub("", rest).strip()
    if leftover or set(options) != {"username", "password"}:
        return None
    return match["module"], options["username"], options["password"]


class ClusterClients:
    """Maps the client properties of cluster ``alias`` (``name -> (MM2 key, value)``) to drkit's."""

    def __init__(self, alias: str, check: ClientCheck, names: SecretNames) -> None:
        self.alias = alias
        self.check = check
        self.names = names
        self.out = ClientAccount()
        self.base = f"clusters.{alias}.properties"

    def _put(self, name: str, key: str, value: str, to_base: str | None = None) -> None:
        """Carry ``value`` as property ``name``; a secret (or a provider reference) as an env reference."""
        base = to_base or self.base
        to = f"{base}.{name}"
        # A secret key, a secret inside the value (a URL's password, a JAAS option), or a provider reference.
        if secret_values({name: value}) or _PROVIDER_REF.search(value):
            env = self.names.take(self.alias, name)
            self.out.secrets.append(EnvSecret(env, key, to))
            if _PROVIDER_REF.search(value):
                self.out.notes.append(
                    f"{key} is read through a Connect config provider in MirrorMaker 2; set {env} to the value "
                    "it resolves to"
                )
            value = f"${{env:{env}}}"
        self.out.properties[name] = value
        self.out.carried.append(Carried(key, to))

    def _drop(self, key: str, reason: DropReason, detail: str) -> None:
        self.out.dropped.append(Dropped(key, reason, detail))

    def map(self, props: Mapping[str, tuple[str, str]]) -> ClientAccount:
        todo = dict(props)
        self._sasl(todo)
        self._store(todo, "truststore")
        self._store(todo, "keystore")
        for name, (key, value) in sorted(todo.items()):
            self._one(name, key, value)
        return self.out

    def _one(self, name: str, key: str, value: str) -> None:
        if name.endswith((".class", ".classes")):
            self._drop(
                key, DropReason.CUSTOM_CLASS, "names a Java class; drkit's Python clients (librdkafka) cannot load it"
            )
            return
        if not name.startswith(JAVA_ONLY_PROPERTIES):
            problem = self.check(name, value)
            if problem:
                self._drop(key, DropReason.CLIENT_UNSUPPORTED, problem)
                return
        self._put(name, key, value)

    def _sasl(self, todo: dict[str, tuple[str, str]]) -> None:
        if "sasl.jaas.config" not in todo:
            return
        key, jaas = todo["sasl.jaas.config"]
        mechanism = todo.get("sasl.mechanism", ("", "GSSAPI"))[1].strip().upper()
        found = _jaas_credentials(jaas)
        if found and _LOGIN_MODULES.get(mechanism) == found[0]:
            del todo["sasl.jaas.config"]
            _, user, password = found
            self._put("sasl.username", key, user)
            self._put("sasl.password", key, password)
            return
        # Kept whole for Spark's Java client; librdkafka needs its own settings for this mechanism.
        del todo["sasl.jaas.config"]
        self._put("sasl.jaas.config", key, jaas)
        self.out.notes.append(
            f"{key}: SASL mechanism {mechanism} with this login module is passed to Spark's Java client only; "
            f"drkit's librdkafka clients need their own settings for it in clusters.{self.alias}.properties "
            "(GSSAPI: sasl.kerberos.*; OAUTHBEARER: sasl.oauthbearer.*)"
        )

    def _store(self, todo: dict[str, tuple[str, str]], kind: str) -> None:
        prefix = f"ssl.{kind}."
        mine = {n: kv for n, kv in todo.items() if n.startswith(prefix)}
        if not mine:
            return
        store_type = mine.get(f"{prefix}type", ("", "JKS"))[1].strip().upper()
        location = mine.get(f"{prefix}location")
        if store_type == "PEM" and location is not None:
            for name in mine:
                del todo[name]
            key, path = location
            targets = ("ssl.ca.location",) if kind == "truststore" else ("ssl.certificate.location", "ssl.key.location")
            for target in targets:
                self._put(target, key, path)
            for name, (other, _) in sorted(mine.items()):
                if name == f"{prefix}type":
                    self.out.carried.append(Carried(other, f"{self.base}.{targets[0]}"))
                elif name != f"{prefix}location":
                    self._drop(other, DropReason.NO_EQUIVALENT, f"a PEM {kind} file has no {name.removeprefix(prefix)}")
            return
        # JKS or PKCS12 (Java's default is JKS): kept for Spark's Java client (the rows go through _one).
        librdkafka = "ssl.ca.location" if kind == "truststore" else "ssl.certificate.location and ssl.key.location"
        where = location[0] if location else next(iter(sorted(v[0] for v in mine.values())))
        how = "write its contents to PEM files" if store_type == "PEM" else "export it as PEM (keytool, openssl pkcs12)"
        self.out.notes.append(
            f"{where}: a {store_type} {kind} is passed to Spark's Java client only; drkit's librdkafka clients "
            f"read PEM files: {how} and set {librdkafka} in clusters.{self.alias}.properties"
        )
