"""The record chunk: records of one source partition, in offset order, as every copy path hands them on.

The reader (drkit.mirror.reader) makes chunks; the copiers (drkit.mirror.deliver, the exactly-once
slots of drkit.mirror.transactions) consume them, in the driver and in the copy tasks
(drkit.mirror.executor). Invariant: one chunk holds one partition's records, offsets strictly
increasing, every column of the same length; ``headers`` is None when no record of the chunk has any.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: One record's own headers (as librdkafka gives them), or None.
Headers = list[tuple[str, bytes | None]] | None


@dataclass(frozen=True, slots=True)
class RecordChunk:
    """Records of one source partition; column ``i`` of every list is record ``i``."""

    topic: str
    partition: int
    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    #: source timestamps (epoch ms)
    stamps: list[int]
    #: per record, its own headers; None when no record of the chunk has any
    headers: list[Headers] | None = None

    def __len__(self) -> int:
        return len(self.offsets)


#: Where a reader hands its chunks: a copier's ``copy``.
Sink = Callable[[RecordChunk], None]
