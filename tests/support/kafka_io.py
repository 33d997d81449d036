"""Produce records and read whole partitions back, for record-by-record comparisons."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from drkit.core.mirror_lease import EPOCH_HEADER
from drkit.core.origin import ORIGIN_HEADER, origin_of


@dataclass(frozen=True)
class Rec:
    """One record as it is on a partition (the fields a faithful copy must preserve)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    def content(self) -> tuple[object, ...]:
        """What must be equal between a source record and its copy: not the offset, nor the origin and epoch
        headers the mirror adds to each copy (checked on their own: :meth:`origin`, :meth:`epoch`)."""
        own = tuple(h for h in self.headers if h[0] not in (ORIGIN_HEADER, EPOCH_HEADER))
        return (self.partition, self.key, self.value, own, self.timestamp)

    def epoch(self) -> int | None:
        """The lease epoch of the mirror process that made this copy (its last epoch header); None: none."""
        found = [v for k, v in self.headers if k == EPOCH_HEADER]
        return int(found[-1]) if found and found[-1] is not None else None

    def origin(self, alias: str) -> int | None:
        """The offset on cluster ``alias`` this record is a copy of, by its last origin header."""
        return origin_of(list(self.headers), alias)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    config: dict[str, str] | None = None,
    client: dict[str, str] | None = None,
) -> None:
    """``client``: security properties (a secure cluster's principal), here and below."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    futures[topic].result(30)


def produce(bootstrap: str, topic: str, records: list[dict[str, object]], **conf: object) -> list[tuple[int, int]]:
    """Produce ``records`` (dicts of key/value/partition/headers/timestamp); return (partition, offset)s."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, **conf})
    out: list[tuple[int, int]] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            out.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for r in records:
        kwargs = {k: v for k, v in r.items() if v is not None or k in ("key", "value")}
        producer.produce(topic, on_delivery=on_delivery, **kwargs)  # type: ignore[arg-type]
        producer.poll(0)
    producer.flush(60)
    if errors:
        raise KafkaException(errors[0])
    return out


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("_drkit-test-read")})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
    finally:
        consumer.close()


#: Errors of a partition whose leader is not settled yet (a topic just created, a broker just restarted).
_UNSETTLED = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART)


def _high_watermark(consumer: Consumer, topic: str, partition: int, settle_seconds: float = 30.0) -> int:
    """The partition's high watermark, asked again while its leader is not settled (a CI run's wait on a copy
    the mirror had just created saw NOT_LEADER_FOR_PARTITION)."""
    deadline = time.monotonic() + settle_seconds
    while True:
        try:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            return int(high)
        except KafkaException as exc:
            if exc.args[0].code() not in _UNSETTLED or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def read_all(
    bootstrap: str,
    topic: str,
    isolation: str = "read_committed",
    start: dict[int, int] | None = None,
    client: dict[str, str] | None = None,
) -> list[Rec]:
    """Every record of every partition of ``topic`` (from ``start`` offsets), sorted by (partition, offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("_drkit-test-read"),
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            **(client or {}),
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        partitions = sorted(meta.partitions)
        ends = {}
        for p in partitions:
            ends[p] = _high_watermark(consumer, topic, p)
        begin = {p: (start or {}).get(p, 0) for p in partitions}
        consumer.assign([TopicPartition(topic, p, begin[p]) for p in partitions])
        pending = {p for p in partitions if begin[p] < ends[p]}
        records: list[Rec] = []
        idle = 0
        while pending and idle < 60:
            msg = consumer.poll(1.0)
            if msg is None:
                idle += 1
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    pending.discard(msg.partition())
                    continue
                raise KafkaException(msg.error())
            headers = tuple((k, v) for k, v in (msg.headers() or []))
            records.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
            if msg.offset() >= ends[msg.partition()] - 1:
                pending.discard(msg.partition())
        if pending:
            raise TimeoutError(f"could not read {topic} partitions {sorted(pending)} to their end")
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def commit(
    bootstrap: str, group: str, offsets: dict[tuple[str, int], int], client: dict[str, str] | None = None
) -> None:
    """Commit ``offsets`` for ``group`` as its consumers would (the group has no active members)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **(client or {})}
    )
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def consume_as_group(
    bootstrap: str, group: str, topic: str, count: int, idle_polls: int = 20, client: dict[str, str] | None = None
) -> list[Rec]:
    """A real consumer of ``group`` reads ``count`` records from its committed position, then commits."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **(client or {}),
        }
    )
    out: list[Rec] = []
    try:
        consumer.subscribe([topic])
        idle = 0
        while len(out) < count and idle < idle_polls:
            msg = consumer.poll(1.0)
            if msg is None:
                idle += 1
                continue
            if msg.error():
                continue
            headers = tuple((k, v) for k, v in (msg.headers() or []))
            out.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
        if out:
            consumer.commit(asynchronous=False)
        return out
    finally:
        consumer.close()


def committed_on(bootstrap: str, group: str, topic: str, client: dict[str, str] | None = None) -> dict[int, int]:
    """The group's committed offsets on ``topic`` (partitions without a commit left out)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **(client or {})}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        tps = consumer.committed([TopicPartition(topic, p) for p in meta.partitions], timeout=30)
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    finally:
        consumer.close()


def delete_records(bootstrap: str, topic: str, before: int, partition: int = 0) -> None:
    """delete-records on the source: the partition's records below ``before`` are gone."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.delete_records([TopicPartition(topic, partition, before)]).values()
    assert future.result(30).low_watermark == before
