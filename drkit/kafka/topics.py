"""Topic administration: list and describe topics (partitions, ids, configs), create, grow and configure
target topics; every broker error names its cluster."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from drkit.core.topology import ConfigChange, PartitionGrowth, SourceTopic, TopicCreate
from drkit.errors import ClusterError, DrkitError, MirrorError
from drkit.kafka.authz import Operation, denied

_ABSENT = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID)
_TOPIC_ALREADY_EXISTS = KafkaError.TOPIC_ALREADY_EXISTS
_INVALID_PARTITIONS = KafkaError.INVALID_PARTITIONS


def _answers(
    alias: str,
    operation: Operation,
    what: str,
    request: Callable[[], Mapping[Any, Any]],
    failed: Callable[[str, Any], DrkitError],
    fine: Collection[int] = (),
    timeout: float | None = None,
) -> list[tuple[str, Any]]:
    """(topic, answer) for each topic of one admin request that answered; one answering with an error code
    in ``fine`` is left out. Any other error raises: a refusal (exit 4) where the cluster's ACLs denied it,
    else ``failed(topic, error)``, or ``cannot {what}`` when the cluster did not take the request at all."""
    try:
        futures = request()
    except KafkaException as exc:
        raise denied(alias, exc, operation) or ClusterError(f"cluster {alias}: cannot {what}: {exc.args[0]}") from None
    out: list[tuple[str, Any]] = []
    for key, future in futures.items():
        name = key if isinstance(key, str) else key.name  # a topic's name, or its ConfigResource
        try:
            out.append((name, future.result(timeout)))
        except KafkaException as exc:
            if exc.args[0].code() in fine:
                continue
            raise denied(alias, exc, operation, name) or failed(name, exc.args[0]) from None
    return out


def partition_counts(admin: AdminClient, alias: str, timeout: float = 15.0) -> dict[str, int]:
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ClusterError(f"cluster {alias} is unreachable: {exc.args[0]}") from None
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def describe_topics(
    admin: AdminClient, alias: str, names: Iterable[str], configs: bool, timeout: float = 15.0
) -> dict[str, SourceTopic]:
    """Partitions, topic id and (with ``configs``) the properties set on each topic of ``names``; a topic
    that does not exist (deleted meanwhile) is left out."""
    from confluent_kafka import TopicCollection

    wanted = sorted(set(names))
    if not wanted:
        return {}
    answers = _answers(
        alias,
        Operation.DESCRIBE,
        "describe topics",
        lambda: admin.describe_topics(TopicCollection(wanted), request_timeout=timeout),
        lambda name, error: ClusterError(f"cluster {alias}: cannot describe topic {name}: {error}"),
        _ABSENT,
    )
    out = {
        name: SourceTopic(name, len(d.partitions), str(d.topic_id) if d.topic_id is not None else "")
        for name, d in answers
    }
    if configs and out:
        found = topic_configs(admin, alias, list(out), timeout)
        out = {n: SourceTopic(t.name, t.partitions, t.topic_id, found.get(n, {})) for n, t in out.items()}
    return out


def topic_configs(
    admin: AdminClient, alias: str, topics: list[str], timeout: float = 15.0
) -> dict[str, dict[str, str]]:
    """The properties set on each topic (not broker defaults), secrets never included (Kafka does not
    return sensitive values)."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    answers = _answers(
        alias,
        Operation.DESCRIBE_CONFIGS,
        "describe topic configs",
        lambda: admin.describe_configs(resources, request_timeout=timeout),
        lambda name, error: ClusterError(f"cluster {alias}: cannot describe configs of {name}: {error}"),
        _ABSENT,
    )
    return {
        name: {
            n: e.value
            for n, e in entries.items()
            if e.value is not None and not e.is_sensitive and _set_on_topic(e.source)
        }
        for name, entries in answers
    }


def _set_on_topic(source: Any) -> bool:
    """Whether a config's source is the topic itself (not a broker or built-in default); confluent-kafka
    gives the source as a ConfigSource or as its int value."""
    from confluent_kafka.admin import ConfigSource

    return bool(getattr(source, "value", source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


def create_topics(
    admin: AdminClient, alias: str, creates: Iterable[TopicCreate], replication_factor: int, timeout: float = 30.0
) -> list[str]:
    """Create each topic with its partitions and configs; one that exists already (made concurrently) is
    fine. Returns the names created."""
    wanted = list(creates)
    if not wanted:
        return []
    new = [NewTopic(c.target, c.partitions, replication_factor, config=dict(c.configs)) for c in wanted]
    created = _answers(
        alias,
        Operation.CREATE,
        "create topics",
        lambda: admin.create_topics(new, request_timeout=timeout),
        lambda name, error: MirrorError(f"could not create target topic {name} on {alias}: {error.str()}"),
        (_TOPIC_ALREADY_EXISTS,),
        timeout,
    )
    return sorted(name for name, _ in created)


def create_partitions(
    admin: AdminClient, alias: str, growths: Iterable[PartitionGrowth], timeout: float = 30.0
) -> list[str]:
    """Grow each topic to its wanted partition count (CreatePartitions); a topic grown concurrently to at
    least that count is fine. Returns the names grown."""
    from confluent_kafka.admin import NewPartitions

    wanted = list(growths)
    if not wanted:
        return []
    grown = _answers(
        alias,
        Operation.ALTER,
        "add partitions",
        lambda: admin.create_partitions([NewPartitions(g.target, g.wanted) for g in wanted], request_timeout=timeout),
        lambda name, error: MirrorError(f"could not add partitions to target topic {name} on {alias}: {error.str()}"),
        (_INVALID_PARTITIONS,),  # already has that many: grown concurrently
        timeout,
    )
    return sorted(name for name, _ in grown)


def alter_configs(admin: AdminClient, alias: str, changes: Iterable[ConfigChange], timeout: float = 30.0) -> list[str]:
    """Set the changed properties of each topic with incremental alter-configs (SET only: nothing else of
    the topic's configuration is touched). Returns the names altered."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    wanted = list(changes)
    if not wanted:
        return []
    resources = [
        ConfigResource(
            ConfigResource.Type.TOPIC,
            c.target,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(c.set.items())
            ],
        )
        for c in wanted
    ]
    altered = _answers(
        alias,
        Operation.ALTER_CONFIGS,
        "alter topic configs",
        lambda: admin.incremental_alter_configs(resources, request_timeout=timeout),
        lambda name, error: MirrorError(f"could not set configs of target topic {name} on {alias}: {error.str()}"),
        timeout=timeout,
    )
    return sorted(name for name, _ in altered)


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
    topic: str | None = None  # the partition being read when it failed: a refusal names its topic
    try:
        futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
        out = {}
        for tp, f in futures.items():
            topic = tp.topic
            out[(tp.topic, tp.partition)] = f.result().offset
        return out
    except KafkaException as exc:
        raise denied(alias, exc, Operation.DESCRIBE, topic) or ClusterError(
            f"cluster {alias}: cannot read end offsets: {exc.args[0]}"
        ) from None


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
