"""When the ``__consumer_offsets`` tail has read every partition to its end as of its first question: the
follower writes nothing before (drkit.translator.follow), so this decides whether a live checkpoint can move back."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicPartition

from drkit.config import ClusterConfig
from drkit.kafka.consumer_offsets import ConsumerOffsetsTail

CLUSTER = ClusterConfig(bootstrap_servers="127.0.0.1:1")


class _Partition:
    error = None


class _Topic:
    error = None
    partitions = {0: _Partition(), 1: _Partition(), 2: _Partition()}


class _Meta:
    topics = {"__consumer_offsets": _Topic()}


class _Consumer:
    """Partition 0 holds 10..20, partition 1 5..9, partition 2 is empty (compacted to nothing: 7..7)."""

    def __init__(self) -> None:
        self.marks = {0: (10, 20), 1: (5, 9), 2: (7, 7)}
        self.at: dict[int, int] = {}
        self.asked = 0

    def list_topics(self, topic: str, timeout: float) -> _Meta:
        return _Meta()

    def assign(self, parts: list[Any]) -> None:
        pass

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        self.asked += 1
        return self.marks[tp.partition]

    def position(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.at.get(tp.partition, -1001)) for tp in parts]

    def close(self) -> None:
        pass


def test_caught_up_at_the_ends_as_of_the_first_question() -> None:
    consumer = _Consumer()
    tail = ConsumerOffsetsTail(CLUSTER, "A", consumer=consumer)
    assert not tail.caught_up()
    consumer.at = {0: 20, 1: 8}
    assert not tail.caught_up()
    consumer.marks = {0: (10, 90), 1: (5, 90), 2: (7, 90)}  # written since: not waited for
    consumer.at = {0: 20, 1: 9}
    assert tail.caught_up()
    assert consumer.asked == 3  # the ends were asked once


def test_an_idle_read_counts_only_for_partitions_read_from() -> None:
    consumer = _Consumer()
    tail = ConsumerOffsetsTail(CLUSTER, "A", consumer=consumer)
    assert not tail.caught_up(idle=True)  # nothing fetched yet: an empty first read proves nothing
    consumer.at = {0: 19, 1: 8}  # a transaction marker closes each log: never delivered
    assert not tail.caught_up()
    assert tail.caught_up(idle=True)
