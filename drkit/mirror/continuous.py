"""The continuous copier: the driver copies records as they arrive, and micro-batches record its copies.

A micro-batch that copies its own records makes every record wait for the next trigger and then for
the whole batch (Spark's offset and commit logs, the plan, the copy, the Delta append): 0.6 s at p50
and over 1 s at p99 with a 1 s trigger, about 0.4 s at p99 even with batches back to back. The copier
takes the copy out of the batch. One thread in the driver reads the partitions the last plan gave it
with its own librdkafka consumer and produces each record as soon as it arrives, with its own
idempotent ``acks=all`` producer, so a record reaches the target in tens of milliseconds. Every
delivery report is paired with its upstream offset as drkit.mirror.deliver pairs them (per partition,
by position, checked when folded), and the acknowledged pairs wait in memory, per partition (a lane).

Spark's batches keep their pace and their meaning: batch ``b`` still plans ``[since, until)`` from
Spark's offset log, and its callback, instead of copying, asks the copier for the copies of exactly those
ranges (:meth:`ContinuousCopier.take`). It waits until the target acknowledged everything below
``until`` (normally done before the batch started), folds those copies into sync ranges, and writes them
to ``offset_syncs`` before Spark commits the batch: a batch is never committed before its syncs are
durable, and the Delta commits stay one per trigger. drkit.core.continuous decides which lanes run and
when a batch may take them: the copier runs only where the plan said, from where it said.

A target that stops acknowledging (a broker killed, restarted, frozen) is waited for, not given up on: the
producer retries the copies in flight with their sequence numbers, so the broker writes each once, and a
batch waits for them as long as the producer may retry (drkit.mirror.lanes.target_patience). A full
producer queue holds the records read back until there is room. The producer is kept across every
failure librdkafka retries or reports per record; a fresh one is made only after a fatal error, which the
log names (with the copies it leaves unsynced).

When the copier cannot give a batch its ranges (a read or delivery error, no progress of the source for
``STALL_SECONDS``: an outage, a source that lost records; the target silent past the producer's own
timeout), it drops everything it holds and the batch copies its own records on the per-batch path, with
all of that path's handling (waiting out outages, removed and short reads, unknown partitions). The
dropped copies are orphans on the target: duplicates with no sync, which failover places exactly by
their origin header (drkit.core.origin). A crash leaves the same orphans: the copies of at most the
records after the last committed batch.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from drkit.core.batch import EARLIEST, Partition
from drkit.core.continuous import TakeFailure, covered, lane_changes, split_stopped
from drkit.core.mirror_lease import EPOCH_HEADER
from drkit.core.offsets import BatchRanges
from drkit.core.origin import origin_prefix
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.lane_transactions import LaneTransactions
from drkit.mirror.lanes import (
    AHEAD_MAX_RECORDS,
    FLUSH_SECONDS,
    NO_CHANGES,
    READ_WAIT_SECONDS,
    STALL_SECONDS,
    Lane,
    LaneRequest,
    Taken,
    copy_messages,
    cut,
    target_patience,
)
from drkit.mirror.lease import LeaseStamp
from drkit.mirror.producers import DeliveryFailed, describe, new_producer
from drkit.mirror.reader import ABANDONED_MARKER, CHUNK, STOP_CHECK_SECONDS, BatchAbandoned

log = logging.getLogger(__name__)


class ContinuousCopier:
    """A thread copying the lanes it is given; :meth:`take` hands a planned batch its copies.

    The copying thread owns the consumer and the producer: a batch's changes to the lanes are requests it
    applies between two reads, so no record read for an old assignment is taken for a new lane. The lanes
    themselves are shared under one lock, held only while records are handed on and reports paired."""

    def __init__(
        self,
        flow: str,
        new_consumer: Callable[[], Any],
        source_alias: str,
        target_alias: str,
        new_producer_: Callable[[dict[str, Any], str], Any] = new_producer,
        stall_seconds: float = STALL_SECONDS,
        ahead: int = AHEAD_MAX_RECORDS,
        lease: LeaseStamp | None = None,
        transactions: LaneTransactions | None = None,
    ) -> None:
        self.flow = flow
        #: exactly-once: the copies go into the slots' transactions (drkit.mirror.lane_transactions) and count
        #: once committed; None: one idempotent producer, a copy counts once acknowledged
        self._txn = transactions
        #: Asked before every produce: a copier whose lease lapsed copies nothing until it is renewed (the
        #: records read wait); one whose lease was lost fails its lanes (the batches stop on the loss).
        self._lease = lease
        self.ahead = ahead
        self._new_consumer = new_consumer
        self._new_producer = new_producer_
        self._target_alias = target_alias
        self._origin = origin_prefix(source_alias)
        self.stall_seconds = stall_seconds
        self._cond = threading.Condition()
        self._lanes: dict[Partition, Lane] = {}
        self._consumer: Any = None
        self._producer: Any = None
        #: the producer's fatal error (librdkafka's error callback): only then is it replaced
        self._fatal: str | None = None
        #: producers replaced after a fatal error
        self.fresh_producers = 0
        #: records read and not produced yet: the producer's queue was full (read order, from the first)
        self._unproduced: list[Any] = []
        self._producer_of: Callable[[Partition, Lane], Any] = (
            self._txn.producer if self._txn is not None else lambda key, lane: self._producer
        )
        self._conf: dict[str, Any] | None = None
        self._topic_map: dict[str, str] = {}
        self._known_topics: set[str] = set()
        self._skipped = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        #: what the copying thread applies next; None when nothing is pending
        self._request: LaneRequest | None = None
        #: lanes paused because the copier holds its limit and no batch waits on them
        self._paused: set[Partition] = set()
        #: the mirror is stopping: no more reading, batches take what was copied and copy the rest
        self._stopped_reading = False

    # -- the batch's side --------------------------------------------------------------------

    def start(self, producer_conf: dict[str, Any], topic_map: dict[str, str]) -> None:
        """Make the clients ahead of the first batch, so that its lanes (a takeover's first copies) do not wait
        for them: the consumer, and the producer with the settings the batches will ask for (a batch asking
        for others makes a new one). The copying thread starts with the first batch's lanes; until then it
        does not run, so the clients are still the thread's alone. A client that cannot be made here is made
        by the first batch, which reports what is wrong."""
        with self._cond:
            if self._thread is not None or self._producer is not None:
                return
            self._conf, self._topic_map = dict(producer_conf), dict(topic_map)
            try:
                self._consumer = self._new_consumer()
                if self._txn is not None:
                    self._txn.bind(self._conf)
                else:
                    self._producer = self._make_producer()
            except Exception as exc:
                log.debug("flow %s: the copier's clients are made with the first batch: %s", self.flow, describe(exc))

    def take(
        self,
        ranges: BatchRanges,
        end: Mapping[Partition, int],
        topic_map: Mapping[str, str],
        producer_conf: dict[str, Any],
        stopping: Callable[[], bool],
    ) -> Taken:
        """The copies of exactly ``ranges`` once the target acknowledged them all, or why the batch must copy
        its own records (the copier then holds nothing: what it had copied is orphaned)."""
        with self._cond:
            self._ensure_thread()
            new_producer = producer_conf != self._conf or dict(topic_map) != self._topic_map
            if new_producer:
                self._conf, self._topic_map = dict(producer_conf), dict(topic_map)
            if self._stopped_reading:
                return self._take_stopped(ranges, stopping)
            bases = {key: lane.base for key, lane in self._lanes.items()}
            changes = lane_changes(bases, ranges, end, frozenset(self._topic_map))
            if new_producer or changes:
                self._apply(LaneRequest(changes, new_producer=new_producer), stopping)
            for key, (_, until) in ranges.items():
                if key in self._lanes:
                    self._lanes[key].wanted = max(self._lanes[key].wanted, until)
            self._cond.notify_all()
            failure = self._wait(ranges, stopping)
            if failure is None and self._stopped_reading:
                return self._take_stopped(ranges, stopping)
            if failure is not None:
                self._apply(LaneRequest(NO_CHANGES, drop_all=True), stopping)
                return Taken(None, *failure)
            rows: list[dict[str, Any]] = []
            try:
                for key, (_, until) in sorted(ranges.items()):
                    rows.extend(self._cut(key, until))
            except DeliveryFailed as exc:
                self._apply(LaneRequest(NO_CHANGES, drop_all=True), stopping)
                return Taken(None, TakeFailure.LANE_FAILED, str(exc))
            skipped, self._skipped = self._skipped, 0
            return Taken(pa.Table.from_pylist(rows, schema=COPY_SCHEMA), skipped=skipped)

    def _take_stopped(self, ranges: BatchRanges, stopping: Callable[[], bool]) -> Taken:
        """A batch of a stopping mirror: the lanes' acknowledged copies of its ranges, and the rest for the
        batch to copy itself (drkit.core.continuous.split_stopped). Lanes no batch takes past stay empty."""
        self._apply(LaneRequest(NO_CHANGES, flush=True), stopping)
        rows: list[dict[str, Any]] = []
        rest: dict[Partition, tuple[int, int]] = {}
        try:
            for key, (since, until) in sorted(ranges.items()):
                lane = self._lanes.get(key)
                if lane is not None and lane.failure is not None:
                    self._forget(key)  # its copies are orphans: the batch copies the range itself
                    lane = None
                base, at = (None, -1) if lane is None else (lane.base, lane.frontier())
                split = split_stopped(base, at, since, until)
                if lane is not None and split.taken_below is None:
                    self._forget(key)
                elif lane is not None and split.taken_below is not None:
                    rows.extend(self._cut(key, split.taken_below))
                    if split.rest is not None:  # the batch copies the rest: the lane holds nothing now
                        lane.base = lane.reached = until
                if split.rest is not None:
                    rest[key] = split.rest
        except DeliveryFailed as exc:
            self._apply(LaneRequest(NO_CHANGES, drop_all=True), stopping)
            return Taken(None, TakeFailure.LANE_FAILED, str(exc))
        skipped, self._skipped = self._skipped, 0
        return Taken(pa.Table.from_pylist(rows, schema=COPY_SCHEMA), skipped=skipped, rest=rest)

    def stop_reading(self) -> None:
        """The mirror is stopping: read no more, so that the next batches take every copy made (none is left
        an orphan) and copy what the copier did not read themselves."""
        with self._cond:
            self._stopped_reading = True
            self._cond.notify_all()

    def _forget(self, key: Partition) -> None:
        self._lanes.pop(key, None)

    def _apply(self, request: LaneRequest, stopping: Callable[[], bool]) -> None:
        """Have the copying thread apply ``request``, and wait until it did (lock held)."""
        self._request = request
        self._cond.notify_all()
        checked = time.monotonic()
        while self._request is not None:
            self._cond.wait(0.05)
            if time.monotonic() - checked >= STOP_CHECK_SECONDS:
                checked = time.monotonic()
                self._check_stopping(stopping)
                self._ensure_thread()

    def _check_stopping(self, stopping: Callable[[], bool]) -> None:
        self._cond.release()  # ``stopping`` may call into the JVM: never while the copier waits for the lock
        try:
            stop = stopping()
        finally:
            self._cond.acquire()
        if stop:
            raise BatchAbandoned(f"{ABANDONED_MARKER}the mirror is stopping")

    def _wait(self, ranges: BatchRanges, stopping: Callable[[], bool]) -> tuple[TakeFailure, str] | None:
        """Until every planned lane is covered (drkit.core.continuous.covered), a lane failed, or none moved
        for ``stall_seconds``; the batch is given up when the mirror stops (lock held)."""
        progress = {key: self._lanes[key].frontier() if key in self._lanes else -1 for key in ranges}
        moved = checked = time.monotonic()
        patience = target_patience(self._conf or {}, self.stall_seconds)
        silent_since: float | None = None  # when the wait on the target was logged
        while True:
            waiting = False
            for key, (since, until) in ranges.items():
                lane = self._lanes.get(key)
                if lane is None:  # dropped with the producer: its copies in flight were not acknowledged
                    return TakeFailure.LANE_FAILED, f"{key[0]}/{key[1]}: the copier dropped its copies"
                if lane.failure is not None:
                    return TakeFailure.LANE_FAILED, lane.failure
                at = lane.frontier()
                if at != progress[key]:
                    progress[key], moved = at, time.monotonic()
                if not covered(lane.base, at, since, until):
                    waiting = True
            now = time.monotonic()
            if silent_since is not None and now - moved < self.stall_seconds:
                log.warning(
                    "flow %s: the target %s acknowledges the copies again after %.0fs",
                    self.flow,
                    self._target_alias,
                    now - silent_since,
                )
                silent_since = None
            if not waiting or self._stopped_reading:
                return None
            if now - moved > self.stall_seconds:
                behind = sorted(
                    k for k, (s, u) in ranges.items() if not covered(self._lanes[k].base, progress[k], s, u)
                )
                in_flight = sum(self._lanes[k].in_flight() for k in behind)
                held_back = len(self._unproduced)  # the producer's queue is full, or the lease lapsed
                if (in_flight or held_back) and self._fatal is None and now - moved <= patience:
                    if silent_since is None:
                        silent_since = moved
                        log.warning(
                            "flow %s: the target %s has not acknowledged %d copies for %.0fs (%d more records "
                            "read wait for room in the producer or for the lease): waiting for them (the producer "
                            "retries each until its message.timeout.ms; a retry is never a second copy)",
                            self.flow,
                            self._target_alias,
                            in_flight,
                            now - moved,
                            held_back,
                        )
                else:
                    topic, partition = behind[0]
                    return TakeFailure.NO_PROGRESS, (
                        f"no copy of {len(behind)} planned partition(s) progressed for {now - moved:.0f}s "
                        f"({topic}/{partition} at offset {progress[behind[0]]}, planned up to {ranges[behind[0]][1]})"
                    )
            if now - checked >= STOP_CHECK_SECONDS:
                checked = now
                self._check_stopping(stopping)
            self._cond.wait(0.05)

    def _cut(self, key: Partition, until: int) -> list[dict[str, Any]]:
        return cut(key, self._lanes[key], until)

    def close(self) -> None:
        """Stop copying; what no batch took is orphaned on the target."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(FLUSH_SECONDS)
        if thread is None or not thread.is_alive():
            self._drop_all()
            if self._producer is not None:
                producer, self._producer = self._producer, None
                with contextlib.suppress(Exception):
                    producer.flush(1.0)  # their reports find no lane: nothing of them is kept
            if self._consumer is not None:
                consumer, self._consumer = self._consumer, None
                with contextlib.suppress(Exception):
                    consumer.close()

    def held(self) -> int:
        """Copies produced and not yet taken by a batch (acknowledged or in flight)."""
        with self._cond:
            return sum(lane.held() for lane in self._lanes.values())

    # -- the copying thread: lanes, consumer and producer -------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name=f"drkit-copier-{self.flow}", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                if self._request is not None:
                    try:
                        self._change(self._request)
                    except Exception as exc:  # the lanes fail: the batch copies its own records
                        for lane in self._lanes.values():
                            lane.failure = lane.failure or f"the copier could not follow the plan: {describe(exc)}"
                    self._request = None
                    self._cond.notify_all()
                consumer = self._consumer
                if not self._lanes or consumer is None:
                    self._cond.wait(0.05)
                    continue
                try:
                    paused = self._pause_ahead(consumer)
                except Exception as exc:  # the lanes fail: the batch copies its own records
                    for lane in self._lanes.values():
                        lane.failure = lane.failure or f"the copier could not pause a partition: {describe(exc)}"
                    paused = len(self._lanes)
                reading = not self._stopped_reading and paused < len(self._lanes) and not self._unproduced
            # Read without the lock: a batch waits on the lanes meanwhile, not on the source.
            # Records read here belong to the lanes as they are: a change is applied only at the loop's top.
            error: Exception | None = None
            try:
                messages = consumer.consume(CHUNK, READ_WAIT_SECONDS) if reading else []
            except Exception as exc:
                messages, error = [], exc
            with self._cond:
                try:
                    if error is not None:
                        raise error
                    waiting, self._unproduced = self._unproduced, []
                    self._copy(waiting + messages if waiting else messages)
                    if self._txn is not None:
                        self._txn.poll()
                        self._txn.commit_due()
                        if not reading:
                            self._cond.wait(0.01)
                    elif self._producer is not None:
                        self._producer.poll(0 if reading else 0.01)
                except Exception as exc:  # never silent: every lane fails, the batch copies its own records
                    reason = f"the copier failed: {describe(exc)}"
                    for lane in self._lanes.values():
                        lane.failure = lane.failure or reason
                self._cond.notify_all()

    def _pause_ahead(self, consumer: Any) -> int:
        """Pause the lanes that hold all a batch waits for while the copier holds its limit, resume the others;
        how many are paused. The limit is on the total, so a lane a batch still waits on always reads: one
        partition's backlog never starves another's."""
        from confluent_kafka import TopicPartition

        full = sum(lane.held() for lane in self._lanes.values()) >= self.ahead
        pause = {k for k, lane in self._lanes.items() if lane.reached >= lane.wanted} if full else set()
        if pause - self._paused:
            consumer.pause([TopicPartition(t, p) for t, p in sorted(pause - self._paused)])
        if self._paused - pause:
            consumer.resume([TopicPartition(t, p) for t, p in sorted(self._paused - pause)])
        self._paused = pause
        return len(pause)

    def _change(self, request: LaneRequest) -> None:
        """Apply a batch's request: lane changes (drkit.core.continuous.lane_changes), a new producer, a flush.
        Records read and not produced are forgotten: the assignment below reads every lane again from where
        its last copy was made."""
        self._unproduced = []
        if request.drop_all:
            self._drop_all()
        changes = request.changes
        touched = [k for k in (*changes.drop, *changes.start) if k in self._lanes]
        if self._txn is not None:
            self._change_transactions(request, touched)
            return
        # A lane's reports pair with it by position and come back to it alone (Lane.on_delivery), so a lane
        # goes without waiting for its copies in flight. Another producer would report in another order:
        # every report of this one is served first, and a stopping mirror's batches wait for every copy.
        if (request.new_producer or request.flush) and self._producer is not None:
            if self._producer.flush(FLUSH_SECONDS):
                self._drop_all()  # the copies still in flight are orphans
            if request.new_producer:
                self._producer = None  # the lanes keep the copies reported; _assign makes the new one
        for key in touched:
            self._forget(key)
        for key, since in changes.start.items():
            self._lanes[key] = Lane(since, self._topic_map[key[0]])
        self._assign()

    def _change_transactions(self, request: LaneRequest, touched: list[Partition]) -> None:
        """``_change`` for exactly-once lanes: every open transaction is committed before a lane goes or starts
        (a read back stops at an open one), the settings change or a stopping mirror's batch takes the copies;
        the lanes that go leave their partitions to be read back; the new ones start after what is committed."""
        txn = self._txn
        assert txn is not None
        if touched or request.changes.start or request.new_producer or request.flush:
            deadline = time.monotonic() + FLUSH_SECONDS
            while not txn.commit_due(force=True):
                if time.monotonic() > deadline:
                    self._drop_all()
                    break
        if request.new_producer:
            txn.bind(self._conf or {})
        txn.unread(set(touched))
        for key in touched:
            self._forget(key)
        started: dict[Partition, Lane] = {}
        for key, since in request.changes.start.items():
            lane = started[key] = self._lanes[key] = Lane(since, self._topic_map[key[0]])
            lane.committed = 0
        if started:
            kept = txn.seed(started, self._topic_map)
            if kept:
                log.info(
                    "flow %s: %d copies of %d partition(s) were already committed on %s past the last sync: kept, "
                    "not copied again",
                    self.flow,
                    kept,
                    len(started),
                    self._target_alias,
                )
        self._assign()

    def _drop_all(self) -> None:
        """Forget every lane and the consumer's positions (the next lanes read from where their batches
        plan). The producer is kept: librdkafka retries what it can with the same sequence numbers, and a
        record it reports failed is no reason to doubt the others; a new producer would write the copies
        the old one still retries a second time. Only a fatal error (the producer refuses to go on) makes a
        fresh one, and the log says so. Exactly-once: every open transaction is aborted, and the partitions are
        read back before they are copied again (committed copies no batch took are on the target)."""
        self._unproduced = []
        if self._txn is not None:
            self._txn.release(set(self._lanes))
        if self._producer is not None and self._fatal is not None:
            producer, self._producer = self._producer, None
            self.fresh_producers += 1
            held = sum(lane.held() for lane in self._lanes.values())
            log.warning(
                "flow %s: the copier's producer to %s hit a fatal error (%s): a fresh producer replaces it; "
                "up to %d copies it made and no batch took may be on the target without a sync (orphans)",
                self.flow,
                self._target_alias,
                self._fatal,
                held,
            )
            with contextlib.suppress(Exception):
                producer.flush(0)
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            self._known_topics = set()
            with contextlib.suppress(Exception):
                consumer.close()
        self._lanes.clear()
        self._skipped = 0

    def _assign(self) -> None:
        from confluent_kafka import TopicPartition

        if not self._lanes:
            if self._consumer is not None:
                with contextlib.suppress(Exception):
                    self._consumer.unassign()
            return
        if self._consumer is None:
            self._consumer = self._new_consumer()
        if self._producer is None and self._txn is None:
            self._producer = self._make_producer()
        new = {t for t, _ in self._lanes} - self._known_topics
        if new:  # metadata before the assignment: librdkafka starts fetching a topic it never read only after it
            with contextlib.suppress(Exception):
                self._consumer.list_topics(next(iter(new)) if len(new) == 1 else None, timeout=5)
                for topic in new:
                    if self._producer is not None:
                        self._producer.list_topics(self._topic_map[topic], timeout=5)
                self._known_topics |= new
        self._paused = set()  # an assignment fetches every partition again
        self._consumer.assign(
            [
                TopicPartition(t, p, lane.reached if lane.reached >= 0 else EARLIEST)
                for (t, p), lane in self._lanes.items()
            ]
        )

    def _make_producer(self) -> Any:
        self._fatal = None
        return self._new_producer({**(self._conf or {}), "error_cb": self._on_error}, self._target_alias)

    def _on_error(self, err: Any) -> None:
        """librdkafka's client-level errors (served by poll and flush, in the copying thread): only a fatal one
        matters here; the others are retried by the producer itself."""
        with contextlib.suppress(AttributeError):
            if err.fatal():
                self._fatal = self._fatal or describe(err)

    def _copy(self, messages: list[Any]) -> None:
        marks: list[tuple[str, bytes]] = []
        if self._lease is not None and messages:
            refused = self._lease.refusal()
            if refused is not None and self._lease.is_lost():
                for lane in self._lanes.values():
                    lane.failure = lane.failure or refused
                return
            if refused is not None:  # lapsed: its renewals meet the outage the copies would; nothing is
                self._unproduced = messages  # copied until one succeeds, and the records read wait for it
                return
            marks = [(EPOCH_HEADER, b"%d" % self._lease.epoch)]
        skipped, self._unproduced = copy_messages(
            messages, self._lanes, self._producer_of, self._origin, self._target_alias, marks
        )
        self._skipped += skipped
