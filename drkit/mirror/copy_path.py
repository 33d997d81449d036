"""The copy paths: one way of copying a micro-batch's planned ranges per delivery and copy mode, chosen once.

The job asks its path for every batch's copies and never asks how they are made. Three paths
(drkit.core.copying.copy_path_kind chooses, drkit.mirror.wiring builds):

* :class:`AtLeastOnceCopy` (drkit.mirror.copy_driver, drkit.mirror.copy_executors): every batch copies its
  own records with idempotent producers, in the driver (a small batch in local mode) or in one Spark job
  of copy tasks (drkit.core.copying.copy_place decides per batch).
* :class:`ExactlyOnceCopy` (drkit.mirror.copy_exactly_once): the same two places, each partition's copies
  in one Kafka transaction of its slot, the committed copies past the last sync read back and kept.
* :class:`ContinuousCopy` (drkit.mirror.continuous): the driver copies records as they arrive (with a cluster
  master: long-lived copy tasks on the executors, drkit.mirror.copier_tasks); a batch takes the copies of its
  ranges, and copies what the copier could not give it as :class:`AtLeastOnceCopy` does.

Invariant: whatever the path, a batch's copy returns the exact ranges the target acknowledged
(drkit.mirror.copied.COPY_SCHEMA), and the mirror's state after it (partitions held where a read ended short).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from drkit.core.batch import MirrorState, Partition
from drkit.core.continuous import CopyMode
from drkit.core.copying import CopyPlace
from drkit.core.offsets import BatchRanges
from drkit.mirror.lanes import Taken
from drkit.mirror.report import BatchReport
from drkit.mirror.settle import ReadSettler, driver_site

log = logging.getLogger(__name__)

#: The producer settings of the batch running now (they follow the target topics' limits).
ProducerConf = Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class CopyRequest:
    """One attempt at a batch's copy: its ranges, with the producer settings and routes of this batch."""

    batch_id: int
    ranges: BatchRanges
    #: an upper bound of the offsets the ranges span (drkit.core.batch.BatchPlan.records)
    records: int
    producer_conf: dict[str, Any]
    topic_map: dict[str, str]


class PlaceCopy(Protocol):
    """One place a batch is copied (the driver, or a Spark job's copy tasks)."""

    def copy(self, request: CopyRequest, state: MirrorState, report: BatchReport) -> tuple[pa.Table, MirrorState]: ...


class AheadCopier(Protocol):
    """What copies records as they arrive: the driver's copier (drkit.mirror.continuous) or a cluster's copy
    tasks (drkit.mirror.copier_tasks)."""

    def start(self, producer_conf: dict[str, Any], topic_map: dict[str, str]) -> None: ...

    def take(
        self,
        ranges: BatchRanges,
        end: Mapping[Partition, int],
        topic_map: Mapping[str, str],
        producer_conf: dict[str, Any],
        stopping: Callable[[], bool],
    ) -> Taken: ...

    def stop_reading(self) -> None: ...

    def held(self) -> int: ...

    def close(self) -> None: ...


class CopyPath(Protocol):
    """How a mirror copies: what the job asks of it at its start, per batch, after a batch's syncs, at its stop."""

    #: per batch, or continuous (the job logs it)
    mode: CopyMode

    def prepare(self, producer_conf: ProducerConf, topic_map: dict[str, str]) -> None:
        """Before the first batch: the writers of the flow fenced, the copy workers warmed (as the path needs)."""
        ...

    def take(self, request: CopyRequest, end: Mapping[Partition, int], report: BatchReport) -> Taken | None:
        """The copies made ahead of the batch (continuous only), or None: the batch copies its own records."""
        ...

    def copy(self, request: CopyRequest, state: MirrorState, report: BatchReport) -> tuple[pa.Table, MirrorState]:
        """One attempt at copying ``request``'s ranges: the exact ranges acknowledged, the state after it."""
        ...

    def synced(self, copied: pa.Table) -> None:
        """The batch's syncs are durable."""
        ...

    def stop_reading(self) -> None: ...

    def holds_copies(self) -> bool: ...

    def close(self) -> None: ...


class PlacedCopy:
    """Every batch copies its own records (nothing runs ahead), on the driver or the executors as the placement
    says; what the paths of this kind share."""

    mode = CopyMode.PER_BATCH

    def __init__(
        self,
        driver: PlaceCopy,
        executors: PlaceCopy,
        place: Callable[[int], CopyPlace],
        warm: Callable[[ProducerConf, dict[str, str]], None],
    ) -> None:
        self.driver, self.executors, self.place, self._warm = driver, executors, place, warm

    def prepare(self, producer_conf: ProducerConf, topic_map: dict[str, str]) -> None:
        self._warm(producer_conf, topic_map)

    def take(self, request: CopyRequest, end: Mapping[Partition, int], report: BatchReport) -> Taken | None:
        return None

    def copy(self, request: CopyRequest, state: MirrorState, report: BatchReport) -> tuple[pa.Table, MirrorState]:
        report.in_driver = self.place(request.records) is CopyPlace.DRIVER
        place = self.driver if report.in_driver else self.executors
        return place.copy(request, state, report)

    def synced(self, copied: pa.Table) -> None:
        return None

    def stop_reading(self) -> None:
        return None

    def holds_copies(self) -> bool:
        return False

    def close(self) -> None:
        return None


class AtLeastOnceCopy(PlacedCopy):
    """Every batch copies its own records with idempotent producers, where the placement says."""


class ContinuousCopy:
    """A copier copies records as they arrive (the driver's, or a cluster's copy tasks); a batch takes the copies of
    its ranges, and copies what the copier could not give it itself, as ``own`` does."""

    mode = CopyMode.CONTINUOUS

    def __init__(
        self,
        flow: str,
        copier: AheadCopier,
        own: PlacedCopy,
        settle: ReadSettler,
        stopping: Callable[[], bool],
    ) -> None:
        self.flow, self.copier, self.own, self._settle, self._stopping = flow, copier, own, settle, stopping

    def prepare(self, producer_conf: ProducerConf, topic_map: dict[str, str]) -> None:
        self.own.prepare(producer_conf, topic_map)
        self.copier.start(producer_conf(), topic_map)

    def take(self, request: CopyRequest, end: Mapping[Partition, int], report: BatchReport) -> Taken | None:
        """The batch's copies from the copier (and, when the mirror stops, what the batch copies itself), or
        None: the batch copies its own records (the copier could not give them: drkit.mirror.continuous)."""
        taken = self.copier.take(request.ranges, end, request.topic_map, request.producer_conf, self._stopping)
        if taken.rows is None:
            log.warning(
                "flow %s: batch %d copies its own records (%s: %s); the copies made ahead of it are orphans on "
                "the target (duplicates with no sync)",
                self.flow,
                request.batch_id,
                taken.failure,
                taken.reason[:300],
            )
            return None
        self._settle.skipped(taken.skipped)
        report.ahead = True
        report.in_driver = not taken.sites
        report.sites = taken.sites or (driver_site(request.ranges, taken.rows),)
        return taken

    def copy(self, request: CopyRequest, state: MirrorState, report: BatchReport) -> tuple[pa.Table, MirrorState]:
        return self.own.copy(request, state, report)

    def synced(self, copied: pa.Table) -> None:
        self.own.synced(copied)  # exactly-once: where the next read back starts

    def stop_reading(self) -> None:
        """The mirror is stopping: the copier reads no more, so the next batches take every copy it made."""
        self.copier.stop_reading()

    def holds_copies(self) -> bool:
        """Whether the copier holds copies no batch took yet (orphans if the mirror stopped now)."""
        return self.copier.held() > 0

    def close(self) -> None:
        """Close the continuous copier (its copies no batch took are orphans)."""
        self.copier.close()
