"""The MirrorMaker 2 properties drkit knows, their defaults, and what drkit does with those it does not map.

Names and defaults are those of Kafka's ``connect/mirror`` (MirrorMakerConfig, MirrorSourceConfig,
MirrorCheckpointConfig, MirrorHeartbeatConfig, DefaultTopicFilter, DefaultGroupFilter,
DefaultConfigPropertyFilter). Declared once here; :mod:`drkit.config.mm2.mapping` decides with them.
"""

from __future__ import annotations

from drkit.config.mm2.model import DropReason

#: MM2's defaults for the selection lists, written out when a file leaves them unset (same behaviour).
TOPICS_DEFAULT = (".*",)
TOPICS_EXCLUDE_DEFAULT = (r".*[\-\.]internal", r".*\.replica", r"__.*")
GROUPS_DEFAULT = (".*",)
GROUPS_EXCLUDE_DEFAULT = (r"console-consumer-.*", r"connect-.*", r"__.*")
#: MM2's heartbeat topic: written by its heartbeat connector on each source, copied as ``<alias>.heartbeats``.
MM2_HEARTBEATS_TOPIC = "heartbeats"

#: Deprecated names (KIP-629) and the names that replace them.
RENAMED = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
}

#: Connector properties the import maps to a drkit key of the flow.
MAPPED = frozenset(
    {
        "topics",
        "topics.exclude",
        "topics.blacklist",
        "groups",
        "groups.exclude",
        "groups.blacklist",
        "replication.policy.class",
        "replication.policy.separator",
        "replication.factor",
        "sync.topic.configs.enabled",
        "sync.topic.acls.enabled",
        "config.properties.exclude",
        "config.properties.blacklist",
        "refresh.topics.enabled",
        "refresh.topics.interval.seconds",
        "emit.heartbeats.enabled",
        "emit.heartbeats.interval.seconds",
        "emit.checkpoints.interval.seconds",
        "sync.group.offsets.enabled",
    }
)

_SYNCS = "drkit records the exact offset range of every batch it copies, in the offset_syncs Delta table"
_EVERY_REFRESH = "drkit does it at every topology refresh ([flows.topology] refresh_interval_seconds)"
_DELTA = "drkit keeps offset-syncs and checkpoints in Delta tables under [state] root, not in Kafka topics"

#: Connector properties MM2 reads that drkit does not map: (reason, why).
NOT_MAPPED: dict[str, tuple[DropReason, str]] = {
    "emit.checkpoints.enabled": (
        DropReason.NO_EQUIVALENT,
        "drkit's checkpoint translator runs when you run `drkit checkpoint` for the flow; do not run it to "
        "have no checkpoints",
    ),
    "sync.group.offsets.interval.seconds": (
        DropReason.ALWAYS,
        "drkit commits translated offsets to idle groups at every checkpoint run ([flows.checkpoint] interval_seconds)",
    ),
    "refresh.groups.enabled": (DropReason.ALWAYS, "drkit's translator lists the source's groups at every run"),
    "refresh.groups.interval.seconds": (DropReason.ALWAYS, "drkit's translator lists the source's groups at every run"),
    "sync.topic.configs.interval.seconds": (DropReason.ALWAYS, _EVERY_REFRESH),
    "sync.topic.acls.interval.seconds": (DropReason.ALWAYS, _EVERY_REFRESH),
    "offset.lag.max": (DropReason.ALWAYS, _SYNCS),
    "emit.offset-syncs.enabled": (DropReason.ALWAYS, _SYNCS),
    "offset-syncs.topic.location": (DropReason.INTERNAL_TOPIC, _DELTA),
    "offset-syncs.topic.replication.factor": (DropReason.INTERNAL_TOPIC, _DELTA),
    "checkpoints.topic.replication.factor": (DropReason.INTERNAL_TOPIC, _DELTA),
    "heartbeats.topic.replication.factor": (
        DropReason.INTERNAL_TOPIC,
        "drkit creates its own heartbeat topic (drkit-heartbeats) with the broker's default replication factor",
    ),
    "heartbeats.replication.enabled": (
        DropReason.NO_EQUIVALENT,
        "drkit copies its own heartbeat topic (drkit-heartbeats); the import excludes MM2's heartbeats topics",
    ),
    "replication.policy.internal.topic.separator.enabled": (
        DropReason.INTERNAL_TOPIC,
        "drkit creates no internal topics on the clusters (only its heartbeat topic, drkit-heartbeats)",
    ),
    "tasks.max": (DropReason.NO_EQUIVALENT, "the mirror's parallelism is Spark's ([spark] master, e.g. local[4])"),
    "consumer.poll.timeout.ms": (DropReason.NO_EQUIVALENT, "drkit's readers have their own poll timeouts"),
    "admin.timeout.ms": (DropReason.NO_EQUIVALENT, "drkit's admin requests have their own timeouts"),
    "use.defaults.from": (
        DropReason.NO_EQUIVALENT,
        "drkit copies the source topic's configs except [flows.topology] config_exclude",
    ),
    "source.cluster.alias": (DropReason.ALWAYS, "MM2 sets it per flow; drkit's flows name their clusters"),
    "target.cluster.alias": (DropReason.ALWAYS, "MM2 sets it per flow; drkit's flows name their clusters"),
    "enabled": (DropReason.NO_EQUIVALENT, "flows are enabled one by one: <source>-><target>.enabled = true"),
    "name": (DropReason.CONNECT_WORKER, "a Connect connector name"),
    "connector.class": (DropReason.CONNECT_WORKER, "a Connect connector class"),
}

#: Filter and admin class properties, and MM2's own default class for each (the default maps to nothing).
CLASSES: dict[str, str] = {
    "topic.filter.class": "DefaultTopicFilter",
    "group.filter.class": "DefaultGroupFilter",
    "config.property.filter.class": "DefaultConfigPropertyFilter",
    "forwarding.admin.class": "ForwardingAdmin",
}

#: Prefixes (or whole names) of Kafka Connect worker settings: MM2's workers, their REST server, their internal
#: topics and converters. drkit runs no Connect worker.
WORKER_PREFIXES = (
    "offset.storage.",
    "config.storage.",
    "status.storage.",
    "key.converter",
    "value.converter",
    "header.converter",
    "task.",
    "worker.",
    "dedicated.mode.",
    "listeners",
    "admin.listeners",
    "rest.",
    "exactly.once.",
    "offset.flush.",
    "plugin.path",
    "plugin.discovery",
    "group.id",
    "scheduled.rebalance.",
    "connect.protocol",
    "connector.client.config.override.policy",
    "metric.reporters",
    "metrics.",
    "config.providers",
    "access.control.",
    "response.http.headers.",
    "inter.worker.",
    "topic.creation.enable",
    "config.action.reload",
)

#: A cluster's client properties that MM2 also takes at the top level, as every cluster's default.
CLIENT_DEFAULT_NAMES = ("bootstrap.servers", "security.protocol")
CLIENT_DEFAULT_PREFIXES = ("ssl.", "sasl.")

#: Properties of the mirror's source consumer and target producer that drkit sets itself.
FORCED_CONSUMER: dict[str, str] = {
    "isolation.level": "drkit always reads read_committed (aborted records are never copied)",
    "group.id": "drkit's readers use their own group ids",
    "enable.auto.commit": "drkit commits nothing for its readers; Spark's checkpoint holds the progress",
    "bootstrap.servers": "drkit's clients use the cluster's bootstrap_servers",
    "auto.offset.reset": "a new drkit mirror starts at the source's earliest offset",
    "key.deserializer": "drkit copies keys and values as bytes",
    "value.deserializer": "drkit copies keys and values as bytes",
}
FORCED_PRODUCER: dict[str, str] = {
    "enable.idempotence": "drkit's producer is always idempotent, for exact offset-syncs",
    "acks": "drkit's producer always uses acks=all",
    "bootstrap.servers": "drkit's clients use the cluster's bootstrap_servers",
    "key.serializer": "drkit copies keys and values as bytes",
    "value.serializer": "drkit copies keys and values as bytes",
}

#: Defaults that differ between MM2 and drkit, noted when a file leaves them unset: (MM2's, drkit's).
DIFFERING_DEFAULTS: dict[str, tuple[str, str]] = {
    "replication.factor": ("2", "the target broker's default ([flows.mirror] target_replication_factor = -1)"),
    "sync.topic.acls.enabled": ("true", "false ([flows.topology] sync_acls)"),
    "emit.checkpoints.interval.seconds": ("60", "2 ([flows.checkpoint] interval_seconds)"),
    "refresh.topics.interval.seconds": ("600", "10 ([flows.topology] refresh_interval_seconds)"),
}
