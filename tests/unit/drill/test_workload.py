"""The drill's records identify themselves: key, sequence, checksum, and the run they belong to; the drill
reads the target itself, every partition to its end offsets, or says why it could not."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, TopicPartition
from hypothesis import given
from hypothesis import strategies as st
from support.fakes import FakeConsumerError, FakeRecord

from drkit.drill.workload import decode, encode, ours, read_run
from drkit.errors import ClusterError


@given(st.from_regex(r"[0-9a-f]{6}-k[0-9]{1,4}", fullmatch=True), st.integers(0, 10**9))
def test_a_record_reads_back_as_itself(key: str, seq: int) -> None:
    assert decode(encode(key, seq)) == (key, seq)


def test_an_altered_or_foreign_record_is_not_taken_for_a_drill_record() -> None:
    value = encode("abc123-k1", 7)
    assert decode(value.replace(b":7:", b":8:")) is None  # the checksum no longer matches
    assert decode(b"hello") is None and decode(None) is None


def test_only_the_runs_own_records_count() -> None:
    assert ours(("abc123-k1", 0), "abc123")
    assert not ours(("def456-k1", 0), "abc123")  # an earlier drill on the same topic
    assert not ours(("abc1234-k1", 0), "abc123")


class Record(FakeRecord):
    """A record of the target topic with its own value."""

    def __init__(self, partition: int, offset: int, value: bytes = b"", error: FakeConsumerError | None = None) -> None:
        super().__init__("A.drill", partition, offset, error)
        self._value = value

    def value(self) -> bytes:
        return self._value


def eof(partition: int, offset: int) -> Record:
    return Record(partition, offset, error=FakeConsumerError(KafkaError._PARTITION_EOF))


class TargetConsumer:
    """The target topic's partitions (first and end offsets) and what each consume call hands out; each call
    takes its 0.5 s on the fake clock."""

    def __init__(self, marks: dict[int, tuple[int, int]] | None, batches: list[list[Record]]) -> None:
        self.marks, self.batches, self.now = marks, batches, 0.0
        self.assigned: list[tuple[int, int]] = []

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        if self.marks is None:  # what the broker says of an unknown topic
            meta = SimpleNamespace(error=FakeConsumerError(KafkaError.UNKNOWN_TOPIC_OR_PART), partitions={})
        else:
            meta = SimpleNamespace(error=None, partitions=dict.fromkeys(self.marks))
        return SimpleNamespace(topics={topic: meta})

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float) -> tuple[int, int]:
        assert self.marks is not None
        return self.marks[partition.partition]

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = [(tp.partition, tp.offset) for tp in partitions]

    def consume(self, num_messages: int, timeout: float) -> list[Record]:
        self.now += timeout
        return self.batches.pop(0) if self.batches else []

    def clock(self) -> float:
        return self.now


def rec(partition: int, offset: int, key: str, seq: int) -> Record:
    return Record(partition, offset, encode(key, seq))


def test_the_target_is_read_to_the_end_offsets_with_every_repeat_and_only_the_runs_records() -> None:
    consumer = TargetConsumer(
        {0: (0, 4), 1: (2, 3), 2: (0, 0)},
        [
            [rec(0, 0, "run1-k0", 0), rec(0, 1, "old0-k0", 0), rec(1, 2, "run1-k1", 0)],
            # Offset 3 of partition 0 is a transaction marker: only the end of the partition says it is read.
            [rec(0, 2, "run1-k0", 0), eof(0, 4)],
        ],
    )
    got = read_run(consumer, "B", "A.drill", "run1", 60, consumer.clock)
    assert Counter(got) == Counter({("run1-k0", 0): 2, ("run1-k1", 0): 1})  # the copy made twice counts twice
    assert consumer.assigned == [(0, 0), (1, 2), (2, 0)]  # each partition from its first offset


def test_a_missing_target_topic_is_an_error_naming_the_cluster_and_topic_not_an_empty_list() -> None:
    consumer = TargetConsumer(None, [])
    with pytest.raises(ClusterError, match=r"cannot read A\.drill on cluster B \(the topic is missing\)") as err:
        read_run(consumer, "B", "A.drill", "run1", 60, consumer.clock)
    assert err.value.exit_code == 4


def test_a_read_that_cannot_reach_the_end_offsets_in_time_is_an_error_not_a_partial_list() -> None:
    transport = Record(1, -1, error=FakeConsumerError(KafkaError._TRANSPORT))
    consumer = TargetConsumer({0: (0, 2), 1: (0, 5)}, [[rec(0, 0, "run1-k0", 0), rec(0, 1, "run1-k0", 1)], [transport]])
    with pytest.raises(ClusterError) as err:
        read_run(consumer, "B", "A.drill", "run1", 60, consumer.clock)
    assert str(err.value) == (
        "the drill could not read A.drill on cluster B to its end offsets within 60s: 5 offsets unread "
        "(partition 1 at 0 of 5); the drill cannot count the copies; last error: scripted"
    )
    assert consumer.now == 60.0  # it waited its deadline, then said so


def test_a_fatal_consumer_error_ends_the_read_at_once() -> None:
    fatal = Record(0, -1, error=FakeConsumerError(KafkaError._FATAL, fatal=True))
    consumer = TargetConsumer({0: (0, 2)}, [[fatal]])
    with pytest.raises(ClusterError, match=r"cannot read A\.drill on cluster B: scripted"):
        read_run(consumer, "B", "A.drill", "run1", 60, consumer.clock)
    assert consumer.now == 0.5
