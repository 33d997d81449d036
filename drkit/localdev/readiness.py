"""Readiness probe: a cluster is ready when a record produced to it can be consumed back."""

from __future__ import annotations

import logging
import socket
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

#: The probe's clients log nowhere: while a broker starts they are refused, time out and retry, and the probe's
#: answer (a cluster id, or the exception the caller retries on) says all of it. Without a logger librdkafka
#: writes its lines (``%3|...|FAIL|``, ``%6|...``) to the terminal of whoever started the cluster.
_SILENT = logging.getLogger("drkit.localdev.probe")
_SILENT.disabled = True


def probe(bootstrap: str, topic: str, client: dict[str, str] | None = None, timeout: float = 10.0) -> str | None:
    """Produce one record and consume it back; return the id of the cluster that answered (so the
    caller can tell its own broker from another one on the same port). ``client``: security properties
    (a secure cluster's admin principal)."""
    common: dict[str, Any] = {**(client or {}), "logger": _SILENT, "log_level": 3}
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    with socket.create_connection((host, int(port)), timeout=2):
        pass  # the listener is up; clients below would only log refused connections before that
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000, **common})
    metadata = admin.list_topics(timeout=timeout)
    cluster_id: str | None = metadata.cluster_id
    if topic not in metadata.topics:
        futures = admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=timeout)
        try:
            futures[topic].result(timeout)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    token = uuid.uuid4().hex.encode()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": int(timeout * 1000), **common}
    )
    delivered: list[int] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            raise KafkaException(err)
        delivered.append(msg.offset())  # type: ignore[attr-defined]

    producer.produce(topic, value=token, on_delivery=on_delivery)
    producer.flush(timeout)
    if not delivered:
        raise RuntimeError("probe record not acknowledged")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"_drkit-probe-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            **common,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, delivered[0])])
        msg = consumer.poll(timeout)
        if msg is None or msg.error() or msg.value() != token:
            raise RuntimeError("probe record not consumed back")
    finally:
        consumer.close()
    return cluster_id
