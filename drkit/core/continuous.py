"""The continuous copy: which partitions the copier runs ahead on, and when a batch may take its copies.

In local mode the mirror's driver copies records as they arrive (drkit.mirror.continuous), ahead of
Spark's micro-batches, and each batch only records what the copier acknowledged in its planned ranges;
with a cluster master, long-lived copy tasks on the executors do the same, each for the partitions the
driver gives it (drkit.mirror.copier_tasks, drkit.core.copy_shards).

Invariants:

* **The plan stays the authority.** The copier copies a partition only from where the last batch that
  planned it ended, or from the plan's own start for a partition new to it (a new partition, a renewed
  topic, a hold). It never runs ahead on a partition no plan gave it, nor on a topic the plan refuses, so
  every decision of drkit.core.batch (new partitions and topics, holds, renewals, refusals) holds as it
  does for a batch that copies its own records.
* **A batch takes a partition's copies only when they are the whole range.** The copier's lane must
  start exactly at the batch's ``since`` and have every record below ``until`` acknowledged by the
  target (its frontier at or past ``until``); the batch's syncs are then exactly those copies, folded
  into ranges. Anything else (a lane that failed, or made no progress for a while) makes the batch copy
  its own records after the copier dropped everything it held: those copies are orphans (duplicates
  with no sync, placed by their origin header), never a sync.
* **What a crash loses is orphans.** The copier's acknowledged copies live in memory until a batch takes
  them; the batch's syncs are written before Spark commits it, so after a crash Spark replays from the
  last committed batch and the copies past it are made again: at-least-once, the syncs exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from enum import StrEnum

from drkit.core.batch import Partition
from drkit.core.offsets import BatchRanges


class CopyMode(StrEnum):
    """How a mirror's records reach the target."""

    CONTINUOUS = "continuous"  # the driver copies as records arrive; batches record what it acknowledged
    PER_BATCH = "per_batch"  # each micro-batch reads and copies its own planned ranges


def copy_mode(local_master: bool, continuous: bool, once: bool, driver_max_records: int) -> CopyMode:
    """The mode of a mirror run. Continuous when the flow asks for it, never for a one-shot run (a copier
    ahead of the last batch would leave copies no batch records: duplicates on the next run); with a local
    master only where the driver may copy (``driver_copy_max_records`` > 0), with a cluster master always:
    the executors' long-lived copy tasks copy there (drkit.mirror.copier_tasks)."""
    if not continuous or once:
        return CopyMode.PER_BATCH
    if local_master and driver_max_records <= 0:
        return CopyMode.PER_BATCH
    return CopyMode.CONTINUOUS


@dataclass(frozen=True)
class LaneChanges:
    """How the copier's lanes change before a batch takes its copies."""

    #: partitions (re)started at the given offset (the plan's ``since``; drkit.core.batch.EARLIEST allowed)
    start: Mapping[Partition, int]
    #: partitions the copier stops copying
    drop: frozenset[Partition]

    def __bool__(self) -> bool:
        return bool(self.start) or bool(self.drop)


def lane_changes(
    bases: Mapping[Partition, int], ranges: BatchRanges, end: Mapping[Partition, int], topics: Set[str]
) -> LaneChanges:
    """The lanes to start and drop so the copier runs on exactly what this batch planned.

    ``bases``: per lane, the first offset no batch took yet. ``ranges``: this batch's plan. ``end``: where
    Spark's offset log says each partition ends after this batch. ``topics``: the topics the flow copies now
    (refused ones excluded). A planned partition whose lane does not start at ``since`` starts there
    anew; a lane the batch did not plan stays only while nothing of it is owed (its base is the partition's
    end, so the next batch plans from there) and its topic is still copied."""
    start = {key: since for key, (since, _) in ranges.items() if bases.get(key) != since}
    drop = frozenset(
        key
        for key, base in bases.items()
        if key not in start and key not in ranges and (key[0] not in topics or end.get(key) != base)
    )
    return LaneChanges(start, drop)


def covered(base: int, frontier: int, since: int, until: int) -> bool:
    """Whether a lane holds every copy of ``[since, until)``: it starts at ``since`` and the target
    acknowledged everything below ``until`` (``frontier``: the first offset not acknowledged)."""
    return base == since and frontier >= until


def frontier(reached: int, first_unacknowledged: int | None) -> int:
    """The first offset of a lane whose copy the target has not acknowledged: the oldest record in flight,
    else the consumer's position (records skipped by their origin, and holes, count as done once passed)."""
    return reached if first_unacknowledged is None else min(reached, first_unacknowledged)


@dataclass(frozen=True)
class Split:
    """What a copier that stopped reading (the mirror is stopping) gives a batch of one planned partition."""

    #: the lane's copies below this offset are the batch's (None: none of them)
    taken_below: int | None
    #: what the batch copies itself, ``(since, until)`` (None: nothing)
    rest: tuple[int, int] | None


def split_stopped(base: int | None, frontier_: int, since: int, until: int) -> Split:
    """A stopping mirror's copier reads no more, so a batch planned past its lanes cannot wait for them: it
    takes what a lane acknowledged from ``since`` on and copies the rest itself, from the lane's frontier
    (``base``: the lane's, None without one). A lane that does not start at ``since`` gives nothing."""
    if base != since or frontier_ < 0:
        return Split(None, (since, until))
    if frontier_ >= until:
        return Split(until, None)
    return Split(frontier_, (frontier_, until))


class TakeFailure(StrEnum):
    """Why a batch cannot take its copies from the copier (and copies its own records)."""

    LANE_FAILED = "lane_failed"  # a read or delivery error on a planned partition
    NO_PROGRESS = "no_progress"  # a planned partition's frontier did not move for the stall time
