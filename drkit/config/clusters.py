"""The clusters of the config (``[clusters.<alias>]``): where each Kafka cluster is, how clients reach it,
and the aliases that name them.

Invariant: a :class:`ClusterConfig` that exists names each bootstrap server once, with a port Kafka
reads (ASCII digits, 1 to 65535), and holds client properties librdkafka accepts one by one (Java-only
properties are left to Spark's Kafka source). :func:`check_aliases` passes only aliases that are safe as
topic prefixes and folder names on every file system.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import Field, field_validator

from drkit.config.base import ConfigModel, KeyedError
from drkit.config.properties import JAVA_ONLY_PROPERTIES, check_client_properties, flatten_properties

#: What a cluster alias may be: it prefixes topic names and names state folders.
ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
#: Longest cluster alias: a flow's state folder name (two aliases, each ``_`` doubled) stays under 255 bytes.
MAX_ALIAS_LENGTH = 60
#: A port as Kafka reads it: ASCII digits only (Python's int() also takes '١٢٣' and '²').
_PORT = re.compile(r"[0-9]{1,5}")

#: ``[clusters.<alias>] probe_timeout_seconds`` by default: a live broker answers a metadata request in
#: milliseconds, and status must answer within about three seconds with a cluster frozen.
PROBE_TIMEOUT_SECONDS = 2.0


class ClusterConfig(ConfigModel):
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
        return flatten_properties(value)

    @field_validator("properties")
    @classmethod
    def _known(cls, value: dict[str, str]) -> dict[str, str]:
        return check_client_properties(value, skip=JAVA_ONLY_PROPERTIES)


def check_aliases(clusters: dict[str, ClusterConfig]) -> dict[str, ClusterConfig]:
    """``clusters`` unchanged, or the error of its first alias problem: none at all, an alias that is not
    a safe name or too long (:class:`KeyedError`), two aliases equal up to case."""
    if not clusters:
        raise ValueError('define at least one cluster: [clusters.<alias>] with bootstrap_servers = "host:port"')
    for alias in clusters:
        if not ALIAS.fullmatch(alias):
            raise ValueError(
                f"cluster alias {alias!r} must start with a letter or digit and contain only letters, "
                "digits, '_' or '-'"
            )
        if len(alias) > MAX_ALIAS_LENGTH:
            raise KeyedError(f"clusters.{alias[:20]}...", f"an alias has at most {MAX_ALIAS_LENGTH} characters")
    twins = duplicate_alias(list(clusters))
    if twins:
        raise KeyedError(
            f"clusters.{twins[1]}",
            f"aliases {twins[0]!r} and {twins[1]!r} differ only in case: their topic prefixes and state "
            "folders would collide on case-insensitive systems; use one alias per cluster",
        )
    return clusters


def duplicate_alias(aliases: Sequence[str]) -> tuple[str, str] | None:
    """Two aliases equal up to case (their folders and topic prefixes collide on case-insensitive systems)."""
    seen: dict[str, str] = {}
    for alias in aliases:
        other = seen.setdefault(alias.casefold(), alias)
        if other != alias:
            return other, alias
    return None
