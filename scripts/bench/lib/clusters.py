"""The two local KRaft clusters every benchmark copies between, A (source) and B (target), and their topics.

A copy of topic ``t`` lands in ``A.t`` on B (drkit's default prefix replication policy); the target topic is
created beforehand with ``message.timestamp.type=LogAppendTime``, so a record's timestamp on B is when B
appended it (the mirror accepts an existing target topic with at least the source's partitions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SOURCE, TARGET = "A", "B"


def local_kafka(state: Path, base_port: int, heap: str | None = None) -> Any:
    """A and B under ``state``, on ``base_port`` and ``base_port + 10`` (not started yet)."""
    from drkit.localdev.clusters import LocalKafka

    if heap is None:
        return LocalKafka(state, base_port=base_port)
    return LocalKafka(state, base_port=base_port, heap=heap)


def start_pair(kafka: Any) -> tuple[str, str]:
    """Starts A and B; their bootstrap servers."""
    clusters = {c.alias: c.bootstrap_servers for c in kafka.up([SOURCE, TARGET])}
    return clusters[SOURCE], clusters[TARGET]


def target_topic(topic: str) -> str:
    return f"{SOURCE}.{topic}"


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    """One topic, replication factor 1, waited for."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(120)


def create_pair(source: str, target: str, topic: str, partitions: int) -> str:
    """``topic`` on A and its copy's topic on B (LogAppendTime), both of ``partitions``; the target's name."""
    copy = target_topic(topic)
    create_topic(source, topic, partitions)
    create_topic(target, copy, partitions, {"message.timestamp.type": "LogAppendTime"})
    return copy
