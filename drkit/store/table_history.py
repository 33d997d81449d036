"""A Delta table's commits as time travel sees them: version, time, and what wrote each.

Read only: the commit log of one table (drkit.store.delta opens it), oldest first; a table that does not exist
yet has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from drkit.store.delta import Where, open_table


@dataclass(frozen=True)
class TableVersion:
    """One commit of a Delta table: its version, when, and what wrote it (for time travel)."""

    version: int
    timestamp: datetime
    operation: str
    parameters: Mapping[str, str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "timestamp": self.timestamp,
            "operation": self.operation,
            "parameters": dict(self.parameters),
        }


def table_versions(path: Where, name: str) -> list[TableVersion]:
    """Every commit of the table at ``path``, oldest first (none when the table does not exist yet)."""
    table = open_table(path, name)
    if table is None:
        return []
    out = [
        TableVersion(
            int(c["version"]),
            datetime.fromtimestamp(int(c["timestamp"]) / 1000, UTC),
            str(c.get("operation", "")),
            {str(k): str(v) for k, v in (c.get("operationParameters") or {}).items()},
        )
        for c in table.history()
    ]
    return sorted(out, key=lambda v: v.version)
