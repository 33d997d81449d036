"""Offset-syncs as ranges that are contiguous on both sides.

A :class:`SyncRange` says: upstream offsets ``upstream_first..upstream_last`` of a source
partition were copied, one by one and in order, to downstream offsets
``downstream_first..downstream_last`` of the target partition, so upstream ``u`` in the range
landed at ``downstream_first + (u - upstream_first)``. A gap on either side (compaction,
transaction markers, aborted records, retention, a replayed batch) starts a new range, so a
range never claims a record that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class SyncRange:
    upstream_first: int
    upstream_last: int
    downstream_first: int
    downstream_last: int

    def __post_init__(self) -> None:
        if self.upstream_first < 0 or self.downstream_first < 0:
            raise ValueError(f"offsets are never negative: {self}")
        if self.upstream_last - self.upstream_first != self.downstream_last - self.downstream_first:
            raise ValueError(f"a sync range has the same length on both sides: {self}")
        if self.upstream_last < self.upstream_first:
            raise ValueError(f"a sync range holds at least one record: {self}")

    @property
    def record_count(self) -> int:
        return self.upstream_last - self.upstream_first + 1

    def downstream_of(self, upstream: int) -> int:
        """Where upstream offset ``upstream`` (inside this range) landed."""
        return self.downstream_first + (upstream - self.upstream_first)

    def upstream_of(self, downstream: int) -> int:
        """Which upstream offset landed at ``downstream`` (inside this range)."""
        return self.upstream_first + (downstream - self.downstream_first)

    def pairs(self) -> Iterator[tuple[int, int]]:
        """Every (upstream, downstream) pair the range stands for."""
        for i in range(self.record_count):
            yield self.upstream_first + i, self.downstream_first + i


class RangeBuilder:
    """Folds (upstream, downstream) pairs, in delivery order, into contiguous ranges.

    Used where records are delivered, so that a whole micro-batch of one partition becomes a
    handful of ranges instead of one row per record.
    """

    def __init__(self) -> None:
        self._ranges: list[SyncRange] = []
        self._open: list[int] | None = None  # [uf, ul, df, dl]

    def add(self, upstream: int, downstream: int) -> None:
        current = self._open
        if current is not None and upstream == current[1] + 1 and downstream == current[3] + 1:
            current[1] = upstream
            current[3] = downstream
            return
        self._close()
        self._open = [upstream, upstream, downstream, downstream]

    def _close(self) -> None:
        if self._open is not None:
            self._ranges.append(SyncRange(*self._open))
            self._open = None

    def build(self) -> list[SyncRange]:
        self._close()
        return list(self._ranges)


def ranges_from_pairs(pairs: Iterable[tuple[int, int]]) -> list[SyncRange]:
    builder = RangeBuilder()
    for upstream, downstream in pairs:
        builder.add(upstream, downstream)
    return builder.build()


def coalesce(ranges: Iterable[SyncRange]) -> list[SyncRange]:
    """Merge ranges that continue each other on both sides; the mapping stays the same.

    Used by maintenance to shrink the offset_syncs table: a day of one-second batches of a
    steadily written partition becomes one range per gap.
    """
    out: list[SyncRange] = []
    for r in sorted(ranges, key=lambda r: (r.downstream_first, r.upstream_first)):
        if out:
            last = out[-1]
            if r.upstream_first == last.upstream_last + 1 and r.downstream_first == last.downstream_last + 1:
                out[-1] = SyncRange(last.upstream_first, r.upstream_last, last.downstream_first, r.downstream_last)
                continue
        out.append(r)
    return out


#: A source's end offsets as Spark's offset log states them: topic -> partition (as text) -> offset.
SourceOffsets = Mapping[str, Mapping[str, int]]


#: A partition of a micro-batch and the offsets it spans, ``[since, until)``.
BatchRanges = dict[tuple[str, int], tuple[int, int]]


def batch_ranges(start: SourceOffsets | None, end: SourceOffsets | None) -> BatchRanges | None:
    """The offsets ``[since, until)`` each source partition of a micro-batch spans, from the offsets Spark
    logged before the batch (``start``: the previous batch's ends, or the query's initial offsets) and for
    it (``end``). Partitions that did not advance are left out. None when a log is missing, when a
    partition of ``end`` has no start (a new topic or partition: Spark reads it from its earliest
    offset, which is not known here), or when a partition went back (a topic deleted and created again):
    such a batch is Spark's to plan, with its ``failOnDataLoss`` rules."""
    if start is None or end is None:
        return None
    out: BatchRanges = {}
    for topic, partitions in end.items():
        for partition, until in partitions.items():
            since = start.get(topic, {}).get(partition)
            if since is None or until < since:
                return None
            if until > since:
                out[(topic, int(partition))] = (since, until)
    return out
