"""The drill's traffic: a producer of verifiable records and the consumer group that processes them.

A record's key is ``<run>-k<n>``; its value is ``<key>:<seq>:<crc32 of key:seq>``, so every record read
back is checked for integrity and identified exactly. ``<run>`` is the drill's own tag: a drill run again
on the same topic and group meets the records of earlier runs (on the source past the group's offset,
on the target as copies) and counts none of them as its own. The source consumer counts a record as processed
only once its offset commit succeeded: that is what "processed" means to a failover.

The drill's count of the copies on the target is its own read of the target topic, every partition
from its start to the end offsets fetched before reading: a missing topic, or a read that cannot reach
those ends in time, is an error naming the cluster and topic, never an empty or partial list.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from drkit.config import ClusterConfig
from drkit.core.drill_accounting import Key, Sent, shortfall_detail, shortfalls
from drkit.drill.clock import now_ms
from drkit.errors import ClusterError
from drkit.kafka import clients

#: Told (partition, offset, value) of every record the source acknowledged, from its delivery report.
OnAcked = Callable[[int, int, bytes], None]


def encode(key: str, seq: int) -> bytes:
    body = f"{key}:{seq}"
    return f"{body}:{zlib.crc32(body.encode())}".encode()


def decode(value: bytes | None) -> Key | None:
    """(key, seq) of a drill record; None when it does not match its checksum (or is not one)."""
    try:
        key, seq, crc = (value or b"").decode().rsplit(":", 2)
        if zlib.crc32(f"{key}:{seq}".encode()) != int(crc):
            return None
        return key, int(seq)
    except ValueError:
        return None


def ours(key: Key, run: str) -> bool:
    return key[0].startswith(f"{run}-")


class Producer(threading.Thread):
    """Writes ``rate`` records/s over ``keys`` keys to the source; remembers every acknowledged one."""

    def __init__(
        self,
        cluster: ClusterConfig,
        alias: str,
        topic: str,
        run: str,
        keys: int,
        rate: float,
        on_acked: OnAcked | None = None,
    ) -> None:
        super().__init__(name="drkit-drill-producer", daemon=True)
        self.on_acked = on_acked
        self.topic, self.run_tag, self.keys, self.rate = topic, run, keys, rate
        self.producer = clients.producer(
            cluster,
            alias,
            **{
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 5000,
                # The drill kills this producer's cluster on purpose: its connection errors are the plan,
                # not news (failed deliveries are counted, never acknowledged).
                "log_level": 2,
            },
        )
        self.acked: list[Sent] = []
        self.failed = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            return
        partition, offset, value = msg.partition(), msg.offset(), msg.value()
        if self.on_acked is not None:
            self.on_acked(partition, offset, value)
        decoded = decode(value)
        if decoded is not None:
            with self._lock:
                self.acked.append(Sent(decoded[0], decoded[1], now_ms(), partition, offset))

    def run(self) -> None:
        n, started = 0, time.monotonic()
        seqs = [0] * self.keys
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while n < due and not self.stop.is_set():
                k = n % self.keys
                key = f"{self.run_tag}-k{k}"
                try:
                    self.producer.produce(
                        self.topic, key=key.encode(), value=encode(key, seqs[k]), on_delivery=self._delivered
                    )
                except BufferError:
                    break
                seqs[k] += 1
                n += 1
            self.producer.poll(0.01)

    def finish(self, timeout: float) -> None:
        self.stop.set()
        self.join(timeout)
        self.producer.flush(timeout)

    def sent(self) -> list[Sent]:
        with self._lock:
            return list(self.acked)


class GroupConsumer(threading.Thread):
    """One consumer of the drill's group on one cluster: processes, commits, and only then counts."""

    def __init__(self, cluster: ClusterConfig, alias: str, topic: str, run: str, group: str) -> None:
        super().__init__(name=f"drkit-drill-consumer-{alias}", daemon=True)
        self.run_tag = run
        self.consumer = clients.consumer(
            cluster, alias, group, **{"auto.offset.reset": "earliest", "isolation.level": "read_committed"}
        )
        self.topic = topic
        self.processed: list[Key] = []
        self.corrupt = 0
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        self.error: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            self.consumer.subscribe([self.topic])
            while not self.stop.is_set():
                batch = self.consumer.consume(200, timeout=0.5)
                keys: list[Key] = []
                for msg in batch:
                    if msg.error() is not None:
                        continue
                    decoded = decode(msg.value())
                    if decoded is not None and not ours(decoded, self.run_tag):
                        continue  # an earlier drill's record
                    if self.first_ms is None:
                        self.first_ms = now_ms()
                    if decoded is None:
                        self.corrupt += 1
                    else:
                        keys.append(decoded)
                if batch:
                    self.consumer.commit(asynchronous=False)
                    self.processed.extend(keys)
                    self.last_ms = now_ms()
        except Exception as exc:  # the source dying under it is part of a drill
            self.error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        finally:
            self.consumer.close()

    def finish(self, timeout: float) -> None:
        self.stop.set()
        self.join(timeout)


class TargetConsumer(Protocol):
    """What :func:`read_run` asks of a consumer (confluent_kafka.Consumer's calls)."""

    def list_topics(self, topic: str, timeout: float) -> Any: ...

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float) -> tuple[int, int]: ...

    def assign(self, partitions: list[TopicPartition]) -> None: ...

    def consume(self, num_messages: int, timeout: float) -> list[Any]: ...


def read_run(
    consumer: TargetConsumer,
    alias: str,
    topic: str,
    run: str,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
) -> list[Key]:
    """Every record of drill ``run`` on ``topic``, every partition from its first offset to the end offset
    fetched before reading, repeats kept. ClusterError (naming ``alias`` and ``topic``) when the topic is
    missing, its offsets cannot be fetched, or the read has not reached every end after ``timeout`` s."""
    deadline = clock() + timeout
    try:
        meta = consumer.list_topics(topic, timeout=min(10.0, timeout)).topics.get(topic)
    except KafkaException as exc:
        raise ClusterError(f"the drill cannot list {topic} on cluster {alias}: {_first_line(exc)}") from None
    if meta is None or meta.error is not None or not meta.partitions:
        unknown = meta is None or meta.error is None or meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        why = "the topic is missing" if unknown else str(meta.error.str())
        raise ClusterError(
            f"the drill cannot read {topic} on cluster {alias} ({why}): the mirror's copies cannot be counted; "
            "check the mirror ran (`drkit mirror` log in the drill's folder) and created the topic"
        )
    partitions = sorted(meta.partitions)
    try:
        marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions}
    except KafkaException as exc:
        raise ClusterError(
            f"the drill cannot fetch the end offsets of {topic} on cluster {alias}: {_first_line(exc)}"
        ) from None
    ends = {p: high for p, (_low, high) in marks.items()}
    # The next offset each partition's read returns: records below the first offset are gone (retention),
    # not unread.
    reached = {p: low for p, (low, _high) in marks.items()}
    consumer.assign([TopicPartition(topic, p, low) for p, (low, _high) in marks.items()])
    out: list[Key] = []
    last_error = ""
    while shortfalls(ends, reached) and clock() < deadline:
        for msg in consumer.consume(1000, timeout=0.5):
            error, partition = msg.error(), msg.partition()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                if error.fatal():
                    raise ClusterError(f"the drill cannot read {topic} on cluster {alias}: {error.str()}")
                last_error = f"; last error: {error.str()}"
                continue
            # A record, or the end of the partition (its offset: the next one): read_committed skips
            # aborted records and transaction markers, so the end is known only from there.
            after = msg.offset() + (0 if error is not None else 1)
            reached[partition] = max(reached.get(partition, 0), after)
            if error is None:
                decoded = decode(msg.value())
                if decoded is not None and ours(decoded, run):
                    out.append(decoded)
    short = shortfalls(ends, reached)
    if short:
        raise ClusterError(shortfall_detail(topic, alias, short, timeout) + last_error)
    return out


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def copies(cluster: ClusterConfig, alias: str, topic: str, run: str, timeout: float = 60.0) -> list[Key]:
    """Every record of drill ``run`` on ``topic`` (all partitions, from the start), read_committed, repeats
    kept; ClusterError when the topic cannot be read to its end (:func:`read_run`)."""
    consumer = clients.consumer(
        cluster,
        alias,
        "_drkit-drill-audit",
        **{
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        },
    )
    try:
        return read_run(consumer, alias, topic, run, timeout)
    finally:
        consumer.close()


class Bystander:
    """A member of the drill's group on the target that consumes nothing and commits nothing: an instance
    of the application started there too early (a broken setup the failover must refuse)."""

    def __init__(self, cluster: ClusterConfig, alias: str, topic: str, group: str) -> None:
        self.consumer = clients.consumer(
            cluster, alias, group, **{"auto.offset.reset": "latest", "enable.auto.commit": False}
        )
        self.topic = topic
        self.stop = threading.Event()
        self.joined = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"drkit-drill-bystander-{alias}", daemon=True)

    def start(self, timeout: float = 60.0) -> bool:
        """Join the group; True once a partition is assigned (the group is then active on the cluster)."""
        self._thread.start()
        return self.joined.wait(timeout)

    def _run(self) -> None:
        try:
            self.consumer.subscribe([self.topic])
            while not self.stop.is_set():
                self.consumer.poll(0.5)  # keeps the membership; reads nothing (``latest``), commits nothing
                if self.consumer.assignment():
                    self.joined.set()
        finally:
            self.consumer.close()

    def finish(self, timeout: float = 30.0) -> None:
        self.stop.set()
        self._thread.join(timeout)
