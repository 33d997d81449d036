"""A target cluster's checkpoint topic (drkit.core.live_checkpoints says what its records mean).

The topic has one partition (one order for every writer) and is compacted (each key's newest record kept):
created so when missing, by the follower. The writer appends without waiting, through an idempotent producer
(records appended in the order sent, a retry never appended twice) whose answers come back on :meth:`poll`;
the reader (failover, status) reads the partition from its start to the end it had when the read began and
keeps each key's newest value. How long that takes is bounded by the keys plus the part of the log the
cleaner has not compacted yet: the segment being written (``segment.ms`` rolls one every minute: at most a
minute of appends) and the closed segments the cleaner has not reached (it starts once they are half of the
log, ``min.cleanable.dirty.ratio``). Every error names the cluster.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Producer, TopicPartition

from drkit.config import ClusterConfig
from drkit.core.live_checkpoints import CHECKPOINT_TOPIC, parse_key
from drkit.core.topology import TopicCreate
from drkit.errors import AccessDenied, ClusterError, Refusal
from drkit.kafka import clients, topics
from drkit.kafka.authz import Operation, denied

#: The topic's configs: compacted (each key's newest record), a segment rolled every minute so that the
#: cleaner can compact what is older (the segment being written never is): what a reader reads beside the
#: keys stays about a minute of appends.
CHECKPOINT_TOPIC_CONFIGS: dict[str, str] = {
    "cleanup.policy": "compact",
    "segment.ms": str(60_000),
}

#: The group id the reader carries (it never joins nor commits; librdkafka wants one).
READER_GROUP = "_drkit-checkpoints-reader"

#: The producer's settings: every append acknowledged by all in-sync replicas, in order, never twice; a few
#: milliseconds of linger gather one interval's appends into one request.
WRITER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
}

#: An answer: None when the record was appended, else why it was not (AccessDenied: a missing ACL).
Answer = Callable[[Refusal | None], None]


class CheckpointWriter:
    """Appends to cluster ``alias``'s checkpoint topic for one process (not thread-safe)."""

    def __init__(self, cluster: ClusterConfig, alias: str, timeout: float = 10.0) -> None:
        self.alias, self.timeout = alias, timeout
        self._cluster = cluster
        self._producer: Producer | None = None

    def ensure(self) -> None:
        """Create the topic if missing (compacted, one partition); one that exists is used as it is (asked first:
        a principal allowed to append but not to create must not be refused for a topic an operator made)."""
        admin = clients.admin(self._cluster, self.alias, timeout_ms=int(self.timeout * 1000))
        if CHECKPOINT_TOPIC in topics.partition_counts(admin, self.alias, self.timeout):
            return
        create = TopicCreate(CHECKPOINT_TOPIC, CHECKPOINT_TOPIC, 1, CHECKPOINT_TOPIC_CONFIGS)
        topics.create_topics(admin, self.alias, [create], -1, self.timeout)

    def append(self, key: bytes, value: bytes | None, answer: Answer) -> None:
        """Start appending one record (None: a tombstone); ``answer`` is called from a later :meth:`poll`. Raises
        as :meth:`poll` does."""
        producer = self._producer_()
        try:
            try:
                producer.produce(CHECKPOINT_TOPIC, value, key, 0, on_delivery=self._answer(answer))
            except BufferError:
                producer.poll(0.1)  # the queue is full: its answers make room
                producer.produce(CHECKPOINT_TOPIC, value, key, 0, on_delivery=self._answer(answer))
        except BufferError as exc:
            raise ClusterError(f"cluster {self.alias}: appending to {CHECKPOINT_TOPIC}: {exc}") from None
        except KafkaException as exc:
            raise self._lost(exc) from None

    def poll(self, timeout: float = 0.0) -> None:
        """Serve the answers that arrived (waiting up to ``timeout`` s for one). A producer that failed for good
        (a fatal error: its id refused, a sequence lost) is dropped and the error raised (AccessDenied for a
        missing ACL, else ClusterError): the records it had in flight are never answered."""
        if self._producer is not None:
            try:
                self._producer.poll(timeout)
            except KafkaException as exc:
                raise self._lost(exc) from None

    def _lost(self, exc: KafkaException) -> Exception:
        """The producer dropped after ``exc`` (the next append makes a new one); the error to raise."""
        self._producer = None
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            # An idempotent producer's id is granted by WRITE on any topic: the grant to name is the topic's.
            return AccessDenied(
                f"cluster {self.alias}: principal lacks WRITE on topic {CHECKPOINT_TOPIC} (its idempotent "
                "producer's id was refused: CLUSTER_AUTHORIZATION_FAILED)"
            )
        refused = denied(self.alias, exc, Operation.WRITE, CHECKPOINT_TOPIC)
        text = err.str() if isinstance(err, KafkaError) else str(exc)
        return refused or ClusterError(f"cluster {self.alias}: appending to {CHECKPOINT_TOPIC}: {text}")

    def close(self) -> None:
        """Wait up to the timeout for what is in flight (its answers served), then drop the producer."""
        if self._producer is not None:
            self._producer.flush(self.timeout)
            self._producer = None

    def _answer(self, answer: Answer) -> Callable[[Any, Any], None]:
        def done(err: Any, _msg: Any) -> None:
            if err is None:
                answer(None)
                return
            refused = denied(self.alias, err, Operation.WRITE, CHECKPOINT_TOPIC)
            answer(refused or ClusterError(f"cluster {self.alias}: appending to {CHECKPOINT_TOPIC}: {err.str()}"))

        return done

    def _producer_(self) -> Producer:
        if self._producer is None:
            settings = {**WRITER_SETTINGS, "message.timeout.ms": int(self.timeout * 1000)}
            self._producer = clients.producer(self._cluster, self.alias, **settings)
        return self._producer


def read_newest(cluster: ClusterConfig, alias: str, flow: str, timeout: float) -> dict[str, bytes]:
    """Per group of ``flow``, the newest value of its key on cluster ``alias``'s checkpoint topic, as of the
    read's start (a key whose newest record is a tombstone is left out). The topic must exist."""
    consumer = clients.consumer(
        cluster,
        alias,
        READER_GROUP,
        **{"enable.partition.eof": True, "fetch.wait.max.ms": 50, "client.id": f"drkit-ckpt-{uuid.uuid4().hex[:8]}"},
    )
    try:
        partition = TopicPartition(CHECKPOINT_TOPIC, 0)
        try:
            _low, end = consumer.get_watermark_offsets(partition, timeout=timeout, cached=False)
        except KafkaException as exc:
            raise _error(alias, exc.args[0] if exc.args else exc) from None
        newest: dict[str, bytes] = {}
        position = 0
        deadline = time.monotonic() + timeout
        if end > 0:
            consumer.assign([TopicPartition(CHECKPOINT_TOPIC, 0, OFFSET_BEGINNING)])
        while position < end:
            if time.monotonic() >= deadline:
                raise ClusterError(f"cluster {alias}: {CHECKPOINT_TOPIC} was not read to {end} in {timeout:.0f}s")
            for msg in consumer.consume(1000, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        position = max(position, end)  # compaction may leave no record at the end's offset
                        continue
                    raise _error(alias, err)
                position = (msg.offset() or 0) + 1
                if position > end:
                    continue  # appended after the read began
                named = parse_key(msg.key())
                if named is None or named[0] != flow:
                    continue
                value = msg.value()
                if value is None:
                    newest.pop(named[1], None)
                else:
                    newest[named[1]] = value
        return newest
    finally:
        consumer.close()


def _error(alias: str, err: Any) -> Exception:
    refused = denied(alias, err, Operation.READ, CHECKPOINT_TOPIC, READER_GROUP)
    text = err.str() if isinstance(err, KafkaError) else str(err)
    return refused or ClusterError(f"cluster {alias}: reading {CHECKPOINT_TOPIC}: {text}")
