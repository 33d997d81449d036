"""What an import of a MirrorMaker 2 file is made of: the properties read, and what became of each.

Invariant: every property of the file ends in exactly one of ``carried`` (with the drkit key it became) or
``dropped`` (with a :class:`DropReason`), so the report accounts for the whole file. Secret values are never
held here: a secret becomes an :class:`EnvSecret`, the name of the environment variable to set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class DropReason(StrEnum):
    """Why a MirrorMaker 2 property is not in the drkit config."""

    #: drkit has no setting like it.
    NO_EQUIVALENT = "no_equivalent"
    #: drkit always does what it asks (or does it every run), so there is nothing to set.
    ALWAYS = "always"
    #: It configures MM2's Kafka Connect workers (REST, internal topics, converters, tasks).
    CONNECT_WORKER = "connect_worker"
    #: It configures MM2's internal topics; drkit keeps offset-syncs and checkpoints in Delta tables.
    INTERNAL_TOPIC = "internal_topic"
    #: It belongs to a flow that is not enabled (``A->B.enabled`` is not true).
    DISABLED_FLOW = "disabled_flow"
    #: No enabled flow uses it (a consumer setting of a cluster no flow reads from, ...).
    UNUSED = "unused"
    #: Every enabled flow sets its own value (``A->B.topics``), so the top-level default applies nowhere.
    OVERRIDDEN = "overridden"
    #: A deprecated name whose current name is also set (``topics.blacklist`` beside ``topics.exclude``).
    SUPERSEDED = "superseded"
    #: A Kafka client property drkit's Python clients (librdkafka) do not take, or one drkit sets itself.
    CLIENT_UNSUPPORTED = "client_unsupported"
    #: A Java class of the user's (a filter, an admin); drkit cannot load Java classes.
    CUSTOM_CLASS = "custom_class"
    #: A value read through a Connect config provider (``${file:...}``); drkit reads ``${env:NAME}`` only.
    CONFIG_PROVIDER = "config_provider"
    #: Not a property MirrorMaker 2 reads (a typo, or a key of another tool); MM2 ignores it too.
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Mm2Properties:
    """A MirrorMaker 2 properties file as Java reads it: each key once, its last value (``Properties.load``)."""

    values: Mapping[str, str]

    def get(self, key: str) -> str | None:
        return self.values.get(key)


@dataclass(frozen=True)
class Carried:
    """A property that is in the drkit config, at ``to`` (a dotted key: ``flows[A->B].topics.include``)."""

    key: str
    to: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "to": self.to}


@dataclass(frozen=True)
class Dropped:
    """A property that is not in the drkit config, and why."""

    key: str
    reason: DropReason
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "reason": self.reason.value, "detail": self.detail}


@dataclass(frozen=True)
class EnvSecret:
    """A secret of the file, written to the drkit config as ``${env:NAME}``: set ``name`` before drkit runs."""

    name: str
    key: str  # the MM2 property it came from
    to: str  # the drkit key that references it

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "key": self.key, "to": self.to}


@dataclass(frozen=True)
class Mm2Mapping:
    """The drkit config a MirrorMaker 2 file maps to (TOML data, secrets as ``${env:...}``) and the account."""

    config: Mapping[str, Any]
    carried: tuple[Carried, ...]
    dropped: tuple[Dropped, ...]
    secrets: tuple[EnvSecret, ...]
    #: What a person must do or know that no key says (a JKS truststore librdkafka cannot read, ...).
    notes: tuple[str, ...]
