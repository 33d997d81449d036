"""The sync-gap rule: where a partition's offset-sync ranges leave a hole, or cover a source offset twice.

Read over the rows as the mirror wrote them (before coalescing): on the source side a hole is offsets never
copied, an overlap is a replay; on the target side a hole is offsets no recorded range describes. Pure: the
rows are anything shaped like an ``offset_syncs`` row (``SyncedRange``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol


class GapKind(StrEnum):
    """What a gap between the offset-sync ranges of a partition means."""

    #: Source offsets never copied: compaction, transaction markers, aborted records (read_committed).
    UPSTREAM = "upstream"
    #: Target offsets no recorded range describes: copies of a failed attempt (a replay after a crash)
    #: or records another writer put on the target partition.
    DOWNSTREAM = "downstream"
    #: Source offsets copied again (a replay from an earlier position, e.g. a new mirror stream).
    REPLAY = "replay"


class SyncedRange(Protocol):
    """One ``offset_syncs`` row as written: a range of one partition, from one batch of one stream."""

    @property
    def partition(self) -> int: ...
    @property
    def upstream_first(self) -> int: ...
    @property
    def upstream_last(self) -> int: ...
    @property
    def downstream_first(self) -> int: ...
    @property
    def downstream_last(self) -> int: ...
    @property
    def written_at(self) -> datetime: ...
    @property
    def stream_id(self) -> str: ...
    @property
    def batch_id(self) -> int: ...


@dataclass(frozen=True)
class SyncGap:
    """A gap on one side of a partition's offset-syncs: offsets ``first``..``last`` on that side."""

    kind: GapKind
    partition: int
    first: int
    last: int
    written_at: datetime  # when the range after the gap was written
    stream_id: str
    batch_id: int

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"kind": self.kind.value, "size": self.size}


def sync_gaps(rows: Iterable[SyncedRange]) -> tuple[SyncGap, ...]:
    """Gaps on either side of each partition's ranges, and source offsets copied more than once; ordered by
    partition, kind, first offset."""
    by_partition: dict[int, list[SyncedRange]] = {}
    for r in rows:
        by_partition.setdefault(r.partition, []).append(r)
    out: list[SyncGap] = []
    for p, ranges in sorted(by_partition.items()):
        out.extend(_upstream_gaps(p, ranges))
        out.extend(_downstream_gaps(p, ranges))
    return tuple(sorted(out, key=lambda g: (g.partition, g.kind.value, g.first)))


def _tie(r: SyncedRange) -> tuple[int, int, datetime, str, int]:
    """The rest of a row, so that the order ranges are visited in (and so the gap a row is named in) does not
    depend on the order the rows were read in."""
    return (r.upstream_last, r.downstream_last, r.written_at, r.stream_id, r.batch_id)


def _upstream_gaps(p: int, ranges: list[SyncedRange]) -> list[SyncGap]:
    out: list[SyncGap] = []
    top: int | None = None
    for r in sorted(ranges, key=lambda r: (r.upstream_first, r.downstream_first, *_tie(r))):
        if top is not None and r.upstream_first > top + 1:
            out.append(
                SyncGap(GapKind.UPSTREAM, p, top + 1, r.upstream_first - 1, r.written_at, r.stream_id, r.batch_id)
            )
        elif top is not None and r.upstream_first <= top:
            last = min(r.upstream_last, top)
            out.append(SyncGap(GapKind.REPLAY, p, r.upstream_first, last, r.written_at, r.stream_id, r.batch_id))
        top = r.upstream_last if top is None else max(top, r.upstream_last)
    return out


def _downstream_gaps(p: int, ranges: list[SyncedRange]) -> list[SyncGap]:
    out: list[SyncGap] = []
    top: int | None = None
    for r in sorted(ranges, key=lambda r: (r.downstream_first, r.upstream_first, *_tie(r))):
        if top is not None and r.downstream_first > top + 1:
            out.append(
                SyncGap(GapKind.DOWNSTREAM, p, top + 1, r.downstream_first - 1, r.written_at, r.stream_id, r.batch_id)
            )
        top = r.downstream_last if top is None else max(top, r.downstream_last)
    return out
