"""The copy of a micro-batch's records to the target, with the exact offset of each copy.

``Copier`` does it, fed by drkit.mirror.reader's ``BatchReader``, in a Spark copy task on an executor
(drkit.mirror.executor) or in the driver. Records are produced in source-offset
order to the same partition number of the target topic by an idempotent ``acks=all`` producer,
and every delivery report gives the exact downstream offset of one upstream offset. Those pairs
are folded into contiguous ranges and returned to the driver, which writes them to
``offset_syncs`` only after every task of the batch succeeded.

How a delivery report is matched to its upstream offset without a Python object per record: the
producer is idempotent, so the target appends a partition's records in produce order, and
librdkafka reports them in that order. The task keeps, per target partition, the upstream offsets
in produce order and the downstream offsets in report order, and pairs them by position. The
pairing is checked, not assumed: the downstream offsets of one partition must strictly increase
in report order (the broker assigns them in append order, so any reordering shows as a decrease)
and every produced record must have been reported; otherwise the task fails (the batch is
retried: at-least-once, never a wrong sync).

The first record that cannot be delivered stops the task: nothing more is produced, the task
raises, the batch fails, and Spark's progress never moves past it (records already delivered in
the failed attempt are re-delivered on retry: at-least-once, never a loss).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from drkit.core.mirror_lease import EPOCH_HEADER
from drkit.core.origin import ORIGIN_HEADER, has_been_on, origin_prefix
from drkit.kafka.authz import Operation, refusal
from drkit.mirror.chunk import RecordChunk
from drkit.mirror.copied import COPY_SCHEMA, fold_ranges
from drkit.mirror.producers import (
    FAILURE_MARKER,
    FENCED_MARKER,
    TRANSACTION_TIMEOUT_SECONDS,
    DeliveryFailed,
    Fenced,
    cached_producer,
    describe,
    drop_cached,
    is_fenced,
)

#: How long a copy waits for the producer to learn of partitions just added to a target topic.
UNKNOWN_PARTITION_SECONDS = 30.0

#: Serve delivery reports (``poll(0)``) once per this many produced records: a failure reported by the
#: target stops the task at most this many records later (they are part of the failed attempt).
POLL_EVERY = 32


#: Print each task's timings to stderr (the benchmark's profile): DRKIT_MIRROR_TASK_TIMING=1.
TIMING = bool(os.environ.get("DRKIT_MIRROR_TASK_TIMING"))
_LOADED = time.monotonic()


class Copier:
    """Produces one micro-batch's records to the target and pairs each with its delivery report.

    Fed by a ``BatchReader`` (drkit.mirror.reader), in a copy task or in the driver,
    one chunk of a source partition's records at a time (drkit.mirror.chunk), in offset order. ``finish``
    flushes, checks the pairing and returns the batch's ranges as rows of ``COPY_SCHEMA``
    (drkit.mirror.copied); any failure raises ``DeliveryFailed`` and drops the producer, so a retry starts
    with a fresh one.

    With a ``producer`` given (exactly-once: an initialised transactional producer, not cached here), the
    copies are one transaction: begun here, committed by ``finish`` after every record was acknowledged
    (their target offsets are known before the commit), aborted by ``abort``.
    """

    def __init__(
        self,
        producer_conf: dict[str, Any],
        topic_map: dict[str, str],
        source_alias: str,
        target_alias: str = "",
        producer: Any = None,
        epoch: int = 0,
        gate: Callable[[], str | None] | None = None,
    ) -> None:
        self.began = time.monotonic()
        #: Every copy says which holder of the flow's lease made it (drkit.core.mirror_lease); none without one.
        self._stamp: list[tuple[str, bytes]] = [(EPOCH_HEADER, b"%d" % epoch)] if epoch else []
        #: Asked before each chunk: why this process may not copy now (its lease lapsed or was lost), or None.
        self._gate = gate
        #: Records that were on the target cluster before (an origin header names it) are never copied back.
        self._target_alias = target_alias
        self.skipped = 0
        self._transactional = producer is not None
        if producer is None:
            self._cache_key, self._producer = cached_producer(producer_conf, target_alias)
        else:
            self._cache_key, self._producer = "", producer
        self._topic_map = topic_map
        self._source_of = {target: source for source, target in topic_map.items()}
        self._origin = origin_prefix(source_alias)
        self._upstream: dict[tuple[str, int], list[int]] = {}  # per source partition, in produce order
        self._downstream: dict[tuple[str, int], list[int]] = {}  # per target partition, in report order
        self._sizes: dict[tuple[str, int], int] = {}
        self._newest: dict[tuple[str, int], int] = {}
        self.failures: list[str] = []
        #: the error that said a newer producer of the transactional id exists ("" while none did)
        self.fenced = ""
        self._unknown_since: float | None = None
        self.produced = 0
        self.waited = 0.0  # time spent waiting for input (the task's profile)
        if self._transactional:
            self._transaction("begin", self._producer.begin_transaction)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        where = (msg.topic(), msg.partition())
        reported = self._downstream.setdefault(where, [])
        if err is not None:
            source = self._source_of.get(where[0], where[0])
            ups = self._upstream.get((source, where[1]), [])
            at = ups[len(reported)] if len(reported) < len(ups) else "?"
            # A missing ACL says which one (drkit.kafka.authz), not which record met it first.
            refused = refusal(self._target_alias or "target", err, Operation.WRITE, where[0])
            self._note_fence(err)
            self.failures.append(
                refused
                or f"record {source}/{where[1]}@{at} could not be delivered to {where[0]}/{where[1]}: {describe(err)}"
            )
            reported.append(-1)
            return
        reported.append(msg.offset())

    def copy(self, chunk: RecordChunk) -> None:
        """Produce one chunk of a source partition's records, in offset order."""
        from confluent_kafka import KafkaException

        try:
            self._copy(chunk)
        # A fatal producer error, raised by poll (fenced, for one); confluent-kafka may also let it surface as a
        # SystemError from the delivery callback that runs while it is pending.
        except (KafkaException, SystemError) as exc:
            self._fatal(exc)

    def _note_fence(self, err: Any) -> None:
        if not self.fenced and is_fenced(err):
            self.fenced = describe(err)

    def _fatal(self, exc: Exception) -> None:
        cause = exc.args[0] if exc.args else exc
        self._note_fence(cause)
        self.failures.append(f"the producer failed: {describe(cause)}")

    def _copy(self, chunk: RecordChunk) -> None:
        """Produce one chunk of a source partition's records, in offset order."""
        from confluent_kafka import KafkaException

        topic, partition, offsets = chunk.topic, chunk.partition, chunk.offsets
        keys, values, stamps, headers = chunk.keys, chunk.values, chunk.stamps, chunk.headers
        if self.failures or not offsets:
            return
        refused = self._gate() if self._gate is not None else None
        if refused is not None:
            self.failures.append(refused)
            return
        target = self._topic_map.get(topic)
        if target is None:
            raise DeliveryFailed(f"{FAILURE_MARKER}topic {topic} is not selected by this flow")
        source_key = (topic, partition)
        ups = self._upstream.setdefault(source_key, [])
        produce, poll = self._producer.produce, self._producer.poll
        on_delivery, origin = self._on_delivery, self._origin
        failures = self.failures
        produced = self.produced
        nbytes = 0
        back_to = self._target_alias
        epoch_marks = self._stamp
        for i, offset in enumerate(offsets):
            if failures:
                break
            hdrs = headers[i] if headers is not None else None
            if hdrs and back_to and has_been_on(hdrs, back_to):
                self.skipped += 1  # an upstream gap in the syncs, like a compaction hole
                continue
            ups.append(offset)
            key, value = keys[i], values[i]
            mark = (ORIGIN_HEADER, origin + b"%d" % offset)
            while True:
                try:
                    # confluent-kafka's fifth positional is on_delivery's old name: timestamp and headers
                    # must be passed by keyword.
                    produce(
                        target,
                        value,
                        key,
                        partition,
                        on_delivery,
                        timestamp=stamps[i],
                        headers=[*hdrs, mark, *epoch_marks] if hdrs else [mark, *epoch_marks],
                    )
                    break
                except BufferError:
                    poll(0.1)
                except KafkaException as exc:
                    if self._learn_partitions(exc, target):
                        continue
                    ups.pop()
                    self._note_fence(exc.args[0])
                    failures.append(
                        f"record {topic}/{partition}@{offset} could not be delivered to "
                        f"{target}/{partition}: {describe(exc.args[0])}"
                    )
                    break
            if key is not None:
                nbytes += len(key)
            if value is not None:
                nbytes += len(value)
            produced += 1
            if not produced % POLL_EVERY:
                poll(0)
        self.produced = produced
        self._sizes[source_key] = self._sizes.get(source_key, 0) + nbytes
        top = max(stamps)
        self._newest[source_key] = max(self._newest.get(source_key, top), top)
        poll(0)

    def _learn_partitions(self, exc: Exception, target: str) -> bool:
        """Whether to produce again after ``exc``: a partition the producer does not know yet (just added to the
        target topic: librdkafka refreshes its metadata every 5 minutes) is looked up, for up to
        ``UNKNOWN_PARTITION_SECONDS``; anything else fails the copy."""
        from confluent_kafka import KafkaError

        if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:
            return False
        now = time.monotonic()
        if self._unknown_since is None:
            self._unknown_since = now
        if now - self._unknown_since > UNKNOWN_PARTITION_SECONDS:
            return False
        self._producer.list_topics(target, timeout=5)
        self._producer.poll(0.1)
        return True

    def _transaction(self, step: str, call: Any, *args: Any) -> None:
        """One step of the copy's transaction; a failure is the copy's (``Fenced`` when fenced)."""
        from confluent_kafka import KafkaException

        try:
            call(*args)
        except KafkaException as exc:
            self._note_fence(exc.args[0])
            self.failures.append(f"the transaction could not {step}: {describe(exc.args[0])}")
            raise self._failure() from None

    def _failure(self) -> DeliveryFailed:
        if self._transactional and not self.fenced:
            self._probe_fence()
        if self.fenced:
            return Fenced(FENCED_MARKER + self.fenced)
        return DeliveryFailed(FAILURE_MARKER + self.failures[0])

    def _probe_fence(self) -> None:
        """Whether a failed transactional producer was fenced: its fatal error is sticky, and librdkafka returns it
        from every later transactional call (the first report of it may have been lost in a callback)."""
        from confluent_kafka import KafkaException

        try:
            self._producer.abort_transaction(1)
        except KafkaException as exc:
            self._note_fence(exc.args[0])
        except Exception:  # noqa: S110 - a probe: any other answer says nothing about a fence
            pass

    def abort(self) -> None:
        """Forget this copy: the producer is dropped (a retry gets a fresh one) after a short flush; a
        transaction is aborted (its copies are never seen by a read_committed consumer)."""
        if self._transactional:
            import contextlib

            with contextlib.suppress(Exception):  # fenced, or the target gone: the next writer aborts it
                self._producer.abort_transaction(5)
            return
        drop_cached(self._cache_key)
        self._producer.flush(5)

    def finish(self, flush_timeout: float = 300.0, before_commit: Callable[[], None] | None = None) -> pa.Table:
        """Wait for every delivery report; the batch's exact ranges, or ``DeliveryFailed``. A transaction is
        committed last (``before_commit`` is called first: a test's crash point)."""
        from confluent_kafka import KafkaException

        flush_started = time.monotonic()
        try:
            remaining = self._producer.flush(flush_timeout)
        except (KafkaException, SystemError) as exc:
            self._fatal(exc)
            remaining = 0
        if TIMING:
            print(
                f"DRKIT-TASK pid={os.getpid()} worker_age={time.monotonic() - _LOADED:.1f} {sorted(self._upstream)} "
                f"records={self.produced} total={time.monotonic() - self.began:.3f} "
                f"waiting_for_input={self.waited:.3f} flush={time.monotonic() - flush_started:.3f}",
                file=sys.stderr,
                flush=True,
            )
        if remaining and not self.failures:
            self.failures.append(f"{remaining} records were not acknowledged by the target within {flush_timeout}s")
        if self.failures:
            self.abort()
            raise self._failure()

        rows: list[dict[str, Any]] = []  # one per range: few (a partition's gaps), built once
        for (topic, partition), ups in sorted(self._upstream.items()):
            if not ups:
                continue
            target = self._topic_map[topic]
            downs = self._downstream.get((target, partition), [])
            try:
                rows.extend(
                    fold_ranges(
                        topic,
                        target,
                        partition,
                        ups,
                        downs,
                        self._sizes.get((topic, partition), 0),
                        self._newest.get((topic, partition), 0),
                    )
                )
            except DeliveryFailed:
                self.abort()
                raise
        if self._transactional:
            if before_commit is not None:
                before_commit()
            self._transaction("commit", self._producer.commit_transaction, TRANSACTION_TIMEOUT_SECONDS)
        return pa.Table.from_pylist(rows, schema=COPY_SCHEMA)
