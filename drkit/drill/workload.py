"""The drill's traffic: a producer of verifiable records and the consumer group that processes them.

A record's key is ``<run>-k<n>``; its value is ``<key>:<seq>:<crc32 of key:seq>``, so every record read
back is checked for integrity and identified exactly. ``<run>`` is the drill's own tag: a drill run again
on the same topic and group meets the records of earlier runs (on the source past the group's offset,
on the target as copies) and counts none of them as its own. The source consumer counts a record as processed
only once its offset commit succeeded: that is what "processed" means to a failover.
"""

from __future__ import annotations

import threading
import time
import zlib
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from drkit.config import ClusterConfig
from drkit.core.drill import Key, Sent
from drkit.kafka import clients


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


def _now_ms() -> int:
    return int(time.time() * 1000)


class Producer(threading.Thread):
    """Writes ``rate`` records/s over ``keys`` keys to the source; remembers every acknowledged one."""

    def __init__(self, cluster: ClusterConfig, alias: str, topic: str, run: str, keys: int, rate: float) -> None:
        super().__init__(name="drkit-drill-producer", daemon=True)
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
        decoded = decode(msg.value())
        if decoded is not None:
            with self._lock:
                self.acked.append(Sent(decoded[0], decoded[1], _now_ms()))

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
                        self.first_ms = _now_ms()
                    if decoded is None:
                        self.corrupt += 1
                    else:
                        keys.append(decoded)
                if batch:
                    self.consumer.commit(asynchronous=False)
                    self.processed.extend(keys)
                    self.last_ms = _now_ms()
        except Exception as exc:  # the source dying under it is part of a drill
            self.error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        finally:
            self.consumer.close()

    def finish(self, timeout: float) -> None:
        self.stop.set()
        self.join(timeout)


def copies(cluster: ClusterConfig, alias: str, topic: str, run: str, timeout: float = 60.0) -> list[Key]:
    """Every record of drill ``run`` on ``topic`` (all partitions, from the start), read_committed."""
    consumer = clients.consumer(
        cluster, alias, "_drkit-drill-audit", **{"enable.partition.eof": True, "isolation.level": "read_committed"}
    )
    out: list[Key] = []
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return out
        partitions = sorted(meta.partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        pending = {p for p in partitions if ends[p] > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    continue
                decoded = decode(msg.value())
                if decoded is not None and ours(decoded, run):
                    out.append(decoded)
                if (msg.offset() or 0) >= ends[msg.partition() or 0] - 1:
                    pending.discard(msg.partition())
        return out
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
