"""The driver's reader: one micro-batch's exact offset ranges, read with a librdkafka consumer.

Spark plans every micro-batch before running it: the Kafka source's end offsets of batch ``b`` are in
``offsets/<b>`` of the query's checkpoint, its start offsets in ``offsets/<b-1>`` (or, for the first
batch, in the initial offsets under ``sources/0``). Reading ``[since, until)`` of each partition with a
consumer of our own gives the very records Spark's Kafka source would hand the batch: the same
isolation level (MirrorJob sets both), and a hole left by compaction, a transaction marker or an
aborted record is skipped by both. What it saves is the Spark job of the read (a plan, a JVM
consumer, a hand-off to Python), which was most of a steady-state batch's time.

A partition is read to its end when a record at or past ``until - 1`` arrives, or when the consumer
reports the end of the partition (its high watermark, or in read_committed its last stable offset:
it was at or past ``until`` when Spark planned the batch, so no record below ``until`` can follow).
Records at or past ``until`` belong to the next batch and are not handed on. The read returns where
each partition's consumer position ended: an end reported below ``until`` means the source lost records
after Spark planned the batch, which the job refuses to commit as copied (drkit.core.batch.short_reads).

The same reader runs in the driver (a small batch in local mode) and in each Spark copy task
(drkit.mirror.executor): one reader, one set of rules. Records removed by retention before they were
read end the read with :class:`RecordsRemoved`, unless the flow accepts the loss
(``skip_removed``, drkit.core.copying.read_failure_action): then the partition goes on from its first
record still on the source, and the offsets skipped are returned. Anything else the reader cannot settle
(a topic that vanished, a fatal client error) ends with :class:`ReadFailed`. A source that stops
answering ends with :class:`SourceStalled` after the consumer's API timeout.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drkit.core.offsets import BatchRanges
from drkit.mirror.chunk import Headers, RecordChunk, Sink

#: Records taken from the consumer at a time (the copy's chunk; librdkafka prefetches the next ones),
#: fewer when they are large: a chunk holds about ``CHUNK_BYTES`` at the last chunk's record size.
CHUNK = 5_000
CHUNK_BYTES = 16 * 1024 * 1024

#: How often a read asks whether the mirror is stopping (a call into the JVM: not per chunk).
STOP_CHECK_SECONDS = 0.25

#: How long one ``consume`` call waits. librdkafka returns a call only when its chunk is full or this time
#: is up, and a batch's last chunk is seldom full: the wait is a floor under every read (0.1 s made a
#: read of a few records take 0.1 s), so it is short; the stall timeout still bounds a silent source.
POLL_SECONDS = 0.01

#: How long a read waits for the metadata of topics its consumer never read (see ``BatchReader._learn``).
METADATA_SECONDS = 5.0

#: Marker of a batch given up on request (``MirrorRunner`` stopping after its grace): not a failure.
ABANDONED_MARKER = "DRKIT-BATCH-ABANDONED: "


class ReadFailed(Exception):
    """The reader cannot read this batch exactly (a permanent client error): the batch fails."""


class RecordsRemoved(ReadFailed):
    """Records of the planned range are no longer on the source (retention, delete-records)."""


class SourceStalled(Exception):
    """No record and no end of partition from the source within the timeout."""


class BatchAbandoned(Exception):
    """The mirror is stopping and stopped waiting for this batch (copied again after a restart)."""


@dataclass(frozen=True)
class ReadResult:
    """What one read did: the records handed on, and each partition's consumer position when its read
    ended (one past the last record seen, or where the consumer reported the end of the partition)."""

    records: int
    reached: Mapping[tuple[str, int], int]
    #: partitions whose removed records were skipped (``skip_removed``): the offsets ``[from, to)`` lost
    removed: Mapping[tuple[str, int], tuple[int, int]] = field(default_factory=dict)


class _Partition:
    __slots__ = ("headers", "keys", "offsets", "stamps", "values")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.stamps: list[int] = []
        self.headers: list[Headers] = []


class BatchReader:
    """A long-lived source consumer of the mirror's driver; ``read`` one batch at a time."""

    def __init__(self, new_consumer: Callable[[], Any], stall_seconds: float, skip_removed: bool = False) -> None:
        self._new_consumer = new_consumer
        self.skip_removed = skip_removed
        self._consumer: Any = None
        self._lock = threading.Lock()  # a read and a close never overlap
        self.stall_seconds = stall_seconds
        self._known: set[str] = set()  # topics whose metadata the consumer holds

    def connect(self, topics: Iterable[str] = ()) -> None:
        """Make the consumer now (it connects to the source in the background), not at the first read,
        and fetch the metadata of ``topics``."""
        with self._lock:
            if self._consumer is None:
                self._consumer = self._new_consumer()
            self._learn(self._consumer, set(topics))

    def _learn(self, consumer: Any, topics: set[str]) -> None:
        """Make sure the consumer holds the metadata of ``topics`` before they are assigned. Assigned a topic
        it does not know, librdkafka asks for its metadata and starts fetching only when its next metadata
        refresh came back: about 0.5 s on a local cluster, paid by every copy task whose partitions changed
        topics. One request beforehand (the one topic, or all) makes the fetch start at once. Best effort: a
        source that does not answer is reported by the read itself."""
        new = topics - self._known
        if not new:
            return
        try:
            timeout = min(METADATA_SECONDS, self.stall_seconds)
            if len(new) == 1:
                consumer.list_topics(next(iter(new)), timeout=timeout)
            else:
                consumer.list_topics(timeout=timeout)
        except Exception:
            return
        self._known |= new

    def close(self, timeout: float = 1.0) -> None:
        """Close the consumer, unless a read still holds it after ``timeout`` (an abandoned batch)."""
        if not self._lock.acquire(timeout=timeout):
            return
        try:
            self._close()
        finally:
            self._lock.release()

    def _close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            self._known = set()
            with contextlib.suppress(Exception):  # a consumer of a dead source: nothing to hand back
                consumer.close()

    def read(self, ranges: BatchRanges, sink: Sink, stopping: Callable[[], bool] | None = None) -> ReadResult:
        """Hand every record of ``ranges`` to ``sink``, per partition in offset order; what was read.

        ``stopping`` is asked every ``STOP_CHECK_SECONDS``: once it says yes, the read is given up
        (``BatchAbandoned``). Stopping a streaming query does not interrupt Python code in its batch, so
        without it a read of a dead source would hold the query until the stall timeout."""
        if not ranges:
            return ReadResult(0, {})
        with self._lock:
            return self._read(ranges, sink, stopping)

    def _read(self, ranges: BatchRanges, sink: Sink, stopping: Callable[[], bool] | None) -> ReadResult:
        from confluent_kafka import KafkaError, TopicPartition

        if self._consumer is None:
            self._consumer = self._new_consumer()
        consumer = self._consumer
        self._learn(consumer, {topic for topic, _ in ranges})
        consumer.assign([TopicPartition(t, p, since) for (t, p), (since, _) in ranges.items()])
        pending = {key: until for key, (_, until) in ranges.items()}
        reached: dict[tuple[str, int], int] = {}
        removed: dict[tuple[str, int], tuple[int, int]] = {}
        read = 0
        take = CHUNK
        last_progress = checked = time.monotonic()
        try:
            while pending:
                if stopping is not None and time.monotonic() - checked >= STOP_CHECK_SECONDS:
                    checked = time.monotonic()
                    if stopping():
                        raise BatchAbandoned(f"{ABANDONED_MARKER}the mirror is stopping")
                messages = consumer.consume(take, POLL_SECONDS)
                if not messages:
                    if time.monotonic() - last_progress > self.stall_seconds:
                        raise SourceStalled(
                            f"no record of {len(pending)} partition(s) arrived within {self.stall_seconds:.0f}s"
                        )
                    continue
                last_progress = time.monotonic()
                chunk: dict[tuple[str, int], _Partition] = {}
                size = 0
                for msg in messages:
                    err = msg.error()
                    key = (msg.topic(), msg.partition())
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            if pending.pop(key, None) is not None:
                                reached[key] = max(reached.get(key, 0), msg.offset())
                            continue
                        if err.code() == KafkaError._AUTO_OFFSET_RESET:  # auto.offset.reset=error: gone
                            if not self.skip_removed or key not in pending:
                                raise RecordsRemoved(f"{key[0]}/{key[1]}: {err.str()}")
                            self._skip_removed(consumer, key, reached.get(key, max(ranges[key][0], 0)), removed)
                            if removed[key][1] >= pending[key]:  # nothing of the range is left
                                reached[key] = removed[key][1]
                                pending.pop(key)
                            # librdkafka stops a partition after an offset reset error (a seek is refused):
                            # the partitions left are assigned again, each where its read stands.
                            consumer.assign(
                                [
                                    TopicPartition(
                                        t, p, removed[(t, p)][1] if (t, p) == key else reached.get((t, p), since)
                                    )
                                    for (t, p), (since, _) in ranges.items()
                                    if (t, p) in pending
                                ]
                            )
                            continue
                        if err.fatal() or (not err.retriable() and err.code() not in TRANSIENT_CODES):
                            raise ReadFailed(f"{key[0]}/{key[1]}: {err.name()}: {err.str()}")
                        continue
                    until = pending.get(key)
                    offset = msg.offset()
                    if until is None or offset < reached.get(key, 0):  # gone, or fetched again after a seek
                        continue
                    reached[key] = offset + 1
                    if offset >= until:
                        pending.pop(key, None)
                        continue
                    part = chunk.get(key)
                    if part is None:
                        part = chunk[key] = _Partition()
                    value = msg.value()
                    size += len(value) if value is not None else 0
                    part.offsets.append(offset)
                    part.keys.append(msg.key())
                    part.values.append(value)
                    part.stamps.append(msg.timestamp()[1])
                    part.headers.append(msg.headers())
                    if offset >= until - 1:
                        pending.pop(key, None)
                take = max(1, min(CHUNK, CHUNK_BYTES * len(messages) // max(1, size)))
                for (topic, partition), part in chunk.items():
                    sink(
                        RecordChunk(
                            topic,
                            partition,
                            part.offsets,
                            part.keys,
                            part.values,
                            part.stamps,
                            part.headers if any(h is not None for h in part.headers) else None,
                        )
                    )
                    read += len(part.offsets)
        finally:
            # Stop fetching between batches: what is prefetched past this batch would be read again anyway.
            try:
                consumer.unassign()
            except Exception:
                self._close()
        return ReadResult(read, reached, removed)

    def _skip_removed(
        self, consumer: Any, key: tuple[str, int], position: int, removed: dict[tuple[str, int], tuple[int, int]]
    ) -> None:
        """Where the partition goes on: its first record still on the source; remember the offsets skipped."""
        from confluent_kafka import TopicPartition

        low, _ = consumer.get_watermark_offsets(TopicPartition(*key), timeout=self.stall_seconds)
        first = removed.get(key, (position, position))[0]
        removed[key] = (first, max(low, position))


def _transient_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset(
        {
            KafkaError._TRANSPORT,
            KafkaError._ALL_BROKERS_DOWN,
            KafkaError._TIMED_OUT,
            KafkaError._RESOLVE,
            KafkaError.NOT_LEADER_FOR_PARTITION,
            KafkaError.LEADER_NOT_AVAILABLE,
            KafkaError.REQUEST_TIMED_OUT,
        }
    )


#: Client errors that are waited out (the stall timeout bounds them), not handed to Spark.
TRANSIENT_CODES = _transient_codes()
