"""ContinuousCopier against a scripted source log and target (no broker): what a batch takes is exactly
its planned range, whatever the copier copied ahead; a lane that fails or stalls hands the batch back; a
target that does not acknowledge is waited for with the same producer. The copier on real brokers:
tests/integration/mirror/test_continuous_copy.py, tests/integration/mirror/test_target_faults.py."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from support.fakes import FakeConsumerError, FakeMessage, FakeRecord
from support.waiting import wait_until

from drkit.core.batch import EARLIEST
from drkit.core.continuous import TakeFailure
from drkit.core.origin import ORIGIN_HEADER
from drkit.mirror.continuous import ContinuousCopier
from drkit.mirror.lanes import AHEAD_MAX_RECORDS, ahead_limit
from drkit.mirror.reader import BatchAbandoned

TOPICS = {"t": "A.t", "r": "A.r"}


class Source:
    """Partitions as lists of offsets (holes allowed); a consumer reads them from its assigned positions and
    reports each partition's end once per arrival there, as librdkafka does."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[int]] = {}
        self.headers: dict[tuple[str, int, int], Any] = {}
        self.lock = threading.Lock()
        self.assigned: list[list[tuple[str, int, int]]] = []
        self.per_call = 10**9  # records one consume returns at most, partition after partition

    def append(self, topic: str, partition: int, offsets: range | list[int]) -> None:
        with self.lock:
            self.logs.setdefault((topic, partition), []).extend(offsets)

    def end(self, key: tuple[str, int]) -> int:
        log = self.logs.get(key, [])
        return log[-1] + 1 if log else 0

    def consumer(self) -> Consumer:
        return Consumer(self)


class Consumer:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.positions: dict[tuple[str, int], int] = {}
        self.at_end: set[tuple[str, int]] = set()
        self.paused: set[tuple[str, int]] = set()

    def list_topics(self, *args: Any, **kwargs: Any) -> None:
        return None

    def assign(self, tps: list[Any]) -> None:
        self.source.assigned.append([(tp.topic, tp.partition, tp.offset) for tp in tps])
        self.positions = {(tp.topic, tp.partition): max(tp.offset, 0) for tp in tps}
        self.at_end = set()
        self.paused = set()

    def unassign(self) -> None:
        self.positions = {}

    def pause(self, tps: list[Any]) -> None:
        self.paused |= {(tp.topic, tp.partition) for tp in tps}

    def resume(self, tps: list[Any]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in tps}

    def close(self) -> None:
        self.positions = {}

    def consume(self, n: int, timeout: float) -> list[FakeRecord]:
        out: list[FakeRecord] = []
        with self.source.lock:
            for key, position in list(self.positions.items()):
                room = min(n, self.source.per_call) - len(out)
                if key in self.paused or room <= 0:
                    continue
                log = [o for o in self.source.logs.get(key, []) if o >= position][:room]
                for offset in log:
                    out.append(FakeRecord(*key, offset, headers=self.source.headers.get((*key, offset))))
                    self.positions[key] = offset + 1
                end = self.source.end(key)
                if log:
                    self.at_end.discard(key)
                if self.positions[key] >= end and key not in self.at_end and self.positions[key] > 0:
                    out.append(
                        FakeRecord(*key, max(end, self.positions[key]), FakeConsumerError(KafkaError._PARTITION_EOF))
                    )
                    self.at_end.add(key)
        if not out:
            time.sleep(timeout)
        return out


class Target:
    """Appends each produced record at the next offset of its partition; reports on poll/flush, in order."""

    def __init__(self, refuse: set[tuple[str, int]] | None = None, first: int = 100) -> None:
        self.logs: dict[tuple[str, int], list[tuple[int, bytes, Any]]] = {}
        self.pending: list[tuple[Any, Any, Any]] = []
        self.refuse = refuse or set()
        self.first = first
        self.hold = False  # no reports while set: a target that does not answer
        self.made = 0
        self.conf: dict[str, Any] = {}
        self.capacity: int | None = None  # the producer's queue: BufferError when this many wait for a report
        #: partitions the producer's metadata does not hold until list_topics asks for their topic
        self.unknown: set[tuple[str, int]] = set()

    def producer(self, conf: dict[str, Any], alias: str) -> Target:
        self.made += 1
        self.conf = conf
        return self

    def produce(self, topic: str, value: bytes, key: bytes, partition: int, cb: Any, **kw: Any) -> None:
        if self.capacity is not None and len(self.pending) >= self.capacity:
            raise BufferError("Local: Queue full")
        if (topic, partition) in self.unknown:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        log = self.logs.setdefault((topic, partition), [])
        offset = self.first + len(log)
        if (topic, partition) in self.refuse:
            self.pending.append(
                (cb, FakeConsumerError(KafkaError.MSG_SIZE_TOO_LARGE), FakeMessage(topic, partition, -1))
            )
            return
        log.append((offset, value, kw["headers"]))
        self.pending.append((cb, None, FakeMessage(topic, partition, offset)))

    def poll(self, timeout: float = 0) -> int:
        if self.hold:
            return 0
        done, self.pending = self.pending, []
        for cb, err, report in done:
            cb(err, report)
        return len(done)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return len(self.pending)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.unknown = {u for u in self.unknown if topic is not None and u[0] != topic}


@pytest.fixture
def parts() -> Iterator[tuple[Source, Target, ContinuousCopier]]:
    source, target = Source(), Target()
    copier = ContinuousCopier("A->B", source.consumer, "A", "B", target.producer, stall_seconds=0.5)
    yield source, target, copier
    copier.close()


def never() -> bool:
    return False


def rows(table: Any) -> list[tuple[int, int, int, int]]:
    return [(r["partition"], r["upstream_first"], r["upstream_last"], r["downstream_first"]) for r in table.to_pylist()]


def test_a_batch_takes_exactly_its_range_and_the_copies_ahead_wait_for_the_next(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, target, copier = parts
    source.append("t", 0, range(0, 10))
    first = copier.take({("t", 0): (EARLIEST, 10)}, {("t", 0): 10}, TOPICS, {}, never)
    assert first.rows is not None and rows(first.rows) == [(0, 0, 9, 100)]
    source.append("t", 0, range(10, 30))  # copied as they arrive, before any batch plans them
    wait_until(lambda: len(target.logs[("A.t", 0)]) >= 30, 5, "the 20 new records copied as they arrive", 0.01)
    assert len(target.logs[("A.t", 0)]) == 30 and copier.held() == 20
    second = copier.take({("t", 0): (10, 18)}, {("t", 0): 18}, TOPICS, {}, never)
    assert second.rows is not None and rows(second.rows) == [(0, 10, 17, 110)]
    third = copier.take({("t", 0): (18, 30)}, {("t", 0): 30}, TOPICS, {}, never)
    assert third.rows is not None and rows(third.rows) == [(0, 18, 29, 118)]
    assert copier.held() == 0
    # Each source record is on the target once, with its origin, in order.
    copies = target.logs[("A.t", 0)]
    assert [v for _, v, _ in copies] == [b"v%d" % i for i in range(30)]
    assert copies[5][2][-1] == (ORIGIN_HEADER, b"A:5")


def test_a_partition_added_to_a_topic_already_copied_is_copied_once_its_metadata_is_refreshed(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, target, copier = parts
    source.append("t", 0, range(5))
    assert copier.take({("t", 0): (EARLIEST, 5)}, {("t", 0): 5}, TOPICS, {}, never).rows is not None
    # The topic grows: its new partition is on the target, but the producer's metadata predates it.
    target.unknown.add(("A.t", 1))
    source.append("t", 1, range(3))
    taken = copier.take({("t", 0): (5, 5), ("t", 1): (EARLIEST, 3)}, {("t", 0): 5, ("t", 1): 3}, TOPICS, {}, never)
    assert taken.failure is None, taken.reason
    assert taken.rows is not None and rows(taken.rows) == [(1, 0, 2, 100)]
    assert [v for _, v, _ in target.logs[("A.t", 1)]] == [b"v0", b"v1", b"v2"]


def test_holes_fold_into_separate_ranges_and_a_range_ending_in_a_hole_is_covered_by_the_end(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, _, copier = parts
    source.append("t", 0, [0, 1, 2, 5, 6])  # 3 and 4 compacted away; 7 a transaction marker: the end is 8
    source.logs[("t", 0)].append(7)
    taken = copier.take({("t", 0): (0, 8)}, {("t", 0): 8}, TOPICS, {}, never)
    assert taken.rows is not None
    assert rows(taken.rows) == [(0, 0, 2, 100), (0, 5, 7, 103)]


def test_a_partition_the_plan_restarts_elsewhere_is_copied_from_there(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, _, copier = parts
    source.append("t", 0, range(0, 20))
    assert copier.take({("t", 0): (0, 10)}, {("t", 0): 10}, TOPICS, {}, never).rows is not None
    # A hold: the next batch owes the partition from 4 (records written again there), not from 10.
    taken = copier.take({("t", 0): (4, 20)}, {("t", 0): 20}, TOPICS, {}, never)
    assert taken.rows is not None and rows(taken.rows)[0][:3] == (0, 4, 19)
    assert source.assigned[-1] == [("t", 0, 4)]


def test_topics_no_plan_gave_it_are_never_copied(parts: tuple[Source, Target, ContinuousCopier]) -> None:
    source, target, copier = parts
    source.append("t", 0, range(5))
    source.append("r", 0, range(5))  # refused by the plan: in no range, not in the topic map
    taken = copier.take({("t", 0): (0, 5)}, {("t", 0): 5, ("r", 0): 5}, {"t": "A.t"}, {}, never)
    assert taken.rows is not None and rows(taken.rows) == [(0, 0, 4, 100)]
    assert ("A.r", 0) not in target.logs
    assert all(t != "r" for assigned in source.assigned for t, _, _ in assigned)


def test_records_that_came_from_the_target_are_skipped_and_counted(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, target, copier = parts
    source.append("t", 0, range(4))
    source.headers[("t", 0, 2)] = [(ORIGIN_HEADER, b"B:77")]
    taken = copier.take({("t", 0): (0, 4)}, {("t", 0): 4}, TOPICS, {}, never)
    assert taken.rows is not None and taken.skipped == 1
    assert rows(taken.rows) == [(0, 0, 1, 100), (0, 3, 3, 102)]
    assert len(target.logs[("A.t", 0)]) == 3


def test_a_refused_delivery_hands_the_batch_back_and_drops_every_copy(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, target, copier = parts
    target.refuse.add(("A.t", 1))
    source.append("t", 0, range(5))
    source.append("t", 1, range(5))
    taken = copier.take({("t", 0): (0, 5), ("t", 1): (0, 5)}, {("t", 0): 5, ("t", 1): 5}, TOPICS, {}, never)
    assert taken.rows is None and taken.failure is TakeFailure.LANE_FAILED
    assert "could not be delivered to A.t/1" in taken.reason
    assert copier.held() == 0  # t/0's copies are orphans now: the batch copies its own records
    # A record refused is no fatal error: the next lanes are copied by the same producer.
    target.refuse.clear()
    source.append("t", 0, range(5, 8))
    assert copier.take({("t", 0): (5, 8)}, {("t", 0): 8}, TOPICS, {}, never).rows is not None
    assert target.made == 1


def test_only_a_fatal_error_makes_a_fresh_producer_and_the_log_names_it(
    parts: tuple[Source, Target, ContinuousCopier], caplog: pytest.LogCaptureFixture
) -> None:
    source, target, copier = parts
    source.append("t", 0, range(5))
    assert copier.take({("t", 0): (0, 5)}, {("t", 0): 5}, TOPICS, {}, never).rows is not None
    fatal = FakeConsumerError(KafkaError._FATAL, fatal=True)
    target.conf["error_cb"](FakeConsumerError(KafkaError._TRANSPORT, retriable=True))  # retried by librdkafka
    target.conf["error_cb"](fatal)  # as librdkafka's poll serves it
    target.refuse.add(("A.t", 0))
    source.append("t", 0, range(5, 10))
    with caplog.at_level(logging.WARNING, "drkit.mirror.continuous"):
        failed = copier.take({("t", 0): (5, 10)}, {("t", 0): 10}, TOPICS, {}, never)
        assert failed.rows is None and failed.failure is TakeFailure.LANE_FAILED
        target.refuse.clear()
        taken = copier.take({("t", 0): (5, 10)}, {("t", 0): 10}, TOPICS, {}, never)
    assert taken.rows is not None and rows(taken.rows) == [(0, 5, 9, 105)]
    assert target.made == 2 and copier.fresh_producers == 1
    assert "hit a fatal error (E-150: scripted): a fresh producer replaces it" in caplog.text


def test_a_source_partition_that_does_not_progress_hands_the_batch_back(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, _, copier = parts
    source.append("t", 0, range(5))  # the batch plans up to 10: records 5..9 never come (nothing in flight)
    started = time.monotonic()
    taken = copier.take({("t", 0): (0, 10)}, {("t", 0): 10}, TOPICS, {}, never)
    assert taken.rows is None and taken.failure is TakeFailure.NO_PROGRESS
    assert "t/0 at offset 5, planned up to 10" in taken.reason
    assert time.monotonic() - started >= 0.5


def test_a_target_that_does_not_acknowledge_is_waited_for_and_each_record_is_copied_once(
    parts: tuple[Source, Target, ContinuousCopier], caplog: pytest.LogCaptureFixture
) -> None:
    """A broker killed and restarted, or frozen: the producer retries its copies, so the batch waits for them
    past the stall time instead of copying them a second time."""
    source, target, copier = parts
    source.append("t", 0, range(5))
    target.hold = True  # the target does not acknowledge
    threading.Timer(1.5, lambda: setattr(target, "hold", False)).start()  # three stall times later it does
    with caplog.at_level(logging.WARNING, "drkit.mirror.continuous"):
        taken = copier.take({("t", 0): (0, 5)}, {("t", 0): 5}, TOPICS, {"message.timeout.ms": 60_000}, never)
    assert taken.rows is not None and rows(taken.rows) == [(0, 0, 4, 100)]
    assert len(target.logs[("A.t", 0)]) == 5 and target.made == 1
    assert "the target B has not acknowledged 5 copies for 1s (0 more records read wait" in caplog.text
    assert "the target B acknowledges the copies again after" in caplog.text


def test_a_target_silent_past_the_producers_message_timeout_hands_the_batch_back(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, target, copier = parts
    source.append("t", 0, range(5))
    target.hold = True  # and never again: librdkafka would report each copy failed at its message timeout
    started = time.monotonic()
    taken = copier.take({("t", 0): (0, 5)}, {("t", 0): 5}, TOPICS, {"message.timeout.ms": 500}, never)
    assert taken.rows is None and taken.failure is TakeFailure.NO_PROGRESS
    assert "t/0 at offset 0, planned up to 5" in taken.reason
    assert time.monotonic() - started >= 0.5 + 0.5  # the producer's timeout, then the stall time


def test_a_full_producer_queue_holds_the_records_back_and_copies_each_once_in_order(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, target, copier = parts
    target.capacity = 3
    target.hold = True
    source.append("t", 0, range(20))
    threading.Timer(0.3, lambda: setattr(target, "hold", False)).start()
    taken = copier.take({("t", 0): (0, 20)}, {("t", 0): 20}, TOPICS, {}, never)
    assert taken.rows is not None and rows(taken.rows) == [(0, 0, 19, 100)]
    assert [v for _, v, _ in target.logs[("A.t", 0)]] == [b"v%d" % i for i in range(20)]


def test_a_lane_restarted_elsewhere_never_takes_the_reports_of_the_copies_its_predecessor_had_in_flight(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, target, copier = parts
    source.append("t", 0, range(10))
    assert copier.take({("t", 0): (0, 10)}, {("t", 0): 10}, TOPICS, {}, never).rows is not None
    target.hold = True
    source.append("t", 0, range(10, 20))
    wait_until(lambda: copier.held() == 10, 5, "10 copies in flight", 0.01)
    threading.Timer(0.3, lambda: setattr(target, "hold", False)).start()
    # The plan goes back to 4 (records written again there): a new lane from 4, produced after the 10 in flight.
    taken = copier.take({("t", 0): (4, 20)}, {("t", 0): 20}, TOPICS, {}, never)
    assert taken.rows is not None and rows(taken.rows) == [(0, 4, 19, 120)]  # 110..119: the old lane's orphans


def test_a_stopping_mirror_gives_the_wait_up(parts: tuple[Source, Target, ContinuousCopier]) -> None:
    _, _, copier = parts
    copier.stall_seconds = 60
    with pytest.raises(BatchAbandoned):
        copier.take({("t", 0): (0, 5)}, {("t", 0): 5}, TOPICS, {}, lambda: True)


def test_new_producer_settings_keep_the_copies_made_and_go_on_with_a_new_producer(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, target, copier = parts
    source.append("t", 0, range(10))
    assert copier.take({("t", 0): (0, 5)}, {("t", 0): 5}, TOPICS, {"linger.ms": 5}, never).rows is not None
    # A new topic's limits changed the producer's settings: every copy in flight is acknowledged first, so the
    # copies made ahead (5..9) stay the next batch's, and no record is copied twice.
    source.append("t", 0, range(10, 15))
    taken = copier.take({("t", 0): (5, 15)}, {("t", 0): 15}, TOPICS, {"linger.ms": 5, "batch.size": 1}, never)
    assert taken.rows is not None and rows(taken.rows) == [(0, 5, 14, 105)]
    assert target.made == 2
    assert [v for _, v, _ in target.logs[("A.t", 0)]] == [b"v%d" % i for i in range(15)]


def test_a_stopping_mirrors_batch_takes_what_was_copied_and_copies_the_rest_itself(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    source, target, copier = parts
    source.append("t", 0, range(10))
    assert copier.take({("t", 0): (0, 4)}, {("t", 0): 4}, TOPICS, {}, never).rows is not None
    wait_until(lambda: copier.held() >= 6, 5, "the copier holding the 6 records past the batch", 0.01)
    copier.stop_reading()
    source.append("t", 0, range(10, 20))  # not read any more
    source.append("t", 1, range(3))  # a partition new to the copier
    time.sleep(0.1)  # on purpose: time for a read the copier must no longer make
    taken = copier.take({("t", 0): (4, 20), ("t", 1): (EARLIEST, 3)}, {("t", 0): 20, ("t", 1): 3}, TOPICS, {}, never)
    assert taken.rows is not None and rows(taken.rows) == [(0, 4, 9, 104)]
    assert taken.rest == {("t", 0): (10, 20), ("t", 1): (EARLIEST, 3)}
    assert copier.held() == 0 and len(target.logs[("A.t", 0)]) == 10  # nothing left to orphan
    # A batch planned after it finds the lane where the batch's own copy ended.
    later = copier.take({("t", 0): (20, 25)}, {("t", 0): 25}, TOPICS, {}, never)
    assert later.rows is not None and later.rows.num_rows == 0 and later.rest == {("t", 0): (20, 25)}


def test_the_copier_stops_reading_when_it_holds_its_limit(parts: tuple[Source, Target, ContinuousCopier]) -> None:
    source, _, copier = parts
    copier.ahead = 3
    source.append("t", 0, range(2))
    assert copier.take({("t", 0): (0, 2)}, {("t", 0): 2}, TOPICS, {}, never).rows is not None
    source.append("t", 0, range(2, 50))
    wait_until(lambda: copier.held() >= 3, 5, "the copier reading up to its limit", 0.01)
    time.sleep(0.3)  # on purpose: time to read on past the limit, which it must not
    assert 3 <= copier.held() < 50  # a chunk may pass the limit; then it waits for a batch
    assert ahead_limit(None) == AHEAD_MAX_RECORDS and ahead_limit(3000) == 6000


def test_a_partition_a_batch_waits_on_reads_though_the_others_filled_the_limit(
    parts: tuple[Source, Target, ContinuousCopier],
) -> None:
    """A backlog read partition by partition: t/0 alone fills the limit, and t/1, which the batch also planned,
    is read all the same (a global limit must not starve it)."""
    source, _, copier = parts
    copier.ahead = 10
    source.per_call = 10
    source.append("t", 0, range(50))
    source.append("t", 1, range(50))
    taken = copier.take({("t", 0): (0, 20), ("t", 1): (0, 20)}, {("t", 0): 20, ("t", 1): 20}, TOPICS, {}, never)
    assert taken.rows is not None and sorted(rows(taken.rows)) == [(0, 0, 19, 100), (1, 0, 19, 100)]


def test_clients_made_at_the_start_serve_the_first_batch(parts: tuple[Source, Target, ContinuousCopier]) -> None:
    source, target, copier = parts
    copier.start({"linger.ms": 5}, TOPICS)
    assert target.made == 1  # before any batch: a takeover's first lanes do not wait for a producer
    source.append("t", 0, range(0, 10))
    first = copier.take({("t", 0): (EARLIEST, 10)}, {("t", 0): 10}, TOPICS, {"linger.ms": 5}, never)
    assert first.rows is not None and rows(first.rows) == [(0, 0, 9, 100)]
    assert target.made == 1  # the batch asked for the same settings: the same producer
    copier.take({("t", 0): (10, 10)}, {("t", 0): 10}, TOPICS, {"linger.ms": 6}, never)
    assert target.made == 2  # other settings: a new one


class Lease:
    """A lease that lapses (renewals fail while the target is away) or is lost (another process took over)."""

    epoch = 4

    def __init__(self) -> None:
        self.lapsed = self.lost = False

    def refusal(self) -> str | None:
        return "lost to another mirror" if self.lost else "lapsed" if self.lapsed else None

    def is_lost(self) -> bool:
        return self.lost

    def remaining(self) -> float:
        return 0.0 if self.lapsed or self.lost else 5.0


def test_a_lapsed_lease_holds_the_copies_back_until_renewed_and_a_lost_one_fails_the_lanes() -> None:
    source, target, lease = Source(), Target(), Lease()
    copier = ContinuousCopier("A->B", source.consumer, "A", "B", target.producer, stall_seconds=0.3, lease=lease)
    try:
        source.append("t", 0, range(5))
        assert copier.take({("t", 0): (0, 5)}, {("t", 0): 5}, TOPICS, {}, never).rows is not None
        lease.lapsed = True  # the renewals meet the target's outage
        source.append("t", 0, range(5, 10))
        threading.Timer(1.0, lambda: setattr(lease, "lapsed", False)).start()  # renewed three stall times later
        taken = copier.take({("t", 0): (5, 10)}, {("t", 0): 10}, TOPICS, {}, never)
        assert taken.rows is not None and rows(taken.rows) == [(0, 5, 9, 105)]
        assert len(target.logs[("A.t", 0)]) == 10  # each record once
        assert target.logs[("A.t", 0)][7][2][-1] == ("drkit.epoch", b"4")
        lease.lost = True
        source.append("t", 0, range(10, 15))
        lost = copier.take({("t", 0): (10, 15)}, {("t", 0): 15}, TOPICS, {}, never)
        assert lost.rows is None and lost.failure is TakeFailure.LANE_FAILED and "lost to another" in lost.reason
        assert len(target.logs[("A.t", 0)]) == 10
    finally:
        copier.close()
