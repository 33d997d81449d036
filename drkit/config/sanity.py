"""Settings that are valid one by one but cannot work: refused at load, naming the key.

Invariant: each check returns ``(dotted key, reason)`` or None, quotes no value that could be secret
(cluster aliases, topic names and environment variable names are not), and depends on nothing but the
config itself (no cluster, no file system beyond the user database for ``~user``).

What is refused and why:

- names the replication policy would turn into topic names Kafka refuses (:func:`topic_name_problem`):
  a separator with characters Kafka does not allow, a literal topic include whose copy (``A.<topic>``)
  is longer than 249 characters, the heartbeat topic's copy;
- a ``prefix`` separator that occurs inside a cluster alias: the origin of ``us-east.orders`` could not
  be told with separator ``-`` (read as from ``us``), so copies would go round two-way flows;
- selections that select nothing: an empty ``include`` list, an empty pattern, an exclude of everything,
  plain-text includes the flow's ``exclude`` removes all of (one of several is a deliberate pause), a
  plain-text include drkit itself never selects (an internal topic, a copy of the target's, drkit's own
  groups);
- a flow between two aliases of one cluster (the same bootstrap servers): it would copy into itself;
- intervals below a floor (:data:`MIN_INTERVAL_SECONDS`, :data:`MIN_REFRESH_INTERVAL_SECONDS`) or above
  :data:`MAX_INTERVAL_SECONDS`;
- a driver address (``[spark] driver_host``, ``driver_bind_address``) that is a URL, holds a port or is not
  a host name: Spark would fail at session start with a Java trace;
- shell syntax in paths (``$HOME/x``, ``~nobody``): drkit runs no shell. ``~`` and ``~user`` (a user of
  this machine) in ``[state] root`` are expanded deliberately, as a shell would; librdkafka expands
  neither, so a ``*.location`` property holding them is refused too.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from drkit.core.flows import alternatives, literal_names
from drkit.core.heartbeat import HEARTBEAT_TOPIC
from drkit.core.policy import TOPIC_NAME_CHARS, topic_name_problem
from drkit.core.selection import NameSelector, group_selector, topic_selector

if TYPE_CHECKING:
    from drkit.config.model import ClusterConfig, FlowConfig

#: Trigger, translator, observation and heartbeat intervals below this would spend the machine on
#: bookkeeping (each trigger is a Spark job; each translator run reads every group's offsets).
MIN_INTERVAL_SECONDS = 0.1
#: A reconciliation describes every selected topic on both clusters; 0 turns it off.
MIN_REFRESH_INTERVAL_SECONDS = 1.0
#: A longer interval (or stop grace) is a typo of units: a mirror that would trigger once a day.
MAX_INTERVAL_SECONDS = 86_400.0
#: Longest cluster alias: a flow's state folder name (two aliases, each ``_`` doubled) stays under 255 bytes.
MAX_ALIAS_LENGTH = 60

#: Exclude patterns that match every name.
_EVERYTHING = frozenset({".*", ".+", ".*?", ".+?", "(.*)", "(.+)", "^.*$", "^.+$", "(?s:.*)", "(?s).*"})
#: A DNS host name (RFC 1123 labels; a trailing dot allowed).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?")
_SHELL_VARIABLE = re.compile(r"\$(\{[^}]*\}?|[A-Za-z_][A-Za-z0-9_]*)")


def interval_problem(value: float, floor: float, off: bool = False) -> str | None:
    """Why ``value`` seconds is not a sane interval (``off``: 0 is allowed and means off), or None."""
    if off and value == 0:
        return None
    if value < floor:
        zero = " (or 0: off)" if off else ""
        return f"must be at least {floor:g} seconds{zero}"
    if value > MAX_INTERVAL_SECONDS:
        return f"must be at most {MAX_INTERVAL_SECONDS:g} seconds (one day)"
    return None


def shell_syntax_problem(value: str) -> str | None:
    """Why a path holds shell syntax drkit would take literally, or None (``~`` is left to the caller)."""
    found = _SHELL_VARIABLE.search(value)
    if found is None:
        return None
    return (
        f"holds {found[0]!r}, a shell variable drkit does not expand: write the path itself, or "
        "${env:NAME} to read it from the environment"
    )


def home_problem(value: str) -> str | None:
    """Why a ``~user`` at the start of a path cannot be expanded, or None."""
    if not value.startswith("~"):
        return None
    user = value[1:].split("/", 1)[0]
    if os.path.expanduser(value) == value:
        return f"'~{user}' is not a user of this machine, so the path cannot be expanded; write the path itself"
    return None


def address_problem(value: str) -> str | None:
    """Why ``value`` is not a host name or an IP address the Spark driver could use, or None.

    The driver's addresses (``[spark] driver_host``, ``driver_bind_address``) are handed to Spark, which
    would fail at session start with a Java trace for a URL, a host:port or a blank.
    """
    if "://" in value:
        return "expected a host name or an IP address, not a URL"
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(value)
        return None
    if ":" in value:
        return "expected a host name or an IP address without a port (the port is [spark] driver_port)"
    if not _HOST_NAME.fullmatch(value):
        return "expected a host name (letters, digits, '-' and '.') or an IP address"
    return None


def separator_problem(separator: str) -> str | None:
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


def duplicate_alias(aliases: Sequence[str]) -> tuple[str, str] | None:
    """Two aliases equal up to case (their folders and topic prefixes collide on case-insensitive systems)."""
    seen: dict[str, str] = {}
    for alias in aliases:
        other = seen.setdefault(alias.casefold(), alias)
        if other != alias:
            return other, alias
    return None
