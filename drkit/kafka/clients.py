"""confluent-kafka clients built from a cluster's config.

Client logs go through Python logging (logger ``drkit.kafka.<alias>``) instead of stderr, so
connection noise never drowns the CLI's output; secrets in properties are never logged. librdkafka makes
only the lines the process's verbosity keeps (``log_level``: warning and up unless ``DRKIT_LOG=debug``);
the CLI sends them to the state root's library log, or to the terminal with ``--verbose``
(drkit.core.verbosity).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from drkit.config import JAVA_ONLY_PROPERTIES, ClusterConfig, mask_text, secret_values
from drkit.config.verbosity import current_plan
from drkit.core.verbosity import LIBRDKAFKA_LOGGER

#: Client properties that only the Java client (Spark's Kafka source) understands (declared with the
#: config's validation); librdkafka rejects unknown properties, so these are left out of its clients.
_JAVA_ONLY = JAVA_ONLY_PROPERTIES


class _Masking(logging.Filter):
    """Masks the secrets of every client configured for a cluster in its log lines (librdkafka's own
    lines quote what it was given, e.g. with ``debug`` set, and a broker's refusals)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = mask_text(record.getMessage(), self.secrets)
        record.args = ()
        return True


def kafka_logger(alias: str, properties: dict[str, Any]) -> logging.Logger:
    """Python logger ``drkit.kafka.<alias>`` for librdkafka's log lines of a client configured with
    ``properties``: their secrets masked (drkit.config.secrets). Its level is its parent's
    (``drkit.kafka``: warnings and up unless the CLI or a caller set another)."""
    parent = logging.getLogger(LIBRDKAFKA_LOGGER)
    if parent.level == logging.NOTSET:
        parent.setLevel(logging.WARNING)
    logger = logging.getLogger(f"{LIBRDKAFKA_LOGGER}.{alias}")
    masking = next((f for f in logger.filters if isinstance(f, _Masking)), None)
    if masking is None:
        masking = _Masking()
        logger.addFilter(masking)
    masking.secrets |= secret_values({k: v for k, v in properties.items() if isinstance(v, str)})
    return logger


def client_config(cluster: ClusterConfig, alias: str, **overrides: Any) -> dict[str, Any]:
    """librdkafka properties for ``cluster``: bootstrap, security settings, then overrides; its log lines
    go to :func:`kafka_logger`."""
    conf: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers}
    conf.update({k: v for k, v in cluster.properties.items() if not k.startswith(_JAVA_ONLY)})
    conf.update(overrides)
    # Lines the verbosity drops are never made (librdkafka filters by ``log_level`` before it formats a line);
    # a level set in the cluster's properties or by the caller is kept.
    conf.setdefault("log_level", current_plan().librdkafka_property)
    conf["logger"] = kafka_logger(alias, dict(cluster.properties))
    return conf


#: Java login modules of the SASL mechanisms whose JAAS config drkit derives from a user name and password.
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: librdkafka-only names that java_properties translates (the Java client does not know them).
_LIBRDKAFKA_ONLY = ("sasl.username", "sasl.password", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location")


def _jaas_quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_properties(properties: dict[str, str]) -> dict[str, str]:
    """The Java client's properties for a cluster configured with librdkafka's names.

    Spark's Kafka source is a Java client: it takes ``sasl.jaas.config`` where librdkafka takes
    ``sasl.username``/``sasl.password``, and trust and key stores where librdkafka takes PEM file
    locations. Derived here unless set explicitly: the JAAS config of a PLAIN or SCRAM mechanism, a PEM
    truststore from ``ssl.ca.location``, a PEM keystore from ``ssl.certificate.location`` and
    ``ssl.key.location`` (their contents: the Java client reads a key and a certificate chain as values,
    where librdkafka reads two files). The JAAS config holds the password: callers must mask it (its
    name is a secret key: drkit.config.secrets).
    """
    out = {k: v for k, v in properties.items() if k not in _LIBRDKAFKA_ONLY}
    module = _LOGIN_MODULES.get(properties.get("sasl.mechanism", "").upper())
    if module and "sasl.jaas.config" not in properties and "sasl.username" in properties:
        out["sasl.jaas.config"] = (
            f"{module} required username={_jaas_quoted(properties['sasl.username'])} "
            f"password={_jaas_quoted(properties.get('sasl.password', ''))};"
        )
    if "ssl.ca.location" in properties and not any(k.startswith("ssl.truststore.") for k in properties):
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = properties["ssl.ca.location"]
    if "ssl.certificate.location" in properties and not any(k.startswith("ssl.keystore.") for k in properties):
        out["ssl.keystore.type"] = "PEM"
        out["ssl.keystore.certificate.chain"] = Path(properties["ssl.certificate.location"]).read_text()
        out["ssl.keystore.key"] = Path(
            properties.get("ssl.key.location", properties["ssl.certificate.location"])
        ).read_text()
    return out


def java_client_options(cluster: ClusterConfig) -> dict[str, str]:
    """``kafka.``-prefixed options for Spark's Kafka source (Java client property names, see
    :func:`java_properties`)."""
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers}
    options.update({f"kafka.{k}": v for k, v in java_properties(dict(cluster.properties)).items()})
    return options


def admin(cluster: ClusterConfig, alias: str, timeout_ms: int = 10_000) -> AdminClient:
    return AdminClient(client_config(cluster, alias, **{"socket.timeout.ms": timeout_ms}))


def producer(cluster: ClusterConfig, alias: str, **overrides: Any) -> Producer:
    return Producer(client_config(cluster, alias, **overrides))


def consumer(cluster: ClusterConfig, alias: str, group_id: str, **overrides: Any) -> Consumer:
    base = {"group.id": group_id, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    return Consumer(client_config(cluster, alias, **{**base, **overrides}))
