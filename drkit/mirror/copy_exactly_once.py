"""Exactly-once: every batch copies its own records, each partition's copies in one Kafka transaction of its
slot's transactional id (drkit.core.exactly_once, drkit.mirror.transactions), committed before the syncs.

A producer is initialised (fencing older writers) before it reads back the committed copies past the last
sync, which the batch keeps instead of copying them again. Invariant: any failure forgets every driver
producer, so the retry fences and reads back again (a slot committed before another failed is found, not
copied twice); copy tasks use the same ids, so the driver's producers are forgotten before a copy job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from drkit.config import FlowConfig
from drkit.core.batch import MirrorState, Partition
from drkit.core.copying import CopyPlace
from drkit.core.exactly_once import slot_groups
from drkit.core.offsets import BatchRanges
from drkit.errors import ClusterError
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.copy_path import CopyRequest, PlaceCopy, PlacedCopy, ProducerConf
from drkit.mirror.failure import source_unreachable
from drkit.mirror.ports import MirrorSyncLog
from drkit.mirror.producers import DeliveryFailed
from drkit.mirror.reader import BatchReader, SourceStalled
from drkit.mirror.report import BatchReport
from drkit.mirror.settle import ReadSettler, driver_site
from drkit.mirror.transactions import SlotProducers, read_back

log = logging.getLogger(__name__)


class SyncedTails:
    """Per source partition, the target offset after its last sync (where reading back starts): from the syncs
    once, then from each batch."""

    def __init__(self, flow: str, syncs: MirrorSyncLog) -> None:
        self.flow, self._syncs = flow, syncs
        self._next: dict[Partition, int] | None = None

    def __call__(self) -> dict[Partition, int]:
        if self._next is None:
            progress = self._syncs.progress(self.flow)
            self._next = {key: p.last_downstream + 1 for key, p in progress.items()}
        return self._next

    def note(self, copied: pa.Table) -> None:
        if self._next is None or not copied.num_rows:
            return
        for r in copied.select(["source_topic", "partition", "downstream_last"]).to_pylist():
            key = (r["source_topic"], r["partition"])
            self._next[key] = max(self._next.get(key, 0), r["downstream_last"] + 1)


def slot_task_groups(producers: SlotProducers) -> Callable[[BatchRanges], tuple[BatchRanges, ...]]:
    """One copy task per slot (its transactional id); the tasks' producers fence the driver's, forgotten now."""

    def groups(ranges: BatchRanges) -> tuple[BatchRanges, ...]:
        out = tuple(g for _, g in slot_groups(ranges, producers.slots))
        producers.drop()
        return out

    return groups


class TransactionalDriverCopy:
    """Exactly-once in the driver: each slot's producer (initialised first) reads back the partitions it has
    not read since, the batch keeps the committed copies found and copies the rest, one transaction per slot,
    committed before the syncs."""

    def __init__(
        self,
        flow: FlowConfig,
        source_servers: str,
        reader: BatchReader,
        producers: SlotProducers,
        tails: SyncedTails,
        tail_consumer: Callable[[], Any],
        settle: ReadSettler,
        stopping: Callable[[], bool],
        before_commit: Callable[[int], None],
    ) -> None:
        self.flow, self._servers, self.reader, self.producers, self._tails = (
            flow,
            source_servers,
            reader,
            producers,
            tails,
        )
        self._tail_consumer, self._settle, self._stopping, self._before_commit = (
            tail_consumer,
            settle,
            stopping,
            before_commit,
        )

    def copy(self, request: CopyRequest, state: MirrorState, report: BatchReport) -> tuple[pa.Table, MirrorState]:
        ranges, producer_conf, topic_map = request.ranges, request.producer_conf, request.topic_map
        producers = self.producers
        try:
            unread = producers.unread(ranges, producer_conf)
            found_rows = COPY_SCHEMA.empty_table()
            left = ranges
            if unread:
                consumer = self._tail_consumer()
                try:
                    found, found_rows = read_back(
                        consumer, unread, self._tails(), topic_map, self.flow.source, self.flow.target
                    )
                finally:
                    consumer.close()
                producers.mark_read(found, unread)
                left = {**{k: v for k, v in ranges.items() if k not in unread}, **found.ranges}
                if found.found:
                    log.info(
                        "flow %s: %d record(s) of %d partition(s) were already committed on %s past the last "
                        "sync: kept, not copied again",
                        self.flow.name,
                        sum(len(p) for p in found.found.values()),
                        len(found.found),
                        self.flow.target,
                    )
            copier = producers.copier(left, producer_conf, topic_map, self.flow.source)
            try:
                result = self.reader.read(left, copier.copy, self._stopping)
                self._settle.removed(result.removed)
                reached = {**{k: until for k, (_, until) in ranges.items() if k not in left}, **result.reached}
                state = self._settle.short_reads(ranges, reached, state)
                rows = pa.concat_tables([found_rows, copier.finish(lambda: self._before_commit(request.batch_id))])
            except BaseException:
                copier.abort()
                raise
            self._settle.skipped(copier.skipped)
        except SourceStalled as exc:
            producers.drop()
            raise ClusterError(source_unreachable(self.flow, self._servers, str(exc))) from None
        except BaseException:
            producers.drop()
            raise
        report.sites = (driver_site(ranges, rows),)
        return rows, state


class ExactlyOnceCopy(PlacedCopy):
    """Every batch in transactions, where the placement says (the driver, or one task per slot)."""

    def __init__(
        self,
        flow: FlowConfig,
        producers: SlotProducers,
        tails: SyncedTails,
        driver: PlaceCopy,
        executors: PlaceCopy,
        place: Callable[[int], CopyPlace],
        warm: Callable[[ProducerConf, dict[str, str]], None],
    ) -> None:
        super().__init__(driver, executors, place, warm)
        self.flow, self.producers, self.tails = flow, producers, tails

    def prepare(self, producer_conf: ProducerConf, topic_map: dict[str, str]) -> None:
        self._fence_writers(producer_conf)
        super().prepare(producer_conf, topic_map)

    def _fence_writers(self, producer_conf: ProducerConf) -> None:
        """Initialise every transactional id of the flow before the first batch, so an older writer (another
        mirror of the flow, a previous process's zombie) is fenced now and stops."""
        try:
            self.producers.fence_all(producer_conf())
            log.info(
                "flow %s: exactly-once: %d transactional id(s) initialised on %s; older writers are fenced",
                self.flow.name,
                self.producers.slots,
                self.flow.target,
            )
        except DeliveryFailed as exc:  # the first batch initialises what it uses, and reports what is wrong
            self.producers.drop()
            log.warning("flow %s: transactional ids not initialised at start: %s", self.flow.name, exc)

    def synced(self, copied: pa.Table) -> None:
        self.tails.note(copied)
