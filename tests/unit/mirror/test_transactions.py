"""drkit.mirror.transactions: the driver's transactional producers per slot, fenced before the target is read
back, and the copy of a batch through one transaction per slot; with fake producers and a fake consumer of
the target (no broker). The real thing: tests/integration/mirror/test_exactly_once.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given
from hypothesis import strategies as st
from support.fakes import FakeConsumerError, FakeRecord, FakeTransactionalProducer

from drkit.core.exactly_once import Resume, slot_of, transactional_id
from drkit.core.offsets import BatchRanges
from drkit.mirror import producers
from drkit.mirror.chunk import RecordChunk
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.deliver import Copier
from drkit.mirror.producers import FAILURE_MARKER, FENCED_MARKER, DeliveryFailed, Fenced
from drkit.mirror.transactions import SlotCopier, SlotProducers, make_transactional, read_back, slot_conf

FLOW = "A->B"
TOPIC_MAP = {"orders": "A.orders", "users": "A.users"}
CONF: dict[str, Any] = {"compression.type": "zstd"}


def kafka_error(code: int, text: str = "scripted") -> KafkaException:
    return KafkaException(KafkaError(code, text))


class Factory:
    """``make(conf, alias)`` for SlotProducers: a new fake producer each call, every one kept in order."""

    def __init__(self, raise_on: Mapping[str, BaseException] | None = None, fails: BaseException | None = None) -> None:
        self.made: list[FakeTransactionalProducer] = []
        self.aliases: list[str] = []
        self.raise_on = dict(raise_on or {})
        self.fails = fails

    def __call__(self, conf: dict[str, Any], alias: str) -> FakeTransactionalProducer:
        if self.fails is not None:
            raise self.fails
        self.aliases.append(alias)
        producer = FakeTransactionalProducer(conf, raise_on=self.raise_on)
        self.made.append(producer)
        return producer

    def of_slot(self, slot: int) -> list[FakeTransactionalProducer]:
        return [p for p in self.made if p.conf["transactional.id"] == transactional_id(FLOW, slot)]


# ------------------------------------------------------------------------------ slot_conf


def test_a_slot_writes_with_its_own_transactional_id_and_the_flows_settings() -> None:
    conf = slot_conf(CONF, FLOW, 2)
    assert conf["transactional.id"] == "drkit-mirror.A->B.2"
    assert conf["compression.type"] == "zstd"
    assert conf["transaction.timeout.ms"] == conf["message.timeout.ms"] == 300_000  # librdkafka's default wait
    assert CONF == {"compression.type": "zstd"}  # the flow's settings are not changed
    assert slot_conf(CONF, FLOW, 3)["transactional.id"] != conf["transactional.id"]


def test_a_transaction_stays_open_as_long_as_a_record_may_wait() -> None:
    # A short message timeout: the transaction timeout keeps its floor.
    assert slot_conf({"message.timeout.ms": "10000"}, FLOW, 0) | {"transactional.id": ""} == {
        "transactional.id": "",
        "transaction.timeout.ms": 60_000,
        "message.timeout.ms": 10_000,
    }
    # A shorter transaction timeout set by hand: records give up before the transaction does.
    conf = slot_conf({"transaction.timeout.ms": "20000"}, FLOW, 0)
    assert (conf["transaction.timeout.ms"], conf["message.timeout.ms"]) == (20_000, 20_000)


@given(st.none() | st.integers(1, 10**7), st.none() | st.integers(1, 10**7))
def test_the_transaction_timeout_is_never_below_the_message_timeout(message: int | None, txn: int | None) -> None:
    flow_conf = {"linger.ms": "5"}
    if message is not None:
        flow_conf["message.timeout.ms"] = str(message)
    if txn is not None:
        flow_conf["transaction.timeout.ms"] = str(txn)
    conf = slot_conf(flow_conf, FLOW, 1)
    assert conf["transaction.timeout.ms"] >= conf["message.timeout.ms"] > 0
    assert conf["transactional.id"] == transactional_id(FLOW, 1) and conf["linger.ms"] == "5"
    if txn is not None:
        assert conf["transaction.timeout.ms"] == txn  # an explicit setting is kept


# ------------------------------------------------------------------------------ make_transactional


SECRET_CONF = {"sasl.password": "s3cret", "sasl.username": "mirror", "transactional.id": "drkit-mirror.A->B.0"}


def test_a_transactional_producer_is_initialised_before_it_is_handed_out() -> None:
    make = Factory()
    producer = make_transactional(make, dict(SECRET_CONF), "B")
    assert producer is make.made[0]
    assert producer.calls == ["init_transactions"]
    assert make.aliases == ["B"]


def test_a_producer_that_cannot_be_made_fails_in_one_line_without_secrets() -> None:
    make = Factory(fails=kafka_error(KafkaError._INVALID_ARG, 'Configuration property "sasl.mechanism" is bad'))
    with pytest.raises(DeliveryFailed) as info:
        make_transactional(make, dict(SECRET_CONF), "B")
    message = str(info.value)
    assert message.startswith(f"{FAILURE_MARKER}cluster B: ")
    assert "_INVALID_ARG" in message and "sasl.mechanism" in message
    assert "\n" not in message and "s3cret" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no chained librdkafka trace


def test_a_producer_that_cannot_be_initialised_fails_in_one_line_without_secrets() -> None:
    make = Factory(raise_on={"init_transactions": kafka_error(KafkaError._TIMED_OUT, "no answer")})
    with pytest.raises(DeliveryFailed) as info:
        make_transactional(make, dict(SECRET_CONF), "B")
    message = str(info.value)
    assert message.startswith(f"{FAILURE_MARKER}cluster B: transactional id drkit-mirror.A->B.0 ")
    assert "_TIMED_OUT" in message and "no answer" in message
    assert "\n" not in message and "s3cret" not in message
    assert not isinstance(info.value, Fenced)


def test_a_missing_transactional_id_acl_is_named_as_such() -> None:
    code = KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    make = Factory(raise_on={"init_transactions": kafka_error(code, "denied")})
    with pytest.raises(DeliveryFailed) as info:
        make_transactional(make, dict(SECRET_CONF), "B")
    assert str(info.value) == (
        f"{FAILURE_MARKER}cluster B: principal lacks WRITE on a transactional id "
        "(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) (transactional id drkit-mirror.A->B.0)"
    )


# ------------------------------------------------------------------------------ SlotProducers


RANGES: BatchRanges = {("orders", 0): (0, 5), ("orders", 1): (3, 9), ("users", 3): (7, 8)}  # slots 2, 3, 0


def test_a_partition_is_reported_unread_only_after_its_slots_producer_fenced_the_older_ones() -> None:
    make = Factory()
    producers = SlotProducers(FLOW, 4, "B", make)
    assert make.made == []  # nothing made before the first use
    unread = producers.unread(RANGES, CONF)
    assert unread == RANGES
    assert sorted(p.conf["transactional.id"] for p in make.made) == [transactional_id(FLOW, s) for s in (0, 2, 3)]
    assert all(p.calls == ["init_transactions"] for p in make.made)
    assert make.aliases == ["B", "B", "B"]


def test_no_partition_is_reported_unread_when_its_producer_cannot_fence() -> None:
    make = Factory(raise_on={"init_transactions": kafka_error(KafkaError._TRANSPORT)})
    producers = SlotProducers(FLOW, 4, "B", make)
    with pytest.raises(DeliveryFailed, match=r"cluster B: transactional id drkit-mirror\.A->B\.\d could not be"):
        producers.unread(RANGES, CONF)


def test_partitions_read_back_are_not_read_again_by_the_same_producer() -> None:
    make = Factory()
    producers = SlotProducers(FLOW, 4, "B", make)
    unread = producers.unread(RANGES, CONF)
    producers.mark_read(Resume({}, {}, frozenset({("orders", 1)})), unread)  # orders/1's copies reach past it
    assert producers.unread(RANGES, dict(CONF)) == {("orders", 1): (3, 9)}
    assert len(make.made) == 3  # the same producers: not initialised again
    assert all(p.calls == ["init_transactions"] for p in make.made)


def test_a_partition_of_a_slot_is_read_back_once_per_producer() -> None:
    make = Factory()
    producers = SlotProducers(FLOW, 4, "B", make)
    producers.mark_read(Resume({}, {}, frozenset()), {("orders", 0): (0, 5)})  # no producer yet: nothing kept
    assert producers.unread({("orders", 0): (0, 5)}, CONF) == {("orders", 0): (0, 5)}
    producers.mark_read(Resume({}, {}, frozenset()), {("orders", 0): (0, 5)})
    # orders/4 shares the slot of orders/0 but was not read back
    assert producers.unread({("orders", 0): (5, 9), ("orders", 4): (1, 2)}, CONF) == {("orders", 4): (1, 2)}


def test_changed_producer_settings_make_a_new_producer_that_reads_back_again() -> None:
    make = Factory()
    producers = SlotProducers(FLOW, 4, "B", make)
    producers.mark_read(Resume({}, {}, frozenset()), producers.unread(RANGES, CONF))
    assert producers.unread(RANGES, {"compression.type": "zstd"}) == {}  # the same settings, another dict
    changed = {"compression.type": "lz4"}
    assert producers.unread(RANGES, changed) == RANGES
    assert len(make.made) == 6
    assert all(p.calls == ["init_transactions"] for p in make.made[3:])
    assert all(p.conf["compression.type"] == "lz4" for p in make.made[3:])
    producer, read = producers.producer(slot_of("orders", 0, 4), changed)
    assert producer is make.of_slot(2)[-1] and read == set()


def test_fence_all_initialises_every_slot_once() -> None:
    make = Factory()
    producers = SlotProducers(FLOW, 5, "B", make)
    producers.fence_all(CONF)
    assert [p.conf["transactional.id"] for p in make.made] == [transactional_id(FLOW, s) for s in range(5)]
    assert all(p.calls == ["init_transactions"] for p in make.made)
    producers.fence_all(CONF)
    producers.unread(RANGES, CONF)
    assert len(make.made) == 5  # kept: not made (nor fenced) again


def test_dropped_producers_are_made_again_and_read_back_again() -> None:
    make = Factory()
    producers = SlotProducers(FLOW, 4, "B", make)
    producers.mark_read(Resume({}, {}, frozenset()), producers.unread(RANGES, CONF))
    producers.drop()
    assert producers.unread(RANGES, CONF) == RANGES
    assert len(make.made) == 6


# ------------------------------------------------------------------------------ SlotCopier


def _copy(copier: SlotCopier | Copier, topic: str, partition: int, offsets: list[int]) -> None:
    n = len(offsets)
    copier.copy(RecordChunk(topic, partition, offsets, [b"k"] * n, [b"v"] * n, [o * 10 for o in offsets]))


RANGE_COLUMNS = ("source_topic", "partition", "upstream_first", "upstream_last", "downstream_first", "downstream_last")


def _rows(table: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in RANGE_COLUMNS) for r in table.to_pylist())


@pytest.fixture(autouse=True)
def no_cached_producers(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A transactional copy never uses the process's cache of plain producers."""
    cache: dict[str, Any] = {}
    monkeypatch.setattr(producers, "_PRODUCERS", cache)
    return cache


def test_records_go_to_their_slots_copier_and_finish_commits_every_slot(no_cached_producers: dict[str, Any]) -> None:
    make = Factory()
    producers = SlotProducers(FLOW, 4, "B", make)
    copier = producers.copier(RANGES, CONF, TOPIC_MAP, "A")
    assert all(p.calls == ["init_transactions", "begin_transaction"] for p in make.made)
    _copy(copier, "orders", 0, [0, 1, 2, 3, 4])
    _copy(copier, "orders", 1, [3, 4, 5, 6, 7, 8])
    _copy(copier, "users", 3, [7])
    assert [p["topic"] for p in make.of_slot(2)[0].produced] == ["A.orders"] * 5
    assert [p["topic"] for p in make.of_slot(3)[0].produced] == ["A.orders"] * 6
    assert [(p["topic"], p["partition"]) for p in make.of_slot(0)[0].produced] == [("A.users", 3)]
    rows = copier.finish()
    assert rows.schema == COPY_SCHEMA
    assert _rows(rows) == [("orders", 0, 0, 4, 0, 4), ("orders", 1, 3, 8, 0, 5), ("users", 3, 7, 7, 0, 0)]
    for producer in make.made:
        assert producer.calls.count("commit_transaction") == 1 and "abort_transaction" not in producer.calls
        assert producer.calls.index("flush") < producer.calls.index("commit_transaction")
    assert no_cached_producers == {}


def test_the_copier_uses_the_slots_kept_producers() -> None:
    make = Factory()
    producers = SlotProducers(FLOW, 4, "B", make)
    producers.unread(RANGES, CONF)
    producers.copier(RANGES, CONF, TOPIC_MAP, "A").finish()
    producers.copier(RANGES, CONF, TOPIC_MAP, "A").finish()
    assert len(make.made) == 3
    assert all(p.calls.count("begin_transaction") == p.calls.count("commit_transaction") == 2 for p in make.made)
    assert all(p.calls.count("init_transactions") == 1 for p in make.made)


def _slot_copiers(*failing: int) -> tuple[SlotCopier, dict[int, FakeTransactionalProducer]]:
    """Copiers of slots 0, 2 and 3 (users/3, orders/0, orders/1) whose commits in ``failing`` fail."""
    fakes = {
        slot: FakeTransactionalProducer(
            raise_on={"commit_transaction": kafka_error(KafkaError._TIMED_OUT)} if slot in failing else {}
        )
        for slot in (0, 2, 3)
    }
    copiers = {
        slot: Copier(slot_conf(CONF, FLOW, slot), TOPIC_MAP, "A", "B", producer=fake) for slot, fake in fakes.items()
    }
    return SlotCopier(copiers, 4), fakes


def test_a_failed_commit_aborts_the_slots_after_it_and_raises() -> None:
    copier, fakes = _slot_copiers(2)
    _copy(copier, "users", 3, [7])
    _copy(copier, "orders", 0, [0, 1])
    _copy(copier, "orders", 1, [3])
    with pytest.raises(DeliveryFailed) as info:
        copier.finish()
    assert str(info.value).startswith(f"{FAILURE_MARKER}the transaction could not commit: _TIMED_OUT")
    assert not isinstance(info.value, Fenced)
    assert fakes[0].calls[-1] == "commit_transaction" and "abort_transaction" not in fakes[0].calls  # committed
    assert "commit_transaction" not in fakes[3].calls and fakes[3].calls[-1] == "abort_transaction"
    assert _aborted_after_commit(fakes[2].calls)  # the failed slot's, aborted


def test_a_fenced_slot_stops_the_batch_as_fenced() -> None:
    copier, fakes = _slot_copiers()
    fakes[0].raise_on["commit_transaction"] = kafka_error(KafkaError._FENCED, "fenced by a newer instance")
    with pytest.raises(Fenced) as info:
        copier.finish()
    assert str(info.value).startswith(FENCED_MARKER + "_FENCED: fenced by a newer instance")
    assert "commit_transaction" not in fakes[2].calls + fakes[3].calls
    assert fakes[2].calls[-1] == fakes[3].calls[-1] == "abort_transaction"


def test_a_batch_with_no_slots_commits_nothing() -> None:
    copier = SlotCopier({}, 4)
    assert copier.finish().equals(COPY_SCHEMA.empty_table())
    assert copier.skipped == 0


def test_skipped_records_are_summed_over_the_slots() -> None:
    copier, fakes = _slot_copiers()
    back: list[list[tuple[str, bytes | None]] | None] = [[("drkit.origin", b"B:1")]]  # came from the target
    copier.copy(RecordChunk("orders", 0, [0], [None], [b"v"], [0], back))
    copier.copy(RecordChunk("orders", 1, [0], [None], [b"v"], [0], back))
    assert copier.skipped == 2
    assert fakes[2].produced == fakes[3].produced == []


# ------------------------------------------------------------------------------ read_back


class TargetConsumer:
    """A read_committed consumer of the target: per partition, the committed records (offset, origin header
    value or None), a transaction marker after them, then EOF; ``consume`` hands out the assigned partitions'
    records interleaved, as a consumer of several partitions does."""

    def __init__(self, records: dict[tuple[str, int], list[tuple[int, bytes | None]]]) -> None:
        self.records = records
        self.assigned: list[tuple[str, int, int]] = []
        self.asked_ends: list[tuple[str, int]] = []
        self._queues: list[list[FakeRecord]] = []

    def _end(self, key: tuple[str, int]) -> int:
        held = self.records.get(key, [])
        return max(o for o, _ in held) + 2 if held else 0  # a marker after the last record

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        self.asked_ends.append((tp.topic, tp.partition))
        return 0, self._end((tp.topic, tp.partition))

    def assign(self, tps: list[Any]) -> None:
        for tp in tps:
            key = (tp.topic, tp.partition)
            self.assigned.append((tp.topic, tp.partition, tp.offset))
            held = self.records.get(key, [])
            queue = [
                FakeRecord(*key, o, headers=[("trace", b"x"), ("drkit.origin", v)] if v is not None else None)
                for o, v in held
                if o >= tp.offset
            ]
            eof = FakeRecord(*key, self._end(key), FakeConsumerError(KafkaError._PARTITION_EOF))
            self._queues.append([*queue, eof])

    def consume(self, num_messages: int, timeout: float) -> list[FakeRecord]:
        out: list[FakeRecord] = []
        while len(out) < num_messages and any(self._queues):
            for queue in self._queues:  # one message of each partition in turn
                if queue and len(out) < num_messages:
                    out.append(queue.pop(0))
        return out


def test_read_back_keeps_the_committed_copies_past_the_last_sync() -> None:
    consumer = TargetConsumer(
        {
            ("A.orders", 0): [
                (99, b"A:9"),  # before the last sync's end: not read
                (100, b"A:8"),  # before the range: a past run's, unsynced
                (101, b"A:10"),
                (103, b"A:11"),  # 102: a transaction marker
                (104, None),  # produced on the target by someone else
                (105, b"B:12"),  # another cluster's origin
                (106, b"A:12"),
            ],
            ("A.orders", 1): [(50, b"A:5"), (51, b"A:6"), (52, b"A:7")],
        }
    )
    ranges: BatchRanges = {("orders", 0): (10, 20), ("orders", 1): (5, 8), ("users", 0): (0, 3)}
    found, rows = read_back(consumer, ranges, {("orders", 0): 100, ("orders", 1): 50}, TOPIC_MAP, "A", "B")
    # A.users/0 holds nothing: it is not fetched
    assert consumer.assigned == [("A.orders", 0, 100), ("A.orders", 1, 50)]
    assert found.found == {("orders", 0): ((10, 101), (11, 103), (12, 106)), ("orders", 1): ((5, 50), (6, 51), (7, 52))}
    assert found.ranges == {("orders", 0): (13, 20), ("users", 0): (0, 3)}
    # orders/1's read ended at its range's last copy, before the partition's end: read again next time
    assert found.again == {("orders", 1)}
    assert found.reached(ranges) == {("orders", 1): 8}
    assert rows.schema == COPY_SCHEMA
    assert _rows(rows) == [
        ("orders", 0, 10, 10, 101, 101),
        ("orders", 0, 11, 11, 103, 103),
        ("orders", 0, 12, 12, 106, 106),
        ("orders", 1, 5, 7, 50, 52),
    ]
    assert {r["target_topic"] for r in rows.to_pylist()} == {"A.orders"}
    assert sum(r["record_count"] for r in rows.to_pylist()) == 6
    assert all(r["bytes"] == 0 and r["max_timestamp"] == 0 for r in rows.to_pylist())


def test_read_back_marks_copies_past_the_batch_to_be_read_again() -> None:
    consumer = TargetConsumer({("A.orders", 0): [(0, b"A:3"), (1, b"A:4"), (2, b"A:5")]})
    found, rows = read_back(consumer, {("orders", 0): (3, 5)}, {}, TOPIC_MAP, "A", "B")
    assert found.again == {("orders", 0)}
    assert found.found == {("orders", 0): ((3, 0), (4, 1))}
    assert found.ranges == {}
    assert _rows(rows) == [("orders", 0, 3, 4, 0, 1)]


def test_a_read_ended_at_the_ranges_last_copy_reads_again_next_time() -> None:
    """Copies past the range may follow the one that ends the read: they are not known, so not kept."""
    consumer = TargetConsumer({("A.orders", 0): [(0, b"A:3"), (1, b"A:4"), (2, b"A:5"), (3, b"A:6")]})
    found, _ = read_back(consumer, {("orders", 0): (3, 6)}, {}, TOPIC_MAP, "A", "B")
    assert found.found == {("orders", 0): ((3, 0), (4, 1), (5, 2))}
    assert found.ranges == {} and found.again == {("orders", 0)}


def test_read_back_of_an_empty_target_leaves_the_batch_as_planned() -> None:
    consumer = TargetConsumer({})
    found, rows = read_back(consumer, RANGES, {}, TOPIC_MAP, "A", "B")
    assert consumer.assigned == []  # no partition holds anything: none is fetched
    assert found == Resume(RANGES, {}, frozenset())
    assert rows.num_rows == 0 and rows.schema == COPY_SCHEMA


def _aborted_after_commit(calls: list[str]) -> bool:
    """A commit that failed, then only aborts (a probe of a fence, the caller's abort), at least one."""
    after = calls[calls.index("commit_transaction") + 1 :]
    return bool(after) and set(after) == {"abort_transaction"}
