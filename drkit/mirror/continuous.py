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

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from drkit.core.batch import Partition
from drkit.core.continuous import TakeFailure, covered, lane_changes, split_stopped
from drkit.core.offsets import BatchRanges
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.copying_loop import CopyingLoop
from drkit.mirror.lane_transactions import LaneTransactions
from drkit.mirror.lanes import (
    AHEAD_MAX_RECORDS,
    NO_CHANGES,
    STALL_SECONDS,
    LaneRequest,
    Taken,
    cut,
    target_patience,
)
from drkit.mirror.lease import LeaseStamp
from drkit.mirror.producers import DeliveryFailed, new_producer
from drkit.mirror.reader import ABANDONED_MARKER, STOP_CHECK_SECONDS, BatchAbandoned

log = logging.getLogger(__name__)


class ContinuousCopier:
    """The batches' side of the copier: :meth:`take` hands a planned batch its copies, made by the copying thread
    (drkit.mirror.copying_loop.CopyingLoop), whose lanes are shared under one lock.

    The copying thread owns the consumer and the producer: a batch's changes to the lanes are requests it
    applies between two reads, so no record read for an old assignment is taken for a new lane. The lanes
    themselves are shared under the loop's lock, held only while records are handed on and reports paired."""

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
        self.stall_seconds = stall_seconds
        self.loop = CopyingLoop(
            flow, new_consumer, source_alias, target_alias, new_producer_, ahead, lease, transactions
        )

    @property
    def ahead(self) -> int:
        """The most copies the copier holds ahead of the batches (drkit.mirror.lanes.ahead_limit)."""
        return self.loop.ahead

    @ahead.setter
    def ahead(self, value: int) -> None:
        self.loop.ahead = value

    @property
    def fresh_producers(self) -> int:
        """Producers replaced after a fatal error."""
        return self.loop.fresh_producers

    def start(self, producer_conf: dict[str, Any], topic_map: dict[str, str]) -> None:
        """Make the clients ahead of the first batch, so that its lanes (a takeover's first copies) do not wait
        for them (drkit.mirror.copying_loop.CopyingLoop.start_clients)."""
        self.loop.start_clients(producer_conf, topic_map)

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
        with self.loop.cond:
            self.loop.ensure_thread()
            new_producer = producer_conf != self.loop.conf or dict(topic_map) != self.loop.topic_map
            if new_producer:
                self.loop.conf, self.loop.topic_map = dict(producer_conf), dict(topic_map)
            if self.loop.stopped_reading:
                return self._take_stopped(ranges, stopping)
            bases = {key: lane.base for key, lane in self.loop.lanes.items()}
            changes = lane_changes(bases, ranges, end, frozenset(self.loop.topic_map))
            if new_producer or changes:
                self._apply(LaneRequest(changes, new_producer=new_producer), stopping)
            for key, (_, until) in ranges.items():
                if key in self.loop.lanes:
                    self.loop.lanes[key].wanted = max(self.loop.lanes[key].wanted, until)
            self.loop.cond.notify_all()
            failure = self._wait(ranges, stopping)
            if failure is None and self.loop.stopped_reading:
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
            skipped, self.loop.skipped = self.loop.skipped, 0
            return Taken(pa.Table.from_pylist(rows, schema=COPY_SCHEMA), skipped=skipped)

    def _take_stopped(self, ranges: BatchRanges, stopping: Callable[[], bool]) -> Taken:
        """A batch of a stopping mirror: the lanes' acknowledged copies of its ranges, and the rest for the
        batch to copy itself (drkit.core.continuous.split_stopped). Lanes no batch takes past stay empty."""
        self._apply(LaneRequest(NO_CHANGES, flush=True), stopping)
        rows: list[dict[str, Any]] = []
        rest: dict[Partition, tuple[int, int]] = {}
        try:
            for key, (since, until) in sorted(ranges.items()):
                lane = self.loop.lanes.get(key)
                if lane is not None and lane.failure is not None:
                    self.loop.forget(key)  # its copies are orphans: the batch copies the range itself
                    lane = None
                base, at = (None, -1) if lane is None else (lane.base, lane.frontier())
                split = split_stopped(base, at, since, until)
                if lane is not None and split.taken_below is None:
                    self.loop.forget(key)
                elif lane is not None and split.taken_below is not None:
                    rows.extend(self._cut(key, split.taken_below))
                    if split.rest is not None:  # the batch copies the rest: the lane holds nothing now
                        lane.base = lane.reached = until
                if split.rest is not None:
                    rest[key] = split.rest
        except DeliveryFailed as exc:
            self._apply(LaneRequest(NO_CHANGES, drop_all=True), stopping)
            return Taken(None, TakeFailure.LANE_FAILED, str(exc))
        skipped, self.loop.skipped = self.loop.skipped, 0
        return Taken(pa.Table.from_pylist(rows, schema=COPY_SCHEMA), skipped=skipped, rest=rest)

    def stop_reading(self) -> None:
        """The mirror is stopping: read no more, so that the next batches take every copy made (none is left
        an orphan) and copy what the copier did not read themselves."""
        with self.loop.cond:
            self.loop.stopped_reading = True
            self.loop.cond.notify_all()

    def _apply(self, request: LaneRequest, stopping: Callable[[], bool]) -> None:
        """Have the copying thread apply ``request``, and wait until it did (lock held)."""
        self.loop.request = request
        self.loop.cond.notify_all()
        checked = time.monotonic()
        while self.loop.request is not None:
            self.loop.cond.wait(0.05)
            if time.monotonic() - checked >= STOP_CHECK_SECONDS:
                checked = time.monotonic()
                self._check_stopping(stopping)
                self.loop.ensure_thread()

    def _check_stopping(self, stopping: Callable[[], bool]) -> None:
        self.loop.cond.release()  # ``stopping`` may call into the JVM: never while the copier waits for the lock
        try:
            stop = stopping()
        finally:
            self.loop.cond.acquire()
        if stop:
            raise BatchAbandoned(f"{ABANDONED_MARKER}the mirror is stopping")

    def _wait(self, ranges: BatchRanges, stopping: Callable[[], bool]) -> tuple[TakeFailure, str] | None:
        """Until every planned lane is covered (drkit.core.continuous.covered), a lane failed, or none moved
        for ``stall_seconds``; the batch is given up when the mirror stops (lock held)."""
        progress = {key: self.loop.lanes[key].frontier() if key in self.loop.lanes else -1 for key in ranges}
        moved = checked = time.monotonic()
        patience = target_patience(self.loop.conf or {}, self.stall_seconds)
        silent_since: float | None = None  # when the wait on the target was logged
        while True:
            waiting = False
            for key, (since, until) in ranges.items():
                lane = self.loop.lanes.get(key)
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
                    self.loop.target_alias,
                    now - silent_since,
                )
                silent_since = None
            if not waiting or self.loop.stopped_reading:
                return None
            if now - moved > self.stall_seconds:
                behind = sorted(
                    k for k, (s, u) in ranges.items() if not covered(self.loop.lanes[k].base, progress[k], s, u)
                )
                in_flight = sum(self.loop.lanes[k].in_flight() for k in behind)
                held_back = len(self.loop.unproduced)  # the producer's queue is full, or the lease lapsed
                if (in_flight or held_back) and self.loop.fatal is None and now - moved <= patience:
                    if silent_since is None:
                        silent_since = moved
                        log.warning(
                            "flow %s: the target %s has not acknowledged %d copies for %.0fs (%d more records "
                            "read wait for room in the producer or for the lease): waiting for them (the producer "
                            "retries each until its message.timeout.ms; a retry is never a second copy)",
                            self.flow,
                            self.loop.target_alias,
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
            self.loop.cond.wait(0.05)

    def _cut(self, key: Partition, until: int) -> list[dict[str, Any]]:
        return cut(key, self.loop.lanes[key], until)

    def close(self) -> None:
        """Stop copying; what no batch took is orphaned on the target."""
        self.loop.shutdown()

    def held(self) -> int:
        """Copies produced and not yet taken by a batch (acknowledged or in flight)."""
        with self.loop.cond:
            return sum(lane.held() for lane in self.loop.lanes.values())
