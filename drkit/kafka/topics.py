"""Topic administration for the mirror: list, describe, create target topics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from drkit.errors import ClusterError, MirrorError

#: Topic configs copied when drkit creates a target topic (full config sync is a later feature).
COPIED_CONFIGS = ("cleanup.policy", "max.message.bytes")


@dataclass(frozen=True)
class TopicPair:
    source: str
    target: str
    partitions: int


def partition_counts(admin: AdminClient, alias: str, timeout: float = 15.0) -> dict[str, int]:
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ClusterError(f"cluster {alias} is unreachable: {exc.args[0]}") from None
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def topic_configs(admin: AdminClient, topic: str, names: tuple[str, ...], timeout: float = 15.0) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout)
    return {n: entries[n].value for n in names if n in entries and not entries[n].is_default and entries[n].value}


def ensure_target_topics(
    source: AdminClient,
    target: AdminClient,
    pairs: list[TopicPair],
    replication_factor: int,
    target_alias: str,
) -> list[str]:
    """Create missing target topics with the source's partition count; refuse too few partitions.

    Returns the names of the topics created.
    """
    existing = partition_counts(target, target_alias)
    created: list[str] = []
    for pair in pairs:
        have = existing.get(pair.target)
        if have is not None:
            if have < pair.partitions:
                raise MirrorError(
                    f"target topic {pair.target} on {target_alias} has {have} partitions but source topic "
                    f"{pair.source} has {pair.partitions}: records keep their partition, so add partitions to "
                    f"the target topic (at least {pair.partitions}) and restart the mirror"
                )
            continue
        configs = topic_configs(source, pair.source, COPIED_CONFIGS)
        new = NewTopic(pair.target, pair.partitions, replication_factor, config=configs)
        try:
            target.create_topics([new])[pair.target].result(30)
            created.append(pair.target)
        except KafkaException as exc:
            if exc.args[0].code() != 36:  # TOPIC_ALREADY_EXISTS: created concurrently, fine
                raise MirrorError(
                    f"could not create target topic {pair.target} on {target_alias}: {exc.args[0].str()}"
                ) from None
    return created


def end_offsets(
    admin: AdminClient, alias: str, partitions: dict[str, int], timeout: float = 15.0
) -> dict[tuple[str, int], int]:
    """The last stable offset (read_committed end) of every partition of ``partitions`` (topic -> count)."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(t, p): latest for t, n in partitions.items() for p in range(n)}
    if not request:
        return {}
    try:
        futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
    except KafkaException as exc:
        raise ClusterError(f"cluster {alias}: cannot read end offsets: {exc.args[0]}") from None


def first_timestamps(
    consumer: Any, positions: dict[tuple[str, int], int], timeout: float = 5.0
) -> dict[tuple[str, int], int]:
    """Timestamp (ms) of the first record at or after each position: how old the oldest record not
    yet mirrored is, which is the replication lag in time."""
    import time

    from confluent_kafka import TopicPartition

    if not positions:
        return {}
    consumer.assign([TopicPartition(t, p, o) for (t, p), o in positions.items()])
    out: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + timeout
    while len(out) < len(positions) and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        key = (msg.topic(), msg.partition())
        if key not in out:
            out[key] = msg.timestamp()[1]
            consumer.pause([TopicPartition(msg.topic(), msg.partition())])
    return out
