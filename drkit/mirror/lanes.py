"""The continuous copier's lanes: per source partition, the copies made and not yet taken by a batch.

Invariant: a lane's ``ups`` (upstream offsets, in produce order) pair by position with its ``reported``
(downstream offsets, in report order); a batch takes a covered prefix of them (``cut``), folded into sync
ranges as every copy path folds its copies (drkit.mirror.copied), and the lane's base moves past it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from drkit.core.batch import Partition
from drkit.core.continuous import LaneChanges, TakeFailure, frontier
from drkit.core.copying import CopySite
from drkit.core.offsets import BatchRanges
from drkit.core.origin import ORIGIN_HEADER, has_been_on
from drkit.mirror.copied import fold_ranges
from drkit.mirror.producers import describe
from drkit.mirror.reader import TRANSIENT_CODES

#: A batch whose planned partitions made no progress for this long copies its own records instead, unless
#: the copier waits on the target for copies it produced (:func:`target_patience`).
STALL_SECONDS = 5.0

#: librdkafka's ``message.timeout.ms`` when a flow does not set it.
LIBRDKAFKA_MESSAGE_TIMEOUT_MS = 300_000


def target_patience(producer_conf: Mapping[str, Any], stall_seconds: float) -> float:
    """How long a batch waits for copies the target has not acknowledged: the producer retries each (with its
    sequence numbers, so a retry is never a second copy) until its ``message.timeout.ms`` and then reports it
    failed, so the wait ends by itself; the stall time on top is the backstop of a report that never comes.
    Giving up sooner would leave those copies to land later as orphans while the batch copies them again."""
    timeout_ms = int(producer_conf.get("message.timeout.ms", LIBRDKAFKA_MESSAGE_TIMEOUT_MS))
    return timeout_ms / 1000 + stall_seconds


#: The copier stops reading while this many acknowledged or in-flight copies wait for a batch to take them
#: (memory: about 40 bytes each), or twice ``max_offsets_per_trigger`` when the flow sets one: that setting
#: keeps its meaning, the most a batch (so a trigger interval) moves the mirror on, and it bounds what a crash
#: makes the restart copy again. The limit is checked before each read of up to ``CHUNK`` records, so the copies
#: held can pass it by one read, and by one more per lane a batch still waits for (those lanes are not paused).
AHEAD_MAX_RECORDS = 1_000_000


def ahead_limit(max_offsets_per_trigger: int | None) -> int:
    """How many copies the copier may hold ahead of the batches."""
    if max_offsets_per_trigger is None:
        return AHEAD_MAX_RECORDS
    return min(AHEAD_MAX_RECORDS, 2 * max_offsets_per_trigger)


#: How long one read waits for records. librdkafka returns a read when its chunk is full or this time is
#: up, and a steady flow seldom fills a chunk: every record would wait up to this long (the reader's 10 ms
#: was 5 ms of the p50). An idle copier loops at this pace, which costs little.
READ_WAIT_SECONDS = 0.002

#: How long changing the lanes waits for the copies in flight (their reports pair with the old lanes).
FLUSH_SECONDS = 10.0


class Lane:
    """One source partition's copies since ``base``, the first offset no batch took yet."""

    __slots__ = (
        "base",
        "committed",
        "failure",
        "nbytes",
        "on_delivery",
        "reached",
        "reported",
        "stamps",
        "target",
        "ups",
        "wanted",
    )

    def __init__(self, base: int, target: str, transactional: bool = False) -> None:
        self.base = base
        self.target = target
        #: the consumer's position: one past the last record read, or where it reported the partition's end
        self.reached = base
        self.ups: list[int] = []  # upstream offsets produced, in order
        self.nbytes: list[int] = []  # their keys' and values' bytes
        self.stamps: list[int] = []  # their source timestamps
        self.reported: list[int] = []  # downstream offsets, in report order (-1: refused)
        self.failure: str | None = None
        #: the end a batch waits for: the lane reads up to it whatever the copier holds
        self.wanted = base
        #: exactly-once: how many of ``ups`` are in committed transactions (a batch takes only those); None
        #: when the copies are not transactional (a copy counts once acknowledged)
        self.committed: int | None = 0 if transactional else None
        #: each copy's report comes back to the lane that produced it, never to another lane of the same
        #: target partition made after this one was dropped: the producer outlives lanes (made once: no
        #: bound method per record)
        self.on_delivery = self._report

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.reported.append(-1)
            self.failure = self.failure or (
                f"a record could not be delivered to {msg.topic()}/{msg.partition()}: {describe(err)}"
            )
            return
        self.reported.append(msg.offset())

    def in_flight(self) -> int:
        """Copies produced that do not count yet: not acknowledged, or not committed."""
        return len(self.ups) - self.done()

    def done(self) -> int:
        """How many of the lane's copies count: acknowledged, and committed when transactional."""
        acked = len(self.reported)
        return acked if self.committed is None else min(acked, self.committed)

    def frontier(self) -> int:
        done = self.done()
        return frontier(self.reached, self.ups[done] if done < len(self.ups) else None)

    def seed(self, found: Sequence[tuple[int, int]]) -> None:
        """Start an exactly-once lane after the committed copies an earlier writer left on the target past the
        last sync (read back: drkit.core.exactly_once.resume), kept as this lane's own."""
        self.ups = [u for u, _ in found]
        self.reported = [d for _, d in found]
        self.nbytes = [0] * len(found)  # unknown: as for the copies a batch reads back
        self.stamps = [0] * len(found)
        self.committed = len(found)
        if found:
            self.reached = found[-1][0] + 1

    def held(self) -> int:
        return len(self.ups)


@dataclass(frozen=True)
class Taken:
    """A batch's copies from the copier: the rows of :data:`drkit.mirror.copied.COPY_SCHEMA`, or why not."""

    rows: pa.Table | None
    failure: TakeFailure | None = None
    reason: str = ""
    skipped: int = 0  # records not copied because they came from the target (their origin header)
    #: what the batch copies itself, after the copier stopped reading (the mirror is stopping)
    rest: BatchRanges = field(default_factory=dict)
    #: where the copies were made, when not in this process (a cluster's copy tasks: drkit.mirror.copier_tasks)
    sites: tuple[CopySite, ...] = ()


@dataclass(frozen=True)
class LaneRequest:
    """Lane changes for the copying thread to apply between two reads."""

    changes: LaneChanges
    drop_all: bool = False  # everything held is dropped (orphans), the producer too
    new_producer: bool = False  # its settings changed: the copies in flight are waited for, the lanes kept
    flush: bool = False  # wait for every copy in flight (a stopping mirror's last batches)


NO_CHANGES = LaneChanges({}, frozenset())


def cut(key: Partition, lane: Lane, until: int) -> list[dict[str, Any]]:
    """The rows of a covered lane's copies below ``until``, taken out of it: its base moves to ``until``."""
    n = bisect.bisect_left(lane.ups, until, 0, lane.done())
    rows = fold_ranges(
        key[0],
        lane.target,
        key[1],
        lane.ups[:n],
        lane.reported[:n],
        sum(lane.nbytes[:n]),
        max(lane.stamps[:n], default=0),
    )
    del lane.ups[:n], lane.reported[:n], lane.nbytes[:n], lane.stamps[:n]
    if lane.committed is not None:
        lane.committed -= n
    lane.base = until
    return rows


def copy_messages(
    messages: list[Any],
    lanes: Mapping[Partition, Lane],
    producer_of: Callable[[Partition, Lane], Any],
    origin: bytes,
    back_to: str,
    marks: list[tuple[str, bytes]] | None = None,
) -> tuple[int, list[Any]]:
    """Produce the records read for the lanes, each as it came, and note them in its lane; how many were
    skipped (they came from the target: their origin header names it), and the records not produced, in read
    order, for the caller to produce first once there is room: those of lanes whose producer cannot take
    records now (``producer_of`` returns None: their slot's transaction is being committed; the other lanes'
    records go on), and from the first record the producer's queue had no room for (a target that does not
    acknowledge), every record after it. A partition's records are never produced out of order: a lane held
    back stays held back for the rest of the call. A full queue is back-pressure, never a failure: the producer
    keeps its copies and their sequence numbers, and retries them. A lane that fails stops copying.
    ``marks``: headers every copy carries after its origin (the lease's epoch)."""
    from confluent_kafka import KafkaError

    skipped = 0
    held: list[Any] = []
    stopped: set[Partition] = set()
    extra = marks or []
    for n, msg in enumerate(messages):
        key = (msg.topic(), msg.partition())
        lane = lanes.get(key)
        if lane is None or lane.failure is not None:
            continue
        if stopped and key in stopped:  # behind a record held back: so is everything after it, its end too
            held.append(msg)
            continue
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                lane.reached = max(lane.reached, msg.offset())
            elif err.fatal() or (not err.retriable() and err.code() not in TRANSIENT_CODES):
                lane.failure = f"{key[0]}/{key[1]}: {err.name()}: {err.str()}"
            continue
        offset = msg.offset()
        if offset < lane.reached:  # fetched again after an assignment
            continue
        headers = msg.headers()
        if headers and back_to and has_been_on(headers, back_to):
            lane.reached = offset + 1
            skipped += 1
            continue
        producer = producer_of(key, lane)
        if producer is None:
            stopped.add(key)
            held.append(msg)
            continue
        value, k = msg.value(), msg.key()
        stamp = msg.timestamp()[1]
        mark = (ORIGIN_HEADER, origin + b"%d" % offset)
        try:
            producer.produce(
                lane.target,
                value,
                k,
                key[1],
                lane.on_delivery,
                timestamp=stamp,
                headers=[*headers, mark, *extra] if headers else [mark, *extra],
            )
        except BufferError:  # the producer's queue is full: this record and the rest wait for room
            producer.poll(0)
            return skipped, held + messages[n:]
        except Exception as exc:
            lane.failure = f"record {key[0]}/{key[1]}@{offset} could not be produced: {describe(exc)}"
            continue
        lane.reached = offset + 1
        lane.ups.append(offset)
        lane.nbytes.append((len(value) if value is not None else 0) + (len(k) if k is not None else 0))
        lane.stamps.append(stamp)
        if not n % 32:
            producer.poll(0)
    return skipped, held
