"""Spark's offset log of the mirror's query, read from its checkpoint folder (local or in an object store).

Invariant: read only, never written (Spark owns the folder); a file that is absent, truncated or not
JSON reads as None, never as a guess, and the job refuses the batch on it.
"""

from __future__ import annotations

import json

from drkit.core.offsets import SourceOffsets
from drkit.store import files
from drkit.store.files import Location


def logged_offsets(checkpoint: Location, batch_id: int) -> SourceOffsets | None:
    """The source's end offsets for ``batch_id`` as Spark's offset log holds them (written before the batch
    runs: its third line is the Kafka source's offsets); None when absent or unreadable."""
    return _offsets_line(checkpoint / "offsets" / str(batch_id), 2)


def initial_offsets(checkpoint: Location) -> SourceOffsets | None:
    """Where the query's first batch starts: the Kafka source's initial offsets (``sources/0/0``, a version
    line then the offsets), resolved from ``startingOffsets`` when the query first ran."""
    return _offsets_line(checkpoint / "sources" / "0" / "0", -1)


def batch_start_offsets(checkpoint: Location, batch_id: int) -> SourceOffsets | None:
    return initial_offsets(checkpoint) if batch_id == 0 else logged_offsets(checkpoint, batch_id - 1)


def _offsets_line(path: Location, line: int) -> SourceOffsets | None:
    try:
        offsets = json.loads((files.read_text(path) or "").splitlines()[line])
    except (OSError, IndexError, ValueError):
        return None
    return offsets if isinstance(offsets, dict) else None
