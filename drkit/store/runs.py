"""The jobs' run files: when the translator last finished, and the source end offsets each job last saw.

Small JSON files under the state root (paths from :class:`~drkit.layout.StateLayout`), replaced
atomically. ``status`` reads the last run to tell a stale translator; failover reads the freshest
observation of the source's ends (the mirror records one per micro-batch, the translator one per
run) to report the RPO when the source is gone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from drkit.core.status import EndsObservation
from drkit.layout import JobKind, StateLayout


@dataclass(frozen=True)
class TranslatorRun:
    finished_at_ms: int
    seconds: float
    groups: int
    checkpoints: int
    appended: int
    #: Groups whose committed offsets this run read: their checkpoints were current at ``finished_at_ms``.
    confirmed_groups: tuple[str, ...] = ()

    def confirmed_at(self, group: str) -> int | None:
        return self.finished_at_ms if group in self.confirmed_groups else None


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
            return (
                None
                if data is None
                else TranslatorRun(**{**data, "confirmed_groups": tuple(data.get("confirmed_groups", ()))})
            )
        except TypeError:
            return None

    def observe_source_ends(self, kind: JobKind, flow: str, observation: EndsObservation) -> None:
        """Record what ``kind`` saw of the source's end offsets; the observation before it is kept
        too, so a produce rate can be estimated after the source is lost."""
        path = self.layout.source_ends(kind, flow)
        latest, _ = self.source_ends(kind, flow)
        data = _observation_json(observation)
        if latest is not None and latest.at_ms < observation.at_ms:
            data["previous"] = _observation_json(latest)
        _write(path, data)

    def source_ends(self, kind: JobKind, flow: str) -> tuple[EndsObservation | None, EndsObservation | None]:
        """(latest, the one before) observations of the source's end offsets by ``kind``."""
        data = _read(self.layout.source_ends(kind, flow))
        if data is None:
            return None, None
        return _observation(data), _observation(data.get("previous"))


def _observation_json(o: EndsObservation) -> dict[str, Any]:
    return {"at_ms": o.at_ms, "ends": {f"{t}/{p}": e for (t, p), e in sorted(o.ends.items())}}


def _observation(data: Any) -> EndsObservation | None:
    try:
        ends = {(k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1])): int(v) for k, v in data["ends"].items()}
        return EndsObservation(int(data["at_ms"]), ends)
    except (KeyError, ValueError, AttributeError, TypeError):
        return None
