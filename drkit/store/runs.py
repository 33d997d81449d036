"""The translator's run files: when it last finished, and the source end offsets it last saw.

Small JSON files under the state root (paths from :class:`~drkit.layout.StateLayout`), replaced
atomically. ``status`` reads the last run to tell a stale translator; failover reads the last
observed source ends to report the RPO when the source is gone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from drkit.layout import StateLayout


@dataclass(frozen=True)
class TranslatorRun:
    finished_at_ms: int
    seconds: float
    groups: int
    checkpoints: int
    appended: int


@dataclass(frozen=True)
class SourceEnds:
    """The source's read_committed end offsets at ``at_ms`` (epoch ms)."""

    at_ms: int
    ends: dict[tuple[str, int], int]


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class RunFiles:
    def __init__(self, layout: StateLayout) -> None:
        self.layout = layout

    def write_last_run(self, flow: str, run: TranslatorRun) -> None:
        _write(self.layout.translator_last_run(flow), asdict(run))

    def last_run(self, flow: str) -> TranslatorRun | None:
        data = _read(self.layout.translator_last_run(flow))
        try:
            return None if data is None else TranslatorRun(**data)
        except TypeError:
            return None

    def write_source_ends(self, flow: str, ends: SourceEnds) -> None:
        _write(self.layout.translator_source_ends(flow),
               {"at_ms": ends.at_ms, "ends": {f"{t}/{p}": o for (t, p), o in ends.ends.items()}})

    def source_ends(self, flow: str) -> SourceEnds | None:
        data = _read(self.layout.translator_source_ends(flow))
        if data is None:
            return None
        try:
            ends = {(k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1])): int(v) for k, v in data["ends"].items()}
            return SourceEnds(int(data["at_ms"]), ends)
        except (KeyError, ValueError, AttributeError):
            return None
