"""Copier in exactly-once mode (a transactional ``producer`` given): one transaction per copy, begun at once,
committed by ``finish`` only after every record was acknowledged; a fenced producer stops the copy as
``Fenced``. A fake producer instead of a target cluster (tests/support/fakes.py, shared with test_deliver)."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException
from support.fakes import FakeTransactionalProducer

from drkit.mirror import producers
from drkit.mirror.chunk import RecordChunk
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.deliver import Copier
from drkit.mirror.producers import FAILURE_MARKER, FENCED_MARKER, DeliveryFailed, Fenced

TOPIC_MAP = {"orders": "A.orders", "users": "A.users"}
CONF = {"bootstrap.servers": "target:9092", "transactional.id": "drkit-mirror.A->B.0"}
FENCED_CODES = [KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH]


@pytest.fixture(autouse=True)
def no_plain_producers(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A transactional copy neither makes a producer nor uses the process's cache of plain ones."""
    cache: dict[str, Any] = {}
    monkeypatch.setattr(producers, "_PRODUCERS", cache)

    def refuse(conf: dict[str, Any]) -> None:
        raise AssertionError("a transactional copy made a producer of its own")

    monkeypatch.setattr(confluent_kafka, "Producer", refuse)
    return cache


def copier_of(fake: FakeTransactionalProducer) -> Copier:
    return Copier(CONF, TOPIC_MAP, "A", "B", producer=fake)


def copy(copier: Copier, topic: str, partition: int, offsets: list[int], value: bytes = b"v") -> None:
    n = len(offsets)
    copier.copy(RecordChunk(topic, partition, offsets, [b"k"] * n, [value] * n, [o * 10 for o in offsets]))


RANGE_COLUMNS = ("source_topic", "partition", "upstream_first", "upstream_last", "downstream_first", "downstream_last")


def ranges(table: Any) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in RANGE_COLUMNS) for r in table.to_pylist()]


def test_the_transaction_begins_with_the_copy(no_plain_producers: dict[str, Any]) -> None:
    fake = FakeTransactionalProducer()
    copier = copier_of(fake)
    assert fake.calls == ["begin_transaction"]
    assert no_plain_producers == {}
    copy(copier, "orders", 0, [0, 1])
    assert fake.calls[0] == "begin_transaction" and fake.calls.count("begin_transaction") == 1


def test_finish_flushes_then_calls_before_commit_then_commits_and_returns_the_ranges() -> None:
    fake = FakeTransactionalProducer()
    copier = copier_of(fake)
    copy(copier, "orders", 0, [0, 1, 2, 5])
    copy(copier, "users", 1, [7])

    def before_commit() -> None:
        fake.calls.append("before_commit")
        assert len(fake.pending) == 0  # every record acknowledged: the target offsets are known

    rows = copier.finish(before_commit=before_commit)
    assert fake.calls[-3:] == ["flush", "before_commit", "commit_transaction"]
    assert "abort_transaction" not in fake.calls
    assert rows.schema == COPY_SCHEMA
    assert ranges(rows) == [("orders", 0, 0, 2, 0, 2), ("orders", 0, 5, 5, 3, 3), ("users", 1, 7, 7, 0, 0)]


def test_a_crash_before_the_commit_commits_nothing() -> None:
    fake = FakeTransactionalProducer()
    copier = copier_of(fake)
    copy(copier, "orders", 0, [0])

    def crash() -> None:
        raise SystemExit("killed here")

    with pytest.raises(SystemExit):
        copier.finish(before_commit=crash)
    assert "commit_transaction" not in fake.calls


def test_an_empty_copy_commits_an_empty_transaction() -> None:
    fake = FakeTransactionalProducer()
    rows = copier_of(fake).finish()
    assert rows.num_rows == 0
    assert fake.calls == ["begin_transaction", "flush", "commit_transaction"]


@pytest.mark.parametrize("code", FENCED_CODES)
def test_a_fenced_delivery_report_stops_the_copy_as_fenced(code: int) -> None:
    fake = FakeTransactionalProducer(errors={b"late": KafkaError(code, "a newer producer exists")})
    copier = copier_of(fake)
    copy(copier, "orders", 0, [0, 1])
    copy(copier, "orders", 0, [2], value=b"late")
    copy(copier, "orders", 0, [3])  # after the failure was reported: not produced
    assert copier.fenced
    with pytest.raises(Fenced) as info:
        copier.finish()
    assert isinstance(info.value, DeliveryFailed)
    assert str(info.value) == f"{FENCED_MARKER}{KafkaError(code).name()}: a newer producer exists"
    assert [p["value"] for p in fake.produced] == [b"v", b"v", b"late"]
    assert "commit_transaction" not in fake.calls
    assert fake.calls[-1] == "abort_transaction"


def test_another_delivery_error_is_a_delivery_failure_not_fenced() -> None:
    fake = FakeTransactionalProducer(errors={b"big": KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large")})
    copier = copier_of(fake)
    copy(copier, "orders", 3, [40], value=b"big")
    with pytest.raises(DeliveryFailed) as info:
        copier.finish()
    assert not isinstance(info.value, Fenced)
    assert str(info.value) == (
        f"{FAILURE_MARKER}record orders/3@40 could not be delivered to A.orders/3: MSG_SIZE_TOO_LARGE: too large"
    )
    assert "commit_transaction" not in fake.calls and fake.calls[-1] == "abort_transaction"


@pytest.mark.parametrize(("code", "raised"), [(KafkaError._FENCED, Fenced), (KafkaError._FATAL, DeliveryFailed)])
def test_a_producer_error_raised_by_poll_is_recorded_not_propagated(code: int, raised: type[Exception]) -> None:
    fake = FakeTransactionalProducer(raise_on={"poll": KafkaException(KafkaError(code, "fatal"))})
    copier = copier_of(fake)
    copy(copier, "orders", 0, [0, 1, 2])  # does not raise
    assert copier.failures == [f"the producer failed: {KafkaError(code).name()}: fatal"]
    produced = len(fake.produced)
    copy(copier, "orders", 0, [3, 4])  # nothing more after a failure
    assert len(fake.produced) == produced
    with pytest.raises(raised) as info:
        copier.finish()
    assert type(info.value) is raised
    marker = FENCED_MARKER if raised is Fenced else FAILURE_MARKER
    assert str(info.value).startswith(marker)
    assert "commit_transaction" not in fake.calls and fake.calls[-1] == "abort_transaction"


def test_a_fenced_produce_call_fails_the_copy_as_fenced() -> None:
    fake = FakeTransactionalProducer(raise_on={"produce": KafkaException(KafkaError(KafkaError._FENCED, "fenced"))})
    copier = copier_of(fake)
    copy(copier, "orders", 0, [0, 1])
    assert copier.failures == ["record orders/0@0 could not be delivered to A.orders/0: _FENCED: fenced"]
    with pytest.raises(Fenced, match="^" + FENCED_MARKER):
        copier.finish()
    assert fake.calls.count("produce") == 1


@pytest.mark.parametrize(
    ("code", "raised"),
    [*((c, Fenced) for c in FENCED_CODES), (KafkaError._TIMED_OUT, DeliveryFailed)],
)
def test_a_failed_commit_raises_and_the_transaction_is_aborted(code: int, raised: type[Exception]) -> None:
    fake = FakeTransactionalProducer(raise_on={"commit_transaction": KafkaException(KafkaError(code, "no"))})
    copier = copier_of(fake)
    copy(copier, "orders", 0, [0, 1])
    with pytest.raises(DeliveryFailed) as info:
        copier.finish()
    assert type(info.value) is raised
    marker = FENCED_MARKER if raised is Fenced else FAILURE_MARKER
    detail = f"{KafkaError(code).name()}: no"
    assert str(info.value) == marker + (detail if raised is Fenced else f"the transaction could not commit: {detail}")
    assert info.value.__cause__ is None
    copier.abort()  # what every caller does with a failed copy (drkit.mirror.job, drkit.mirror.executor)
    assert _aborted_after_commit(fake.calls)


def test_a_transaction_that_cannot_begin_fails_the_copy() -> None:
    fake = FakeTransactionalProducer(raise_on={"begin_transaction": KafkaException(KafkaError(KafkaError._STATE))})
    with pytest.raises(DeliveryFailed, match=f"^{FAILURE_MARKER}the transaction could not begin: _STATE"):
        copier_of(fake)


def test_abort_never_raises_and_keeps_the_producer(no_plain_producers: dict[str, Any]) -> None:
    """Fenced, or the target gone: the abort fails, and the next writer of the id aborts the transaction."""
    fake = FakeTransactionalProducer(raise_on={"abort_transaction": KafkaException(KafkaError(KafkaError._FENCED))})
    copier = copier_of(fake)
    copy(copier, "orders", 0, [0])
    copier.abort()
    assert fake.calls[-1] == "abort_transaction"
    assert "flush" not in fake.calls  # an aborted transaction's records are never waited for
    assert no_plain_producers == {}


def _aborted_after_commit(calls: list[str]) -> bool:
    """A commit that failed, then only aborts (a probe of a fence, the caller's abort), at least one."""
    after = calls[calls.index("commit_transaction") + 1 :]
    return bool(after) and set(after) == {"abort_transaction"}


def test_a_fence_hidden_behind_a_system_error_is_found_by_its_sticky_fatal_error() -> None:
    """confluent-kafka may surface a pending fatal error as a SystemError out of a callback; the fence is then read
    back from the next transactional call, which returns the producer's fatal error again."""
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance"))
    fake = FakeTransactionalProducer(
        raise_on={"flush": SystemError("returned a result with an exception set"), "abort_transaction": fenced}
    )
    copier = copier_of(fake)
    copy(copier, "orders", 0, [0, 1])
    with pytest.raises(Fenced) as info:
        copier.finish()
    assert str(info.value) == FENCED_MARKER + "_FENCED: fenced by a newer instance"
    assert "commit_transaction" not in fake.calls


def test_a_system_error_that_is_no_fence_fails_the_copy_as_a_delivery_failure() -> None:
    fake = FakeTransactionalProducer(raise_on={"poll": SystemError("returned a result with an exception set")})
    copier = copier_of(fake)
    copy(copier, "orders", 0, list(range(40)))  # a poll every 32 records
    with pytest.raises(DeliveryFailed) as info:
        copier.finish()
    assert not isinstance(info.value, Fenced)
    assert str(info.value) == FAILURE_MARKER + "the producer failed: returned a result with an exception set"
