"""The continuous copier in exactly-once mode (drkit.mirror.lane_transactions) against a scripted source and a
target that keeps each copy's transaction state: a batch takes only committed copies; what a read_committed
consumer sees holds each source record once, across a restart (committed copies past the last sync are read
back and kept), a failed transaction and a commit that must be resumed. On real brokers, with SIGKILLs:
tests/integration/mirror/test_exactly_once.py."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from support.fakes import FakeMessage
from support.waiting import wait_until
from test_continuous_copier import TOPICS, Source, never, rows

from drkit.core.continuous import TakeFailure
from drkit.core.exactly_once import Resume, resume
from drkit.core.offsets import BatchRanges
from drkit.core.origin import ORIGIN_HEADER
from drkit.mirror.continuous import ContinuousCopier
from drkit.mirror.lane_transactions import LaneTransactions
from drkit.mirror.transactions import SlotProducers


class Target:
    """Target partitions whose entries carry their transaction's state: open, committed or aborted. Producers of
    one transactional id fence each other: initialising one aborts the older one's open transaction."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.open_by_id: dict[str, Producer] = {}
        self.made = 0

    def producer(self, conf: dict[str, Any], alias: str) -> Producer:
        self.made += 1
        return Producer(self, conf["transactional.id"])

    def committed(self, key: tuple[str, int]) -> list[dict[str, Any]]:
        return [e for e in self.logs.get(key, []) if e["state"] == "committed"]

    def origins(self, key: tuple[str, int]) -> list[int]:
        """The source offsets of the copies a read_committed consumer sees, in target order."""
        return [int(dict(e["headers"])[ORIGIN_HEADER].split(b":")[1]) for e in self.committed(key)]

    def read_back(self, synced_tail: Mapping[tuple[str, int], int]) -> Any:
        def read(ranges: BatchRanges, topic_map: Mapping[str, str]) -> Resume:
            tails = {}
            for topic, partition in ranges:
                start = synced_tail.get((topic, partition), 0)
                tails[(topic, partition)] = [
                    (int(dict(e["headers"])[ORIGIN_HEADER].split(b":")[1]), e["offset"])
                    for e in self.committed((topic_map[topic], partition))
                    if e["offset"] >= start
                ]
            return resume(ranges, tails)

        return read


class Producer:
    def __init__(self, target: Target, tid: str) -> None:
        self.target, self.tid = target, tid
        self.entries: list[dict[str, Any]] = []
        self.pending: list[tuple[Any, FakeMessage]] = []
        self.fail_commit: list[KafkaException] = []  # raised by the next commits, in order
        self.commits = 0

    def init_transactions(self, timeout: float = -1) -> None:
        older = self.target.open_by_id.get(self.tid)
        if older is not None:
            older._end("aborted")
        self.target.open_by_id[self.tid] = self

    def begin_transaction(self) -> None:
        assert not self.entries, "a transaction is open already"

    def produce(self, topic: str, value: bytes, key: bytes, partition: int, cb: Any, **kw: Any) -> None:
        log = self.target.logs.setdefault((topic, partition), [])
        entry = {"offset": len(log), "value": value, "headers": kw["headers"], "state": "open"}
        log.append(entry)
        self.entries.append(entry)
        self.pending.append((cb, FakeMessage(topic, partition, entry["offset"])))

    def poll(self, timeout: float = 0) -> int:
        done, self.pending = self.pending, []
        for cb, msg in done:
            cb(None, msg)
        return len(done)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0

    def commit_transaction(self, timeout: float = -1) -> None:
        self.poll()
        if self.fail_commit:
            raise self.fail_commit.pop(0)
        self.commits += 1
        self._end("committed")

    def abort_transaction(self, timeout: float = -1) -> None:
        self._end("aborted")

    def _end(self, state: str) -> None:
        for entry in self.entries:
            entry["state"] = state
        self.entries = []

    def list_topics(self, *args: Any, **kwargs: Any) -> None:
        return None


class Copier:
    """A copier with its slot producers, as the wiring makes them; ``tail`` is the synced tail per partition."""

    def __init__(self, source: Source, target: Target, slots: int = 2) -> None:
        self.tail: dict[tuple[str, int], int] = {}
        self.producers = SlotProducers("A->B", slots, "B", make=target.producer)
        self.txn = LaneTransactions(self.producers, target.read_back(self.tail), "B", commit_seconds=0.02)
        self.copier = ContinuousCopier("A->B", source.consumer, "A", "B", stall_seconds=0.5, transactions=self.txn)
        self.copier.start({}, TOPICS)

    def take(self, ranges: BatchRanges) -> Any:
        taken = self.copier.take(ranges, {k: u for k, (_, u) in ranges.items()}, TOPICS, {}, never)
        if taken.rows is not None:  # the batch's syncs are durable: the read back starts after them
            for r in taken.rows.to_pylist():
                key = (r["source_topic"], r["partition"])
                self.tail[key] = max(self.tail.get(key, 0), r["downstream_last"] + 1)
        return taken


@pytest.fixture
def parts() -> Iterator[tuple[Source, Target, Copier]]:
    source, target = Source(), Target()
    copier = Copier(source, target)
    yield source, target, copier
    copier.copier.close()


def test_copies_are_committed_as_they_flow_and_a_batch_takes_only_committed_ones(
    parts: tuple[Source, Target, Copier],
) -> None:
    source, target, c = parts
    source.append("t", 0, range(10))
    first = c.take({("t", 0): (0, 10)})
    assert first.rows is not None and rows(first.rows) == [(0, 0, 9, 0)]
    source.append("t", 0, range(10, 30))  # copied and committed as they arrive, before any batch plans them
    wait_until(lambda: len(target.committed(("A.t", 0))) == 30, 5, "the 20 new copies committed", 0.01)
    assert c.txn.commits >= 2
    second = c.take({("t", 0): (10, 30)})
    assert second.rows is not None and rows(second.rows) == [(0, 10, 29, 10)]
    assert target.origins(("A.t", 0)) == list(range(30))


def test_a_restarted_copier_keeps_the_copies_committed_past_the_last_sync_and_copies_each_record_once(
    parts: tuple[Source, Target, Copier],
) -> None:
    source, target, c = parts
    source.append("t", 0, range(10))
    assert c.take({("t", 0): (0, 4)}).rows is not None  # synced through 3; 4..9 committed ahead, no sync
    wait_until(lambda: len(target.committed(("A.t", 0))) == 10, 5, "10 copies committed", 0.01)
    tail = dict(c.tail)
    # The process stops copying (a crash: its open transaction is aborted, as the next initialisation of its
    # transactional ids does); a new one starts from the last sync.
    c.copier.close()
    source.append("t", 0, range(10, 15))
    again = Copier(source, target)
    again.tail.update(tail)
    try:
        taken = again.take({("t", 0): (4, 15)})
        assert taken.rows is not None and sorted(rows(taken.rows)) == [(0, 4, 14, 4)]
    finally:
        again.copier.close()
    assert target.origins(("A.t", 0)) == list(range(15))  # each once for a read_committed consumer


def test_a_failed_transaction_fails_the_batch_and_the_next_lane_reads_back_what_was_committed(
    parts: tuple[Source, Target, Copier],
) -> None:
    source, target, c = parts
    source.append("t", 0, range(10))
    assert c.take({("t", 0): (0, 10)}).rows is not None
    producer = target.open_by_id["drkit-mirror.A->B." + str(_slot("t", 0))]
    producer.fail_commit.append(_abortable())
    source.append("t", 0, range(10, 20))
    failed = c.take({("t", 0): (10, 20)})
    assert failed.rows is None and failed.failure is TakeFailure.LANE_FAILED
    assert "transaction of slot" in failed.reason
    assert target.origins(("A.t", 0)) == list(range(10))  # the failed transaction's copies were aborted
    # The batch would copy its own records now (the per-batch path, not here). The next take starts the lane again
    # from what is committed past the last sync (nothing: the failed transaction was aborted).
    source.append("t", 0, range(20, 25))
    later = c.take({("t", 0): (10, 25)})
    assert later.rows is not None and rows(later.rows) == [(0, 10, 24, 20)]
    assert target.origins(("A.t", 0)) == list(range(25))


def test_a_commit_that_timed_out_is_resumed_and_its_slots_records_wait_meanwhile(
    parts: tuple[Source, Target, Copier],
) -> None:
    source, target, c = parts
    source.append("t", 0, range(5))
    assert c.take({("t", 0): (0, 5)}).rows is not None
    producer = target.open_by_id["drkit-mirror.A->B." + str(_slot("t", 0))]
    producer.fail_commit.extend([_timed_out(), _timed_out()])
    source.append("t", 0, range(5, 15))
    taken = c.take({("t", 0): (5, 15)})
    assert taken.rows is not None and rows(taken.rows) == [(0, 5, 14, 5)]
    assert target.origins(("A.t", 0)) == list(range(15))
    assert [e["state"] for e in target.logs[("A.t", 0)]] == ["committed"] * 15


def test_while_one_slots_commit_is_under_way_the_other_slots_records_are_copied_and_committed(
    parts: tuple[Source, Target, Copier],
) -> None:
    source, target, c = parts
    slow_key, quick_key = ("t", 0), ("t", 1)
    assert _slot(*slow_key) != _slot(*quick_key)
    source.append("t", 0, range(5))
    source.append("t", 1, range(5))
    assert c.take({slow_key: (0, 5), quick_key: (0, 5)}).rows is not None
    slow = target.open_by_id["drkit-mirror.A->B." + str(_slot(*slow_key))]
    slow.fail_commit.extend(_timed_out() for _ in range(100_000))  # its commit is resumed again and again
    source.append("t", 0, range(5, 10))
    wait_until(lambda: len(slow.fail_commit) < 100_000, 5, "the slow slot's commit under way", 0.01)
    # Read after the slow slot's records, in the same reads: they must not wait behind the held ones.
    source.append("t", 0, range(10, 15))
    source.append("t", 1, range(5, 15))
    wait_until(lambda: len(target.committed(("A.t", 1))) == 15, 5, "the quick slot's copies committed", 0.01)
    assert len(target.committed(("A.t", 0))) == 5 and len(target.logs[("A.t", 0)]) == 10  # 10..14 held back
    slow.fail_commit.clear()
    taken = c.take({slow_key: (5, 15), quick_key: (5, 15)})
    assert taken.rows is not None and sorted(rows(taken.rows)) == [(0, 5, 14, 5), (1, 5, 14, 5)]
    assert target.origins(("A.t", 0)) == list(range(15)) and target.origins(("A.t", 1)) == list(range(15))


def test_a_partition_no_batch_planned_is_never_copied_and_a_stop_commits_what_the_batches_take(
    parts: tuple[Source, Target, Copier],
) -> None:
    source, target, c = parts
    source.append("t", 0, range(6))
    assert c.take({("t", 0): (0, 3)}).rows is not None
    c.copier.stop_reading()
    time.sleep(0.05)
    taken = c.take({("t", 0): (3, 6)})
    assert taken.rows is not None and rows(taken.rows) == [(0, 3, 5, 3)]
    assert target.origins(("A.t", 0)) == list(range(6)) and ("A.r", 0) not in target.logs


def _slot(topic: str, partition: int) -> int:
    from drkit.core.exactly_once import slot_of

    return slot_of(topic, partition, 2)


def _abortable() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._INVALID_ARG, "scripted abortable", txn_requires_abort=True))


def _timed_out() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, "scripted timeout", retriable=True))


class _Slots:
    """SlotProducers as LaneTransactions uses it: one given producer per slot."""

    def __init__(self, producers: list[Any]) -> None:
        self.slots, self._producers = len(producers), producers
        self.flow = "A->B"

    def producer(self, slot: int, conf: Mapping[str, Any]) -> tuple[Any, bool]:
        return self._producers[slot], False


class _Committing:
    """A slot producer whose commit runs ``commit``."""

    def __init__(self, commit: Any) -> None:
        self._commit, self.committed = commit, False

    def begin_transaction(self) -> None:
        pass

    def flush(self, timeout: float = 0) -> int:
        return 0

    def commit_transaction(self, timeout: float = -1) -> None:
        self._commit()
        self.committed = True


class _Lane:
    def __init__(self) -> None:
        self.ups, self.committed, self.failure = [1, 2], 0, None


def _open_every_slot(producers: list[Any]) -> tuple[LaneTransactions, list[Any]]:
    from drkit.core.exactly_once import slot_of

    txn = LaneTransactions(_Slots(producers), lambda ranges, topics: resume({}, {}), "B", commit_seconds=0.0)  # type: ignore[arg-type]
    keys = [
        next(("t", p) for p in range(100) if slot_of("t", p, len(producers)) == slot) for slot in range(len(producers))
    ]
    lanes = [_Lane() for _ in keys]
    for key, lane in zip(keys, lanes, strict=True):
        assert txn.producer(key, lane) is producers[slot_of(*key, len(producers))]  # type: ignore[arg-type]
    return txn, lanes


def test_the_due_slots_commit_at_once_each_on_a_thread_of_its_own() -> None:
    import threading

    both = threading.Barrier(2, timeout=5)  # a commit returns only once the other slot's commit is under way too
    producers = [_Committing(both.wait), _Committing(both.wait)]
    txn, lanes = _open_every_slot(producers)
    assert txn.commit_due() is True
    assert all(p.committed for p in producers) and txn.commits == 2
    assert [lane.committed for lane in lanes] == [2, 2]


def test_a_commit_to_resume_leaves_its_slot_open_and_the_other_slots_commit() -> None:
    def timed_out() -> None:
        raise _timed_out()

    producers = [_Committing(timed_out), _Committing(lambda: None)]
    txn, lanes = _open_every_slot(producers)
    assert txn.commit_due() is False
    assert [lane.committed for lane in lanes] == [0, 2] and txn.commits == 1


def test_anything_but_a_kafka_error_in_a_commit_is_raised_to_the_copying_thread() -> None:
    def broken() -> None:
        raise RuntimeError("not a broker's answer")

    producers = [_Committing(lambda: None), _Committing(broken)]
    txn, _ = _open_every_slot(producers)
    with pytest.raises(RuntimeError, match="not a broker's answer"):
        txn.commit_due()


class _Clock:
    """A clock a commit moves on: ``commit`` seconds per commit call."""

    def __init__(self, commit: float) -> None:
        self.now, self.commit = 100.0, commit

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.commit


def test_behind_the_source_a_transaction_stays_open_until_its_commit_is_a_tenth_of_the_time() -> None:
    from prometheus_client import REGISTRY

    def observed() -> tuple[float, float]:
        labels = {"flow": "A->B"}
        name = "drkit_mirror_transaction_commit_seconds"
        count = REGISTRY.get_sample_value(f"{name}_count", labels) or 0.0
        return count, REGISTRY.get_sample_value(f"{name}_sum", labels) or 0.0

    before = observed()
    clock = _Clock(commit=0.03)
    producer = _Committing(clock.tick)
    txn = LaneTransactions(_Slots([producer]), lambda ranges, topics: resume({}, {}), "B", 0.05, clock)  # type: ignore[arg-type]
    lane = _Lane()
    txn.producer(("t", 0), lane)  # type: ignore[arg-type]
    clock.now += 0.06
    assert txn.commit_due() and txn.commits == 1 and txn.last_commit == pytest.approx(0.03)
    txn.behind = True  # the copying thread's last read filled its chunk
    txn.producer(("t", 0), lane)  # type: ignore[arg-type]
    clock.now += 0.25
    assert txn.commit_due() and txn.commits == 1  # 30 ms of commit: open 270 ms
    clock.now += 0.03
    assert txn.commit_due() and txn.commits == 2
    txn.producer(("t", 0), lane)  # type: ignore[arg-type]
    clock.now += 0.06
    assert txn.commit_due() and txn.commits == 2
    txn.behind = False  # caught up: committed at its base again
    assert txn.commit_due() and txn.commits == 3
    count, total = observed()
    assert count - before[0] == 3 and total - before[1] == pytest.approx(0.09)  # each commit's time, exported


@pytest.mark.parametrize("full_reads, behind", [(1, False), (3, True)], ids=["a-moments-lag", "a-backlog"])
def test_the_copying_thread_says_it_is_behind_once_its_reads_fill_their_chunk_three_times_in_a_row(
    parts: tuple[Source, Target, Copier], full_reads: int, behind: bool
) -> None:
    from drkit.mirror.reader import CHUNK

    source, target, c = parts
    seen: list[bool] = []
    due = c.txn.commit_due

    def noting(force: bool = False) -> bool:
        seen.append(c.txn.behind)
        return due(force)

    c.txn.commit_due = noting  # type: ignore[method-assign]
    end = full_reads * CHUNK + 10
    source.append("t", 0, range(end))
    taken = c.take({("t", 0): (0, end)})
    assert taken.rows is not None and rows(taken.rows) == [(0, 0, end - 1, 0)]
    assert target.origins(("A.t", 0)) == list(range(end))
    assert (True in seen) is behind
    wait_until(lambda: seen[-1] is False, 5, "a partial read: caught up", 0.01)


def test_once_one_transaction_is_due_every_open_one_commits_with_it() -> None:
    """Behind the source the spans vary: slots committed each on its own turn would hold the copying thread once
    each; committed together, it waits once, for the slowest."""
    from drkit.core.exactly_once import slot_of

    clock = _Clock(commit=0.01)
    producers = [_Committing(clock.tick), _Committing(clock.tick)]
    txn = LaneTransactions(_Slots(producers), lambda ranges, topics: resume({}, {}), "B", 0.05, clock)  # type: ignore[arg-type]
    first, second = (next(("t", p) for p in range(100) if slot_of("t", p, 2) == slot) for slot in (0, 1))
    lanes = [_Lane(), _Lane()]
    txn.producer(first, lanes[0])  # type: ignore[arg-type]
    clock.now += 0.03
    txn.producer(second, lanes[1])  # type: ignore[arg-type]
    assert txn.commit_due() and txn.commits == 0
    clock.now += 0.03  # the first is due, the second open for 30 ms only
    assert txn.commit_due() and txn.commits == 2
    assert all(p.committed for p in producers) and [lane.committed for lane in lanes] == [2, 2]
