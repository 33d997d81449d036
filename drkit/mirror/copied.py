"""What a copy returns: the exact ranges the target acknowledged, as Arrow rows of ``COPY_SCHEMA``.

Every copy path (the driver's, the copy tasks', the exactly-once slots', the continuous copier's) folds its
(upstream, downstream) pairs with ``fold_ranges`` and hands the driver a table of this one shape; the driver
records its range columns in ``offset_syncs``. Invariant: a fold never guesses: as many delivery reports as
records, strictly increasing downstream offsets, or ``DeliveryFailed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from drkit.core.ports import TopicPartition
from drkit.mirror.producers import FAILURE_MARKER, DeliveryFailed

#: The range columns of a copy: one contiguous range of one partition's copies, the columns the offset-sync
#: log records per range (``drkit.store.offset_syncs.RANGE_SCHEMA`` is the same; a unit test holds them equal).
RANGE_COLUMNS = pa.schema(
    [
        pa.field("source_topic", pa.string(), nullable=False),
        pa.field("target_topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("upstream_first", pa.int64(), nullable=False),
        pa.field("upstream_last", pa.int64(), nullable=False),
        pa.field("downstream_first", pa.int64(), nullable=False),
        pa.field("downstream_last", pa.int64(), nullable=False),
        pa.field("record_count", pa.int64(), nullable=False),
    ]
)

#: What a copy returns: one row per contiguous range (the range columns, the shape the ranges keep up to
#: Delta), with the bytes (keys and values) of the partition and the newest source timestamp it delivered on
#: its first range (0 on the others).
COPY_SCHEMA = pa.schema([*RANGE_COLUMNS, pa.field("bytes", pa.int64()), pa.field("max_timestamp", pa.int64())])


def fold_ranges(
    topic: str, target: str, partition: int, ups: Sequence[int], downs: Sequence[int], nbytes: int, newest: int
) -> list[dict[str, Any]]:
    """The :data:`COPY_SCHEMA` rows of one partition's copies: upstream offsets in produce order paired by
    position with the downstream offsets in report order, folded into contiguous ranges. The pairing is
    checked: as many reports as records, strictly increasing downstream offsets; else ``DeliveryFailed``."""
    import numpy as np

    from drkit.core.offsets import SyncRange

    u, d = np.asarray(ups, dtype=np.int64), np.asarray(downs, dtype=np.int64)
    if len(d) != len(u) or (len(d) > 1 and bool(np.any(np.diff(d) <= 0))) or (len(d) and int(d.min()) < 0):
        raise DeliveryFailed(
            f"{FAILURE_MARKER}delivery reports of {target}/{partition} do not match the records produced "
            f"({len(u)} produced, {len(d)} reported in order): the batch is retried"
        )
    if not len(u):
        return []
    if len(u) > 1 and bool(np.any(np.diff(u) <= 0)):  # offset order is expected; never trusted blindly
        order = np.argsort(u, kind="stable")
        u, d = u[order], d[order]
    breaks = np.flatnonzero((np.diff(u) != 1) | (np.diff(d) != 1)) + 1
    starts = [0, *breaks.tolist()]
    ends = [*(breaks - 1).tolist(), len(u) - 1]
    rows: list[dict[str, Any]] = []
    for n, (s, e) in enumerate(zip(starts, ends, strict=True)):
        r = SyncRange(int(u[s]), int(u[e]), int(d[s]), int(d[e]))
        rows.append(
            {
                "source_topic": topic,
                "target_topic": target,
                "partition": partition,
                "upstream_first": r.upstream_first,
                "upstream_last": r.upstream_last,
                "downstream_first": r.downstream_first,
                "downstream_last": r.downstream_last,
                "record_count": r.record_count,
                "bytes": nbytes if n == 0 else 0,
                "max_timestamp": newest if n == 0 else 0,
            }
        )
    return rows


@dataclass(frozen=True)
class CopyTotals:
    """What a batch's copy did, summed from its ranges (:data:`COPY_SCHEMA`)."""

    records: int
    bytes: int
    #: per source partition: the offset after the last one copied
    next_offsets: dict[TopicPartition, int]
    #: per source partition: the newest source timestamp copied (epoch ms)
    newest_ms: dict[TopicPartition, int]


def totals(copied: pa.Table) -> CopyTotals:
    rows = copied.select(["source_topic", "partition", "upstream_last", "record_count", "bytes", "max_timestamp"])
    next_offsets: dict[TopicPartition, int] = {}
    newest: dict[TopicPartition, int] = {}
    for r in rows.to_pylist():
        key = (r["source_topic"], r["partition"])
        next_offsets[key] = max(next_offsets.get(key, 0), r["upstream_last"] + 1)
        if r["max_timestamp"]:
            newest[key] = max(newest.get(key, 0), r["max_timestamp"])
    return CopyTotals(
        int(pc.sum(copied.column("record_count")).as_py() or 0),
        int(pc.sum(copied.column("bytes")).as_py() or 0),
        next_offsets,
        newest,
    )
