"""Exact translation of committed offsets between a source and a target partition.

A committed offset ``C`` means "every record before C is processed; resume at C". Given the
offset-syncs of one partition (the set M of mirrored upstream offsets and where each landed):

* if some mirrored ``u >= C`` exists, the translation is the downstream offset of the smallest
  such ``u``: a consumer starting there reads every mirrored record at or after ``C`` and none
  before it (no loss, no re-delivery);
* otherwise it is the downstream offset of the largest mirrored ``u``, plus 1: the group is at
  or past everything mirrored so far (a *provisional* answer: if the mirror catches up, the same
  ``C`` translates further, so checkpoints keep ``C`` and failover re-translates it);
* if nothing of the partition was mirrored, there is no answer (``None``, never a guess), unless
  the source partition holds no record at or after ``C`` (never written, or deleted by retention
  or delete-records): then there is nothing to mirror, and the exact answer is the target
  partition's start, where the next record the mirror copies would land
  (:func:`translate_unmirrored`; the source's bounds must be read after ``C``).

The inverse (target offset back to source, for failback) is the same rule with sides swapped;
failback also weighs what the group is known to have processed on the origin, since an inverse past
the end of the mirrored range is provisional too (``drkit.core.plan.translate_back``).

Where a replay mirrored one upstream offset twice, the earliest copy is chosen: it can cost
re-delivered records, never lost ones.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from drkit.core.offsets import SyncRange


class Position(StrEnum):
    """Where a committed offset lies relative to what was mirrored."""

    MIRRORED = "mirrored"  # C itself was mirrored
    IN_GAP = "in_gap"  # C was not mirrored (gap: compaction, markers, aborted), later records were
    BEFORE_FIRST = "before_first"  # C lies before the first mirrored record (e.g. retention)
    PAST_END = "past_end"  # C is at or past everything mirrored: provisional
    UNMIRRORED = "unmirrored"  # nothing of the partition was mirrored: cannot translate
    NOTHING_TO_MIRROR = "nothing_to_mirror"  # nothing mirrored, and no source record at/after C: target start
    # Past the synced end, placed over the target's unsynced tail by the records' origin headers
    # (drkit.core.origin): exactly, or at a record of unknown origin (re-reads possible, no loss).
    UNSYNCED = "unsynced"
    UNKNOWN_ORIGIN = "unknown_origin"


@dataclass(frozen=True)
class Translation:
    offset: int | None
    position: Position

    @property
    def provisional(self) -> bool:
        return self.position is Position.PAST_END


#: The answer when nothing of the partition was mirrored: no offset, never a guess.
UNMIRRORED = Translation(None, Position.UNMIRRORED)


def standing(position: Position | None, downstream: int | None) -> Translation:
    """A recorded translation's answer where the offset-syncs now have none for its partition: only "nothing to
    mirror" stands (the target partition's start, known with the source gone); any other is unmirrored."""
    if position is Position.NOTHING_TO_MIRROR and downstream is not None:
        return Translation(downstream, Position.NOTHING_TO_MIRROR)
    return UNMIRRORED


@dataclass(frozen=True)
class PartitionBounds:
    """A partition's log start offset and its (read_committed) end offset, as its broker reported them.

    Read the start before the end: then every record at or after ``start`` that existed when the end
    was read lies below ``end``, so an empty ``[max(C, start), end)`` proves there was none at/after C.
    """

    start: int
    end: int

    def empty_from(self, offset: int) -> bool:
        """True when the partition held no record at or after ``offset`` (deleted, expired or never written)."""
        # start > end only if the two were read the wrong way round: then the end proves nothing.
        return self.start <= self.end and max(offset, self.start) >= self.end


def translate_unmirrored(committed: int, source: PartitionBounds | None, target_start: int | None) -> Translation:
    """``committed`` on a source partition of which nothing was mirrored: exact only if nothing is to mirror.

    When the source partition holds no record at or after ``committed``, the group has nothing left to
    read there but records produced later, which the mirror would copy from the target partition's
    start on: that start is the exact answer. Otherwise records exist that the mirror has not copied
    (or the bounds are unknown): no answer, never a guess.
    """
    if source is not None and target_start is not None and source.empty_from(committed):
        return Translation(target_start, Position.NOTHING_TO_MIRROR)
    return UNMIRRORED


class _Direction:
    """The ranges seen from one side (source for forward, target for inverse), sorted by start."""

    def __init__(self, ranges: Sequence[SyncRange], forward: bool) -> None:
        self.forward = forward
        self.ranges = sorted(ranges, key=lambda r: (self.first(r), self.map(r, self.first(r))))
        self.firsts = [self.first(r) for r in self.ranges]
        # prefix_max_last[i]: the largest end among ranges[0..i]; lets a lookup stop scanning
        # back as soon as no earlier range can contain the offset (one step without overlaps).
        self.prefix_max_last: list[int] = []
        running = -1
        for r in self.ranges:
            running = max(running, self.last(r))
            self.prefix_max_last.append(running)
        self.end: int | None = None
        if self.ranges:
            top = running
            self.end = min(self.map(r, top) for r in self.ranges if self.first(r) <= top <= self.last(r))

    def first(self, r: SyncRange) -> int:
        return r.upstream_first if self.forward else r.downstream_first

    def last(self, r: SyncRange) -> int:
        return r.upstream_last if self.forward else r.downstream_last

    def map(self, r: SyncRange, offset: int) -> int:
        return r.downstream_of(offset) if self.forward else r.upstream_of(offset)

    def translate(self, committed: int) -> Translation:
        if self.end is None:
            return UNMIRRORED
        idx = bisect.bisect_right(self.firsts, committed)
        best: int | None = None
        j = idx - 1
        while j >= 0 and self.prefix_max_last[j] >= committed:
            r = self.ranges[j]
            if self.last(r) >= committed:
                mapped = self.map(r, committed)
                best = mapped if best is None else min(best, mapped)
            j -= 1
        if best is not None:
            return Translation(best, Position.MIRRORED)
        if idx < len(self.ranges):
            start = self.firsts[idx]
            k = idx
            while k < len(self.ranges) and self.firsts[k] == start:
                mapped = self.map(self.ranges[k], start)
                best = mapped if best is None else min(best, mapped)
                k += 1
            assert best is not None
            return Translation(best, Position.BEFORE_FIRST if idx == 0 else Position.IN_GAP)
        return Translation(self.end + 1, Position.PAST_END)


class SyncIndex:
    """The syncs of one partition, indexed for translation both ways in O(log n)."""

    def __init__(self, ranges: Sequence[SyncRange]) -> None:
        self._forward = _Direction(ranges, forward=True)
        self._inverse = _Direction(ranges, forward=False)

    def __len__(self) -> int:
        return len(self._forward.ranges)

    def translate(self, committed: int) -> Translation:
        """Source committed offset -> target offset (see the module docstring)."""
        return self._forward.translate(committed)

    def inverse(self, committed: int) -> Translation:
        """Target committed offset -> source offset: the same rule with the sides swapped."""
        return self._inverse.translate(committed)

    def next_downstream(self) -> int | None:
        """One past the greatest target offset the syncs describe: where the unsynced tail starts (None: none)."""
        tops = self._inverse.prefix_max_last
        return tops[-1] + 1 if tops else None


def translate(ranges: Sequence[SyncRange], committed: int) -> int | None:
    """Source committed offset -> target offset; None when nothing of the partition was mirrored."""
    return SyncIndex(ranges).translate(committed).offset


def inverse_translate(ranges: Sequence[SyncRange], committed: int) -> int | None:
    """Target committed offset -> source offset; None when nothing was mirrored."""
    return SyncIndex(ranges).inverse(committed).offset
