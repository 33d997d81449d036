"""Incarnations of a source topic: deleted and created again under its name, it is a new topic (a new Kafka
topic id) whose offsets start again, copied into the same target topic after the old one's copies.

The mirror records each *renewal* of a topic partition: from ``at_ms`` (when it saw the new topic id) on,
the copies of the new incarnation start at target offset ``boundary`` (the target partition's end then;
every copy of the old incarnation lies below it, every copy of the new one at or above it). The syncs of
one partition then fall into *eras* by downstream offset, and a committed offset is translated with the
syncs of its own era only, never with another incarnation's (whose upstream offsets mean other records).

Which era a committed offset belongs to is told by when it was read: Kafka deletes a group's offsets of a
topic when the topic is deleted, so an offset read at or after the renewal was committed on the new
incarnation. One read before it was committed on the old one, or on the new one before the mirror saw it:
translated in the old era, the group is placed in the old incarnation's copies, and reads the new
incarnation's copies from their start after them (re-reads possible, never a loss).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from drkit.core.offsets import SyncRange
from drkit.core.translate import SyncIndex


@dataclass(frozen=True)
class Renewal:
    topic: str
    partition: int
    topic_id: str
    at_ms: int
    boundary: int


def era_ranges(ranges: Iterable[SyncRange], renewals: Sequence[Renewal], at_ms: float | None) -> list[SyncRange]:
    """The syncs of the era an offset read at ``at_ms`` belongs to (None: now, the newest era)."""
    low, high = 0, None
    for r in sorted(renewals, key=lambda r: (r.at_ms, r.boundary)):
        if at_ms is None or at_ms >= r.at_ms:
            low = max(low, r.boundary)
        else:
            high = r.boundary
            break
    return [x for x in ranges if x.downstream_first >= low and (high is None or x.downstream_last < high)]


class EraIndexes:
    """The sync indexes of one partition per era, built when first asked."""

    def __init__(self, ranges: Sequence[SyncRange], renewals: Sequence[Renewal]) -> None:
        self._ranges = list(ranges)
        self._renewals = sorted(renewals, key=lambda r: (r.at_ms, r.boundary))
        self._built: dict[int, SyncIndex] = {}

    def at(self, at_ms: float | None) -> SyncIndex:
        era = sum(1 for r in self._renewals if at_ms is None or at_ms >= r.at_ms)
        index = self._built.get(era)
        if index is None:
            index = self._built[era] = SyncIndex(era_ranges(self._ranges, self._renewals, at_ms))
        return index


def by_partition(renewals: Iterable[Renewal]) -> dict[tuple[str, int], list[Renewal]]:
    out: dict[tuple[str, int], list[Renewal]] = {}
    for r in renewals:
        out.setdefault((r.topic, r.partition), []).append(r)
    return out


def era_indexes(
    ranges: Mapping[tuple[str, int], Sequence[SyncRange]], renewals: Iterable[Renewal]
) -> dict[tuple[str, int], EraIndexes]:
    """Per renewed partition, its eras' indexes (partitions never renewed are left out: one era)."""
    return {key: EraIndexes(ranges.get(key, []), rs) for key, rs in by_partition(renewals).items()}
