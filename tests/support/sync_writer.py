"""Writes offset-sync batches the way the mirror does, for tests of the Delta tables.

Old batches are written a day back, as a running mirror would have written them yesterday:
maintenance rewrites only completed UTC days.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from drkit.config import DrkitConfig, parse_config
from drkit.core.offsets import SyncRange
from drkit.store.offset_syncs import SyncTable, range_table

#: Maintenance rewrites only completed UTC days; old batches are written a day back, as a running
#: mirror would have written them yesterday.
YESTERDAY = datetime.now(UTC) - timedelta(days=1)


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
    ) -> None:
        self.store = store
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
        at: datetime | None = YESTERDAY,
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
        self.store.write(self.flow, self.stream_id, batch_id, range_table(rows), at=at)
