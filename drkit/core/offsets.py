"""Offset-syncs as ranges that are contiguous on both sides.

A :class:`SyncRange` says: upstream offsets ``upstream_first..upstream_last`` of a source
partition were copied, one by one and in order, to downstream offsets
``downstream_first..downstream_last`` of the target partition, so upstream ``u`` in the range
landed at ``downstream_first + (u - upstream_first)``. A gap on either side (compaction,
transaction markers, aborted records, retention, a replayed batch) starts a new range, so a
range never claims a record that does not exist.

Coalescing (:func:`islands`, :func:`coalesce`) is the one rule every copy of ``offset_syncs`` is
merged by (the writer, ``drkit maintain``, the readers): it merges ranges that continue each other
on both sides and never adds, drops or moves a pair, so no translation changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
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


@dataclass(frozen=True)
class Island:
    """Ranges merged into one: the merged ``range`` and the indexes (into the input) of its ``members``."""

    range: SyncRange
    members: tuple[int, ...]


def coalesce_order(r: SyncRange) -> tuple[int, int, int]:
    """The order the coalesce rule visits ranges in: downstream start, upstream start, downstream end.

    Downstream first: a target offset is written once, so the range that can continue another on both
    sides is the next one by downstream start, whereas a replay repeats upstream offsets. The three
    together order any two different ranges (the upstream end follows from the others), so the result
    does not depend on the order ranges were read in.
    """
    return r.downstream_first, r.upstream_first, r.downstream_last


def islands(ranges: Sequence[SyncRange]) -> list[Island]:
    """The one coalesce rule of offset-syncs, with what each merged range was made of.

    Visited in :func:`coalesce_order`, a range joins the island before it when it is the same range
    as the one visited just before (recorded twice) or starts right after the island ends on both
    sides; otherwise it starts an island. An island's range therefore stands for exactly the pairs
    of its members. The Arrow transcription (``drkit.store.offset_syncs``) applies this rule per row
    key to millions of rows; a property test proves the two equal.
    """
    order = sorted(range(len(ranges)), key=lambda i: coalesce_order(ranges[i]))
    out: list[Island] = []
    previous: SyncRange | None = None
    for i in order:
        r = ranges[i]
        if out and previous is not None:
            last = out[-1].range
            if r == previous:
                out[-1] = Island(last, (*out[-1].members, i))
                continue
            if r.upstream_first == last.upstream_last + 1 and r.downstream_first == last.downstream_last + 1:
                merged = SyncRange(last.upstream_first, r.upstream_last, last.downstream_first, r.downstream_last)
                out[-1] = Island(merged, (*out[-1].members, i))
                previous = r
                continue
        out.append(Island(r, (i,)))
        previous = r
    return out


def coalesce(ranges: Iterable[SyncRange]) -> list[SyncRange]:
    """Ranges that continue each other on both sides merged, repeats taken once (:func:`islands`); every
    (upstream, downstream) pair, and so every translation, stays the same.

    The writer keeps a day of a stream's rows coalesced with it, maintenance coalesces completed days
    with it, and readers coalesce what they load with it.
    """
    return [island.range for island in islands(list(ranges))]


def coalesce_cutoff(batch_ids: Iterable[int], keep: int) -> int | None:
    """The highest batch id of a stream that maintenance may coalesce: the greatest id not among the
    ``keep`` greatest ids present (a batch without records writes no row, so ids can skip). None when
    there are no more than ``keep`` ids: the mirror's restart check reads the newest batches' rows."""
    ids = sorted(set(batch_ids), reverse=True)
    return ids[keep] if len(ids) > keep else None


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
