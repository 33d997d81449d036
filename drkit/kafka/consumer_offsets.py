"""Tailing one cluster's ``__consumer_offsets``: its records decoded (drkit.core.group_commits), in log order
per partition, from the beginning (compaction leaves the latest value of each key, so the fold of what is
read is every group's committed offsets).

The consumer is assigned every partition of the topic and never subscribes: it has no group of its own
and commits nothing. It reads ``read_committed``: a transactional offset commit (``send_offsets_to_transaction``)
appears only when its transaction commits, and one whose transaction aborts never does. A principal that may
not read the topic gets :class:`OffsetsTopicDenied` (naming the cluster and the admin API fallback; the
caller decides whether to fall back); any other broker error is a ClusterError naming the cluster.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from drkit.config import ClusterConfig
from drkit.core.group_commits import CONSUMER_OFFSETS_TOPIC, GroupRecord, MalformedRecord, decode
from drkit.errors import AccessDenied, ClusterError
from drkit.kafka.authz import Operation, refusal
from drkit.kafka.clients import client_config
from drkit.kafka.tail import TAIL_CONSUMER_SETTINGS

#: Records one :meth:`ConsumerOffsetsTail.read` returns at most.
READ_CHUNK = 5000

#: The group id librdkafka requires of a consumer; this one never joins it (assign, no commits).
TAIL_GROUP = "_drkit-offsets-tail"

#: Consumer settings of the tail: a tail reader's (read_committed, from the log start, a fetch at the end
#: answered within ``fetch.wait.max.ms``), without end-of-partition events: this tail never stops at an end.
TAIL_SETTINGS: dict[str, Any] = {**TAIL_CONSUMER_SETTINGS, "enable.partition.eof": False}


class OffsetsTopicDenied(AccessDenied):
    """The principal may not read ``__consumer_offsets``: group commits must come from the admin API."""


class ConsumerOffsetsTail:
    """One cluster's ``__consumer_offsets``, read from the beginning by :meth:`read` in chunks."""

    def __init__(self, cluster: ClusterConfig, alias: str, timeout: float = 10.0, consumer: Any = None) -> None:
        """``consumer``: one built by the caller (a test's fake); by default one from drkit's client settings
        for ``cluster`` (its security properties apply) with TAIL_SETTINGS."""
        self.alias = alias
        self._timeout = timeout
        conf = client_config(cluster, alias, **{"group.id": TAIL_GROUP, **TAIL_SETTINGS})
        self._consumer: Any = consumer if consumer is not None else Consumer(conf)
        self._assigned = False
        self._parts: list[TopicPartition] = []
        self._start_ends: dict[int, int] | None = None

    def _error(self, error: Any) -> Exception:
        kafka_error = error.args[0] if isinstance(error, KafkaException) else error
        code = kafka_error.code() if isinstance(kafka_error, KafkaError) else None
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            # librdkafka looks up the coordinator of the consumer's group id even when it only assigns.
            return AccessDenied(str(refusal(self.alias, error, Operation.DESCRIBE, group=TAIL_GROUP)))
        line = refusal(self.alias, error, Operation.READ, CONSUMER_OFFSETS_TOPIC)
        if line is not None:
            return OffsetsTopicDenied(f"{line}: group commits come from the admin API instead")
        return ClusterError(f"cluster {self.alias}: cannot read {CONSUMER_OFFSETS_TOPIC}: {kafka_error}")

    def _assign(self) -> None:
        try:
            meta = self._consumer.list_topics(CONSUMER_OFFSETS_TOPIC, timeout=self._timeout)
        except KafkaException as exc:
            raise self._error(exc) from None
        topic = meta.topics.get(CONSUMER_OFFSETS_TOPIC)
        if topic is not None and topic.error is not None:
            raise self._error(topic.error)
        if topic is None or not topic.partitions:
            raise ClusterError(
                f"cluster {self.alias}: {CONSUMER_OFFSETS_TOPIC} does not exist yet (no group committed)"
            )
        # OFFSET_BEGINNING (-2): the log start (compaction or retention may have removed the head).
        parts = [TopicPartition(CONSUMER_OFFSETS_TOPIC, p, -2) for p in sorted(topic.partitions)]
        self._consumer.assign(parts)
        self._parts = parts
        self._assigned = True

    def read(self, timeout: float = 0.1) -> list[GroupRecord]:
        """The next records (up to READ_CHUNK; empty when none arrive within ``timeout`` seconds), decoded
        in log order per partition. A malformed record raises MalformedRecord naming its partition and offset."""
        if not self._assigned:
            self._assign()
        try:
            messages = self._consumer.consume(READ_CHUNK, timeout=timeout)
        except KafkaException as exc:
            raise self._error(exc) from None
        out: list[GroupRecord] = []
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise self._error(error)
            key = message.key()
            if key is None:
                raise MalformedRecord(
                    f"{CONSUMER_OFFSETS_TOPIC}-{message.partition()}@{message.offset()}: record without a key"
                )
            out.append(decode(key, message.value(), CONSUMER_OFFSETS_TOPIC, message.partition(), message.offset()))
        return out

    def caught_up(self, idle: bool = False) -> bool:
        """Whether every partition was read up to its end as of the first call (read_committed: its last stable
        offset): from then on, a record read is newer in log order than anything the topic held at that call.

        ``idle``: the caller's last read returned nothing; a partition read from at least once then counts as
        read to its end even if its position stays below that end (transaction markers closing the log are
        never delivered, so the position may not pass them)."""
        if not self._assigned:
            self._assign()
        try:
            if self._start_ends is None:
                self._start_ends = {}
                for tp in self._parts:
                    low, high = self._consumer.get_watermark_offsets(tp, timeout=self._timeout, cached=False)
                    if high > low:  # an empty partition (or one compacted to nothing) has nothing to read
                        self._start_ends[tp.partition] = high
            wanted = [TopicPartition(CONSUMER_OFFSETS_TOPIC, p) for p in sorted(self._start_ends)]
            positions = self._consumer.position(wanted) if wanted else []
        except KafkaException as exc:
            raise self._error(exc) from None
        return all(tp.offset >= self._start_ends[tp.partition] or (idle and tp.offset >= 0) for tp in positions)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> ConsumerOffsetsTail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
