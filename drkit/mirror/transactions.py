"""Exactly-once copies at the edge: transactional producers per slot, fenced before the target is read back.

The rules are drkit.core.exactly_once's: every copy of a source partition goes through the transactional id
of the partition's slot; a producer is initialised (fencing every older producer of its id, aborting its
open transaction) before it reads back the partition's committed copies past the last sync; those copies
are kept as the batch's own (:func:`drkit.core.exactly_once.resume`) and the copy goes on after them; a
partition's copies in a batch are one transaction, committed before the driver records the syncs.

Two places copy: the driver, which keeps one producer per slot between batches (:class:`SlotProducers`,
with the partitions each has read back since it was initialised), and a copy task, which makes a fresh
producer for its slot each time (Spark moves tasks between Python workers: a producer kept in a worker
could have been fenced by another worker's, and a fenced producer must mean another mirror).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from drkit.core.exactly_once import Partition, Resume, resume, slot_of, transactional_id
from drkit.core.offsets import BatchRanges
from drkit.kafka.tail import read_copies
from drkit.mirror.chunk import RecordChunk
from drkit.mirror.copied import COPY_SCHEMA, fold_ranges
from drkit.mirror.deliver import Copier
from drkit.mirror.lease import LeaseStamp
from drkit.mirror.producers import FAILURE_MARKER, DeliveryFailed, begin_transactions, describe, new_producer

#: How long reading back a batch's partitions may take.
READ_BACK_SECONDS = 60.0


def read_back(
    consumer: Any,
    ranges: BatchRanges,
    tail_from: Mapping[Partition, int],
    topic_map: Mapping[str, str],
    source_alias: str,
    target_alias: str,
) -> tuple[Resume, pa.Table]:
    """The committed copies of ``ranges`` already on the target past each partition's last sync
    (``tail_from``: the target offset after it; 0 when none): what is left to copy, and the found copies
    as :data:`COPY_SCHEMA` rows. To be called only after the partitions' producers were initialised."""
    wanted = {
        (topic_map[topic], partition): (tail_from.get((topic, partition), 0), until - 1)
        for (topic, partition), (_, until) in ranges.items()
    }
    read, cut = read_copies(consumer, target_alias, wanted, source_alias, READ_BACK_SECONDS)
    tails = {(topic, partition): read[(topic_map[topic], partition)] for topic, partition in ranges}
    found = resume(ranges, tails)
    # A read that ended at the range's last copy did not see what follows it: read again before the next batch.
    cut_short = {(topic, partition) for topic, partition in ranges if (topic_map[topic], partition) in cut}
    if cut_short - found.again:
        found = Resume(found.ranges, found.found, found.again | cut_short)
    rows: list[dict[str, Any]] = []
    for (topic, partition), kept in sorted(found.found.items()):
        ups, downs = [u for u, _ in kept], [d for _, d in kept]
        rows.extend(fold_ranges(topic, topic_map[topic], partition, ups, downs, 0, 0))
    return found, pa.Table.from_pylist(rows, schema=COPY_SCHEMA)


def slot_conf(producer_conf: Mapping[str, Any], flow: str, slot: int) -> dict[str, Any]:
    """The producer settings of one slot: the flow's, with the slot's transactional id. A transaction may stay
    open as long as a record may wait for its acknowledgement (librdkafka requires it): a batch held up by an
    outage is aborted by the broker only after its records gave up."""
    message = int(producer_conf.get("message.timeout.ms", 300_000))
    txn = int(producer_conf.get("transaction.timeout.ms", max(60_000, message)))
    return {
        **producer_conf,
        "transactional.id": transactional_id(flow, slot),
        "transaction.timeout.ms": txn,
        "message.timeout.ms": min(message, txn),
    }


def make_transactional(make: Callable[[dict[str, Any], str], Any], conf: dict[str, Any], alias: str) -> Any:
    """A transactional producer of ``conf``, initialised: older producers of its id are fenced now."""
    from confluent_kafka import KafkaException

    try:
        producer = make(conf, alias)
    except KafkaException as exc:
        raise DeliveryFailed(
            f"{FAILURE_MARKER}cluster {alias}: the transactional producer cannot be made: {describe(exc.args[0])}"
        ) from None
    begin_transactions(producer, conf["transactional.id"], alias)
    return producer


class SlotProducers:
    """The driver's transactional producers of one flow: one per slot, initialised on first use (or all at
    once by ``fence_all``), each with the partitions it has read back since. Made again when the flow's
    producer settings change; forgotten (``drop``) after a failure, or after copy tasks used the same ids."""

    def __init__(
        self,
        flow: str,
        slots: int,
        target_alias: str,
        make: Callable[[dict[str, Any], str], Any] = new_producer,
        lease: LeaseStamp | None = None,
    ) -> None:
        self.flow = flow
        self.slots = slots
        self._alias = target_alias
        self._make = make
        self._lease = lease
        self._producers: dict[int, tuple[str, Any, set[Partition]]] = {}

    def producer(self, slot: int, producer_conf: Mapping[str, Any]) -> tuple[Any, set[Partition]]:
        """The slot's initialised producer and the partitions it has read back."""
        key = json.dumps(dict(producer_conf), sort_keys=True, default=str)
        held = self._producers.get(slot)
        if held is not None and held[0] == key:
            return held[1], held[2]
        self._producers.pop(slot, None)
        conf = slot_conf(producer_conf, self.flow, slot)
        producer = make_transactional(self._make, conf, self._alias)
        self._producers[slot] = (key, producer, set())
        return producer, self._producers[slot][2]

    def fence_all(self, producer_conf: Mapping[str, Any]) -> None:
        """Initialise every slot's producer: every older writer of the flow (a previous process, another
        mirror of the flow) is fenced now, not at this mirror's first copy of each slot."""
        for slot in range(self.slots):
            self.producer(slot, producer_conf)

    def unread(self, ranges: BatchRanges, producer_conf: Mapping[str, Any]) -> BatchRanges:
        """The partitions of ``ranges`` whose producer (initialised here, first) has not read them back."""
        out: BatchRanges = {}
        for key, span in ranges.items():
            _, seen = self.producer(slot_of(key[0], key[1], self.slots), producer_conf)
            if key not in seen:
                out[key] = span
        return out

    def mark_read(self, found: Resume, read: BatchRanges) -> None:
        """Partitions read back, except those whose copies reached past the batch (read again next time)."""
        for key in read:
            if key in found.again:
                continue
            held = self._producers.get(slot_of(key[0], key[1], self.slots))
            if held is not None:
                held[2].add(key)

    def mark_unread(self, keys: Iterable[Partition]) -> None:
        """Partitions to read back before they are copied again: committed copies of them past the last sync
        may be on the target that no batch recorded (the continuous copier dropped their lanes)."""
        for key in keys:
            held = self._producers.get(slot_of(key[0], key[1], self.slots))
            if held is not None:
                held[2].discard(key)

    def copier(
        self, ranges: BatchRanges, producer_conf: Mapping[str, Any], topic_map: dict[str, str], source_alias: str
    ) -> SlotCopier:
        slots = {slot_of(t, p, self.slots) for t, p in ranges}
        copiers = {
            slot: Copier(
                slot_conf(producer_conf, self.flow, slot),
                topic_map,
                source_alias,
                self._alias,
                producer=self.producer(slot, producer_conf)[0],
                epoch=0 if self._lease is None else self._lease.epoch,
                gate=None if self._lease is None else self._lease.refusal,
            )
            for slot in sorted(slots)
        }
        return SlotCopier(copiers, self.slots)

    def drop(self) -> None:
        """Forget every producer (the next use initialises again, and reads back again)."""
        self._producers.clear()


class SlotCopier:
    """One batch's copy in the driver: a transactional ``Copier`` per slot, fed by the same reader; the
    batch's ranges once every slot's transaction committed."""

    def __init__(self, copiers: dict[int, Copier], slots: int) -> None:
        self._copiers = copiers
        self._slots = slots

    @property
    def skipped(self) -> int:
        return sum(c.skipped for c in self._copiers.values())

    def copy(self, chunk: RecordChunk) -> None:
        self._copiers[slot_of(chunk.topic, chunk.partition, self._slots)].copy(chunk)

    def finish(self, before_commit: Callable[[], None] | None = None) -> pa.Table:
        """Commit each slot's transaction; the first failure aborts the slots not yet committed and raises
        (the committed ones are read back when the batch is copied again)."""
        tables: list[pa.Table] = []
        pending = list(self._copiers.values())
        try:
            while pending:
                tables.append(pending[0].finish(before_commit=before_commit))
                pending.pop(0)
        except BaseException:
            for copier in pending:  # the one that failed, and those not committed yet
                copier.abort()
            raise
        return pa.concat_tables(tables) if tables else COPY_SCHEMA.empty_table()

    def abort(self) -> None:
        for copier in self._copiers.values():
            copier.abort()
