"""The continuous copier's copying thread: it reads the lanes' partitions and produces each record as it
arrives, with the lanes' state shared with the batches under one lock (drkit.mirror.continuous).

Invariants: the thread owns the consumer and the producer (or the exactly-once transactions: drkit.mirror.
lane_transactions); a batch's changes to the lanes (:class:`drkit.mirror.lanes.LaneRequest`) are applied
between two reads, so no record read for an old assignment is taken for a new lane; records read and not
produced (a full producer queue, a lapsed lease, a transaction being committed) are produced first, in read
order, or forgotten with the assignment they came from (the next assignment reads them again); the producer
is replaced only after a fatal error.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from drkit.core.batch import EARLIEST, Partition
from drkit.core.exactly_once import BEHIND_FULL_READS
from drkit.core.mirror_lease import EPOCH_HEADER
from drkit.core.origin import origin_prefix
from drkit.mirror.lane_transactions import LaneTransactions
from drkit.mirror.lanes import FLUSH_SECONDS, READ_WAIT_SECONDS, Lane, LaneRequest, copy_messages
from drkit.mirror.lease import LeaseStamp
from drkit.mirror.producers import describe
from drkit.mirror.reader import CHUNK

log = logging.getLogger(__name__)


class CopyingLoop:
    """The copying thread and the state it shares with the batches (``lanes``, ``request``, ``unproduced``, the
    settings), all under ``cond``."""

    def __init__(
        self,
        flow: str,
        new_consumer: Callable[[], Any],
        source_alias: str,
        target_alias: str,
        new_producer_: Callable[[dict[str, Any], str], Any],
        ahead: int,
        lease: LeaseStamp | None,
        transactions: LaneTransactions | None,
    ) -> None:
        self.flow = flow
        #: exactly-once: the copies go into the slots' transactions (drkit.mirror.lane_transactions) and count
        #: once committed; None: one idempotent producer, a copy counts once acknowledged
        self.txn = transactions
        #: Asked before every produce: a copier whose lease lapsed copies nothing until it is renewed (the
        #: records read wait); one whose lease was lost fails its lanes (the batches stop on the loss).
        self._lease = lease
        self.ahead = ahead
        self._new_consumer = new_consumer
        self._new_producer = new_producer_
        self.target_alias = target_alias
        self._origin = origin_prefix(source_alias)
        self.cond = threading.Condition()
        self.lanes: dict[Partition, Lane] = {}
        self.consumer: Any = None
        self.producer: Any = None
        #: the producer's fatal error (librdkafka's error callback): only then is it replaced
        self.fatal: str | None = None
        #: producers replaced after a fatal error
        self.fresh_producers = 0
        #: records read and not produced yet: the producer's queue was full (read order, from the first)
        self.unproduced: list[Any] = []
        self._producer_of: Callable[[Partition, Lane], Any] = (
            self.txn.producer if self.txn is not None else lambda key, lane: self.producer
        )
        self.conf: dict[str, Any] | None = None
        self.topic_map: dict[str, str] = {}
        self._known_topics: set[str] = set()
        #: the partitions of the last assignment: a lane not among them is new (its metadata is refreshed first)
        self._assigned: set[Partition] = set()
        self.skipped = 0
        self.closed = False
        self._thread: threading.Thread | None = None
        #: what the copying thread applies next; None when nothing is pending
        self.request: LaneRequest | None = None
        #: lanes paused because the copier holds its limit and no batch waits on them
        self._paused: set[Partition] = set()
        #: the mirror is stopping: no more reading, batches take what was copied and copy the rest
        self.stopped_reading = False
        #: reads in a row that filled their chunk (exactly-once: the copier is behind the source after a few)
        self._full_reads = 0

    def start_clients(self, producer_conf: dict[str, Any], topic_map: dict[str, str]) -> None:
        """Make the consumer, and the producer with the settings the batches will ask for (a batch asking for
        others makes a new one), before the first batch. The thread starts with the first batch's lanes; until
        then it does not run, so the clients are still the thread's alone. A client that cannot be made here is
        made by the first batch, which reports what is wrong."""
        with self.cond:
            if self._thread is not None or self.producer is not None:
                return
            self.conf, self.topic_map = dict(producer_conf), dict(topic_map)
            try:
                self.consumer = self._new_consumer()
                if self.txn is not None:
                    self.txn.bind(self.conf)
                else:
                    self.producer = self.make_producer()
            except Exception as exc:
                log.debug("flow %s: the copier's clients are made with the first batch: %s", self.flow, describe(exc))

    def shutdown(self) -> None:
        """Stop the thread and close the clients; what no batch took is orphaned on the target."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(FLUSH_SECONDS)
        if thread is None or not thread.is_alive():
            self.drop_all()
            if self.producer is not None:
                producer, self.producer = self.producer, None
                with contextlib.suppress(Exception):
                    producer.flush(1.0)  # their reports find no lane: nothing of them is kept
            if self.consumer is not None:
                consumer, self.consumer = self.consumer, None
                with contextlib.suppress(Exception):
                    consumer.close()

    def ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name=f"drkit-copier-{self.flow}", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self.cond:
                if self.closed:
                    return
                if self.request is not None:
                    try:
                        self._change(self.request)
                    except Exception as exc:  # the lanes fail: the batch copies its own records
                        for lane in self.lanes.values():
                            lane.failure = lane.failure or f"the copier could not follow the plan: {describe(exc)}"
                    self.request = None
                    self.cond.notify_all()
                consumer = self.consumer
                if not self.lanes or consumer is None:
                    self.cond.wait(0.05)
                    continue
                try:
                    paused = self._pause_ahead(consumer)
                except Exception as exc:  # the lanes fail: the batch copies its own records
                    for lane in self.lanes.values():
                        lane.failure = lane.failure or f"the copier could not pause a partition: {describe(exc)}"
                    paused = len(self.lanes)
                # Records held back (a slot's commit, a full queue, a lapsed lease) are produced first; reading
                # goes on up to one chunk of them, so one slot's commit does not stop the others' records.
                reading = not self.stopped_reading and paused < len(self.lanes) and len(self.unproduced) < CHUNK
            # Read without the lock: a batch waits on the lanes meanwhile, not on the source.
            # Records read here belong to the lanes as they are: a change is applied only at the loop's top.
            error: Exception | None = None
            try:
                messages = consumer.consume(CHUNK, READ_WAIT_SECONDS) if reading else []
            except Exception as exc:
                messages, error = [], exc
            with self.cond:
                try:
                    if error is not None:
                        raise error
                    if self.txn is not None and reading:
                        self._full_reads = self._full_reads + 1 if len(messages) >= CHUNK else 0
                        self.txn.behind = self._full_reads >= BEHIND_FULL_READS
                    waiting, self.unproduced = self.unproduced, []
                    self._copy(waiting + messages if waiting else messages)
                    if self.txn is not None:
                        self.txn.poll()
                        self.txn.commit_due()
                        if not reading:
                            self.cond.wait(0.01)
                    elif self.producer is not None:
                        self.producer.poll(0 if reading else 0.01)
                except Exception as exc:  # never silent: every lane fails, the batch copies its own records
                    reason = f"the copier failed: {describe(exc)}"
                    for lane in self.lanes.values():
                        lane.failure = lane.failure or reason
                self.cond.notify_all()

    def _pause_ahead(self, consumer: Any) -> int:
        """Pause the lanes that hold all a batch waits for while the copier holds its limit, resume the others;
        how many are paused. The limit is on the total, so a lane a batch still waits on always reads: one
        partition's backlog never starves another's."""
        from confluent_kafka import TopicPartition

        full = sum(lane.held() for lane in self.lanes.values()) >= self.ahead
        pause = {k for k, lane in self.lanes.items() if lane.reached >= lane.wanted} if full else set()
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
        self.unproduced = []
        if request.drop_all:
            self.drop_all()
        changes = request.changes
        touched = [k for k in (*changes.drop, *changes.start) if k in self.lanes]
        if self.txn is not None:
            self._change_transactions(request, touched)
            return
        # A lane's reports pair with it by position and come back to it alone (Lane.on_delivery), so a lane
        # goes without waiting for its copies in flight. Another producer would report in another order:
        # every report of this one is served first, and a stopping mirror's batches wait for every copy.
        if (request.new_producer or request.flush) and self.producer is not None:
            if self.producer.flush(FLUSH_SECONDS):
                self.drop_all()  # the copies still in flight are orphans
            if request.new_producer:
                self.producer = None  # the lanes keep the copies reported; _assign makes the new one
        for key in touched:
            self.forget(key)
        for key, since in changes.start.items():
            self.lanes[key] = Lane(since, self.topic_map[key[0]])
        self._assign()

    def _change_transactions(self, request: LaneRequest, touched: list[Partition]) -> None:
        """``_change`` for exactly-once lanes: every open transaction is committed before a lane goes or starts
        (a read back stops at an open one), the settings change or a stopping mirror's batch takes the copies;
        the lanes that go leave their partitions to be read back; the new ones start after what is committed."""
        txn = self.txn
        assert txn is not None
        if touched or request.changes.start or request.new_producer or request.flush:
            deadline = time.monotonic() + FLUSH_SECONDS
            while not txn.commit_due(force=True):
                if time.monotonic() > deadline:
                    self.drop_all()
                    break
        if request.new_producer:
            txn.bind(self.conf or {})
        txn.unread(set(touched))
        for key in touched:
            self.forget(key)
        started: dict[Partition, Lane] = {}
        for key, since in request.changes.start.items():
            started[key] = self.lanes[key] = Lane(since, self.topic_map[key[0]], transactional=True)
        if started:
            kept = txn.seed(started, self.topic_map)
            if kept:
                log.info(
                    "flow %s: %d copies of %d partition(s) were already committed on %s past the last sync: kept, "
                    "not copied again",
                    self.flow,
                    kept,
                    len(started),
                    self.target_alias,
                )
        self._assign()

    def drop_all(self) -> None:
        """Forget every lane and the consumer's positions (the next lanes read from where their batches
        plan). The producer is kept: librdkafka retries what it can with the same sequence numbers, and a
        record it reports failed is no reason to doubt the others; a new producer would write the copies
        the old one still retries a second time. Only a fatal error (the producer refuses to go on) makes a
        fresh one, and the log says so. Exactly-once: every open transaction is aborted, and the partitions are
        read back before they are copied again (committed copies no batch took are on the target)."""
        self.unproduced = []
        if self.txn is not None:
            self.txn.release(set(self.lanes))
        if self.producer is not None and self.fatal is not None:
            producer, self.producer = self.producer, None
            self.fresh_producers += 1
            held = sum(lane.held() for lane in self.lanes.values())
            log.warning(
                "flow %s: the copier's producer to %s hit a fatal error (%s): a fresh producer replaces it; "
                "up to %d copies it made and no batch took may be on the target without a sync (orphans)",
                self.flow,
                self.target_alias,
                self.fatal,
                held,
            )
            with contextlib.suppress(Exception):
                producer.flush(0)
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            self._known_topics = set()
            self._assigned = set()
            with contextlib.suppress(Exception):
                consumer.close()
        self.lanes.clear()
        self.skipped = 0

    def _assign(self) -> None:
        from confluent_kafka import TopicPartition

        if not self.lanes:
            if self.consumer is not None:
                with contextlib.suppress(Exception):
                    self.consumer.unassign()
            return
        if self.consumer is None:
            self.consumer = self._new_consumer()
        if self.producer is None and self.txn is None:
            self.producer = self.make_producer()
        new = {t for t, _ in self.lanes} - self._known_topics
        # Metadata before the assignment, for the topics never read and those with a lane started since the last
        # assignment (a partition added to a topic already read): librdkafka fetches a partition and produces to
        # one only once its metadata holds it, and learns of new ones on its own only minutes later; a produce
        # to a partition it does not know fails the lane, and the batch's own copy orphans the copies made ahead.
        refresh = new | {t for t, p in self.lanes if (t, p) not in self._assigned}
        if refresh:
            with contextlib.suppress(Exception):
                self.consumer.list_topics(next(iter(refresh)) if len(refresh) == 1 else None, timeout=5)
                for topic in refresh:
                    if self.producer is not None:
                        self.producer.list_topics(self.topic_map[topic], timeout=5)
                self._known_topics |= new
        self._assigned = set(self.lanes)
        self._paused = set()  # an assignment fetches every partition again
        self.consumer.assign(
            [
                TopicPartition(t, p, lane.reached if lane.reached >= 0 else EARLIEST)
                for (t, p), lane in self.lanes.items()
            ]
        )

    def make_producer(self) -> Any:
        self.fatal = None
        return self._new_producer({**(self.conf or {}), "error_cb": self._on_error}, self.target_alias)

    def _on_error(self, err: Any) -> None:
        """librdkafka's client-level errors (served by poll and flush, in the copying thread): only a fatal one
        matters here; the others are retried by the producer itself."""
        with contextlib.suppress(AttributeError):
            if err.fatal():
                self.fatal = self.fatal or describe(err)

    def _copy(self, messages: list[Any]) -> None:
        marks: list[tuple[str, bytes]] = []
        if self._lease is not None and messages:
            refused = self._lease.refusal()
            if refused is not None and self._lease.is_lost():
                for lane in self.lanes.values():
                    lane.failure = lane.failure or refused
                return
            if refused is not None:  # lapsed: its renewals meet the outage the copies would; nothing is
                self.unproduced = messages  # copied until one succeeds, and the records read wait for it
                return
            marks = [(EPOCH_HEADER, b"%d" % self._lease.epoch)]
        skipped, self.unproduced = copy_messages(
            messages, self.lanes, self._producer_of, self._origin, self.target_alias, marks
        )
        self.skipped += skipped

    def forget(self, key: Partition) -> None:
        self.lanes.pop(key, None)
