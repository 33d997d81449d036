"""Writes offset-sync batches the way the mirror does, for tests of the Delta tables.

Old batches are written a day before the test's ``now`` (given, never read at import), as a running
mirror would have written them yesterday: maintenance rewrites only completed UTC days (give it
``today=now.date()``, so a test that runs across midnight sees the same days).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from drkit.config import DrkitConfig, parse_config
from drkit.core.offsets import SyncRange
from drkit.layout import StateLayout
from drkit.store import delta
from drkit.store.offset_syncs import SPEC, SyncTable, range_table


def yesterday(now: datetime) -> datetime:
    """A day before ``now``: a completed UTC day for maintenance whose today is ``now``'s date."""
    return now - timedelta(days=1)


def config_for(tmp_path: Path) -> DrkitConfig:
    """A config whose clusters are never contacted: maintenance only touches the Delta tables."""
    data = {
        "clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [{"source": "A", "target": "B"}, {"source": "B", "target": "A"}],
        "state": {"root": str(tmp_path / "state")},
    }
    return parse_config(data, str(tmp_path / "drkit.toml"))


class Writer:
    """Writes batches of one stream like the mirror does, keeping each partition's next offsets."""

    def __init__(
        self,
        store: SyncTable,
        flow: str,
        stream_id: str,
        start: dict[tuple[str, int], tuple[int, int]] | None = None,
        *,
        now: datetime,
    ) -> None:
        self.store = store
        #: The test's present: batches are written a day before it, or at it with ``batch(today=True)``.
        self.now = now
        self.flow = flow
        self.stream_id = stream_id
        self.next: dict[tuple[str, int], tuple[int, int]] = dict(start or {})

    def batch(
        self,
        batch_id: int,
        parts: list[tuple[str, str, int]],
        records: int = 5,
        skip_upstream: dict[tuple[str, int], int] | None = None,
        skip_downstream: dict[tuple[str, int], int] | None = None,
        split: set[tuple[str, int]] | None = None,
        today: bool = False,
    ) -> None:
        rows = []
        for topic, target, partition in parts:
            key = (topic, partition)
            u, d = self.next.get(key, (0, 0))
            u += (skip_upstream or {}).get(key, 0)
            d += (skip_downstream or {}).get(key, 0)
            if split and key in split:  # a gap inside the batch: two ranges, upstream offset u+2 missing
                rows.append((topic, target, partition, SyncRange(u, u + 1, d, d + 1)))
                rows.append((topic, target, partition, SyncRange(u + 3, u + records, d + 2, d + records - 1)))
                self.next[key] = (u + records + 1, d + records)
                continue
            rows.append((topic, target, partition, SyncRange(u, u + records - 1, d, d + records - 1)))
            self.next[key] = (u + records, d + records)
        at = self.now if today else yesterday(self.now)
        self.store.write(self.flow, self.stream_id, batch_id, range_table(rows), at=at)


#: When the rows of :func:`sync` are written, unless told otherwise.
T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def sync(
    flow: str,
    topic: str,
    partition: int,
    up: tuple[int, int],
    down: tuple[int, int],
    batch: int,
    stream: str = "s1",
    at: datetime = T0,
) -> dict[str, object]:
    """One ``offset_syncs`` row as stored, target topic ``A.<topic>``."""
    return {
        "flow": flow,
        "source_topic": topic,
        "target_topic": f"A.{topic}",
        "partition": partition,
        "upstream_first": up[0],
        "upstream_last": up[1],
        "downstream_first": down[0],
        "downstream_last": down[1],
        "record_count": up[1] - up[0] + 1,
        "batch_id": batch,
        "stream_id": stream,
        "written_at": at,
        "sync_date": date(2026, 11, 23),
    }


def write_syncs(layout: StateLayout, rows: list[dict[str, object]]) -> None:
    """``rows`` appended as they are (no batch transaction, no coalescing): a table to read back."""
    delta.write(layout.offset_syncs, SPEC, pa.Table.from_pylist(rows, schema=SPEC.schema))
