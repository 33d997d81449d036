"""Replication policies: how a topic is named on the target, and where a topic came from.

They follow MirrorMaker 2's ReplicationPolicy: ``prefix`` (MM2's DefaultReplicationPolicy) names
the copy of ``orders`` from cluster ``A`` as ``A.orders``, so two-way flows never loop and each
topic tells its origin; ``identity`` keeps the name, for migrations and one-way DR, and cannot
tell a copy from an original.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

#: Topics no flow ever mirrors: Kafka's own (``__consumer_offsets``, ``__transaction_state``,
#: ``__cluster_metadata``, ...), hidden ones, MM2/Connect internals and drkit's own.
INTERNAL_TOPIC_PATTERNS: tuple[str, ...] = (
    r"__.*",
    r"\..*",
    r".*[.-]internal",
    r"_drkit\..*",
    r"mm2-.*",
    r"connect-(configs|offsets|status)",
    r"_schemas",
)

_INTERNAL = re.compile("|".join(f"(?:{p})" for p in INTERNAL_TOPIC_PATTERNS))

#: Kafka's longest topic name (``org.apache.kafka.common.internals.Topic.MAX_NAME_LENGTH``).
MAX_TOPIC_NAME_LENGTH = 249
#: The characters Kafka allows in a topic name (``Topic.LEGAL_CHARS``).
TOPIC_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name (as ``Topic.validate`` does), or None."""
    if not name:
        return "is empty"
    if name in (".", ".."):
        return "cannot be '.' or '..'"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"is {len(name)} characters long, more than Kafka's {MAX_TOPIC_NAME_LENGTH}"
    bad = next((c for c in name if c not in TOPIC_NAME_CHARS), None)
    if bad is not None:
        return f"holds {bad!r}; Kafka allows only ASCII letters, digits, '.', '_' and '-'"
    return None


def is_internal_topic(topic: str) -> bool:
    return _INTERNAL.fullmatch(topic) is not None


class ReplicationPolicy(Protocol):
    """Names remote topics and tells their origin."""

    @property
    def name(self) -> str: ...

    def target_topic(self, source_alias: str, topic: str) -> str:
        """The name on the target of ``topic`` read from cluster ``source_alias``."""
        ...

    def origin_of(self, topic: str, known_aliases: frozenset[str]) -> str | None:
        """The alias of the cluster ``topic`` was copied from, or None for a local topic."""
        ...

    def source_topic(self, source_alias: str, target_topic: str) -> str | None:
        """Inverse of :meth:`target_topic`; None when ``target_topic`` is not such a copy."""
        ...

    def cycle_exclusions(self, target_alias: str, known_aliases: frozenset[str]) -> list[str]:
        """Full-match regexes of source topics that would loop back to ``target_alias``."""
        ...


@dataclass(frozen=True)
class PrefixPolicy:
    """``<source-alias><separator><topic>``, MirrorMaker 2 compatible."""

    separator: str = "."
    name: str = "prefix"

    def target_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def origin_of(self, topic: str, known_aliases: frozenset[str]) -> str | None:
        head, sep, _ = topic.partition(self.separator)
        return head if sep and head in known_aliases else None

    def source_topic(self, source_alias: str, target_topic: str) -> str | None:
        prefix = f"{source_alias}{self.separator}"
        return target_topic[len(prefix) :] if target_topic.startswith(prefix) else None

    def cycle_exclusions(self, target_alias: str, known_aliases: frozenset[str]) -> list[str]:
        # A topic whose chain of hops (A.B.orders) passes through the target came from there.
        sep = re.escape(self.separator)
        hops = "|".join(re.escape(a) for a in sorted(known_aliases))
        return [f"(?:(?:{hops}){sep})*{re.escape(target_alias)}{sep}.+"]


@dataclass(frozen=True)
class IdentityPolicy:
    """Same name on both sides. Cannot tell copies from originals, so never use it both ways."""

    separator: str = "."
    name: str = "identity"

    def target_topic(self, source_alias: str, topic: str) -> str:
        return topic

    def origin_of(self, topic: str, known_aliases: frozenset[str]) -> str | None:
        return None

    def source_topic(self, source_alias: str, target_topic: str) -> str | None:
        return target_topic

    def cycle_exclusions(self, target_alias: str, known_aliases: frozenset[str]) -> list[str]:
        return []


def policy_for(name: str, separator: str = ".") -> ReplicationPolicy:
    if name == "prefix":
        return PrefixPolicy(separator)
    if name == "identity":
        return IdentityPolicy(separator)
    raise ValueError(f"unknown replication policy {name!r} (expected 'prefix' or 'identity')")
