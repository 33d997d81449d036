"""confluent-kafka clients built from a cluster's config.

Client logs go through Python logging (logger ``drkit.kafka.<alias>``) instead of stderr, so
connection noise never drowns the CLI's output; secrets in properties are never logged.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from drkit.config import JAVA_ONLY_PROPERTIES, ClusterConfig

#: Client properties that only the Java client (Spark's Kafka source) understands (declared with the
#: config's validation); librdkafka rejects unknown properties, so these are left out of its clients.
_JAVA_ONLY = JAVA_ONLY_PROPERTIES


def _logger(alias: str) -> logging.Logger:
    return logging.getLogger(f"drkit.kafka.{alias}")


def client_config(cluster: ClusterConfig, alias: str, **overrides: Any) -> dict[str, Any]:
    """librdkafka properties for ``cluster``: bootstrap, security settings, then overrides."""
    conf: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers}
    conf.update({k: v for k, v in cluster.properties.items() if not k.startswith(_JAVA_ONLY)})
    conf.update(overrides)
    conf["logger"] = _logger(alias)
    return conf


def java_client_options(cluster: ClusterConfig) -> dict[str, str]:
    """``kafka.``-prefixed options for Spark's Kafka source (Java client property names)."""
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers}
    options.update({f"kafka.{k}": v for k, v in cluster.properties.items()})
    return options


def admin(cluster: ClusterConfig, alias: str, timeout_ms: int = 10_000) -> AdminClient:
    return AdminClient(client_config(cluster, alias, **{"socket.timeout.ms": timeout_ms}))


def producer(cluster: ClusterConfig, alias: str, **overrides: Any) -> Producer:
    return Producer(client_config(cluster, alias, **overrides))


def consumer(cluster: ClusterConfig, alias: str, group_id: str, **overrides: Any) -> Consumer:
    base = {"group.id": group_id, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    return Consumer(client_config(cluster, alias, **{**base, **overrides}))
