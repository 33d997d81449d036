"""The ``__consumer_offsets`` tail's errors: a refused read names the cluster and the admin API fallback;
other broker errors and malformed records name the cluster or the record."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from drkit.config import ClusterConfig
from drkit.core.group_commits import MalformedRecord
from drkit.errors import AccessDenied, ClusterError
from drkit.kafka.consumer_offsets import ConsumerOffsetsTail, OffsetsTopicDenied

CLUSTER = ClusterConfig(bootstrap_servers="127.0.0.1:1")


class _Partition:
    def __init__(self) -> None:
        self.error = None


class _Topic:
    def __init__(self) -> None:
        self.error = None
        self.partitions = {0: _Partition(), 1: _Partition()}


class _Meta:
    def __init__(self) -> None:
        self.topics = {"__consumer_offsets": _Topic()}


class _Message:
    def __init__(self, key: bytes | None, error: KafkaError | None = None) -> None:
        self._key, self._error = key, error

    def error(self) -> KafkaError | None:
        return self._error

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return None

    def partition(self) -> int:
        return 1

    def offset(self) -> int:
        return 12


class _Consumer:
    def __init__(self, messages: list[_Message] | None = None, fail: KafkaError | None = None) -> None:
        self.messages = messages or []
        self.fail = fail
        self.assigned: list[Any] = []

    def list_topics(self, topic: str, timeout: float) -> _Meta:
        if self.fail is not None:
            raise KafkaException(self.fail)
        return _Meta()

    def assign(self, parts: list[Any]) -> None:
        self.assigned = parts

    def consume(self, count: int, timeout: float) -> list[_Message]:
        return self.messages

    def close(self) -> None:
        pass


def test_a_refused_read_names_the_cluster_and_the_fallback() -> None:
    tail = ConsumerOffsetsTail(CLUSTER, "A", consumer=_Consumer(fail=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
    line = r"^cluster A: principal lacks READ on topic __consumer_offsets .*admin API"
    with pytest.raises(OffsetsTopicDenied, match=line):
        tail.read()
    refused = _Consumer([_Message(None, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))])
    with pytest.raises(OffsetsTopicDenied, match="cluster A"):
        ConsumerOffsetsTail(CLUSTER, "A", consumer=refused).read()


def test_a_refused_group_lookup_is_not_taken_for_the_topic() -> None:
    refused = _Consumer([_Message(None, KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))])
    with pytest.raises(AccessDenied, match=r"^cluster A: principal lacks DESCRIBE on group _drkit-offsets-tail") as err:
        ConsumerOffsetsTail(CLUSTER, "A", consumer=refused).read()
    assert not isinstance(err.value, OffsetsTopicDenied)


def test_other_errors_name_the_cluster() -> None:
    down = _Consumer([_Message(None, KafkaError(KafkaError._TRANSPORT))])
    with pytest.raises(ClusterError, match=r"^cluster B: cannot read __consumer_offsets"):
        ConsumerOffsetsTail(CLUSTER, "B", consumer=down).read()


def test_every_partition_is_assigned_from_the_beginning_and_records_decoded() -> None:
    consumer = _Consumer([_Message(b"\x00\x02\x00\x01g")])
    records = ConsumerOffsetsTail(CLUSTER, "A", consumer=consumer).read()
    assert [(tp.partition, tp.offset) for tp in consumer.assigned] == [(0, -2), (1, -2)]
    assert [(r.kind, r.group) for r in records] == [("group-tombstone", "g")]
    with pytest.raises(MalformedRecord, match="__consumer_offsets-1@12"):
        ConsumerOffsetsTail(CLUSTER, "A", consumer=_Consumer([_Message(b"\x00\x01\x00")])).read()
