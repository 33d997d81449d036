"""The jobs' run files: when the translator last finished, and the source end offsets each job last saw.

Small JSON files under the state root (paths from :class:`~drkit.layout.StateLayout`, local or in an
object store: drkit.store.files), replaced atomically. ``status`` reads the last run to tell a stale
translator; failover reads the freshest observation of the source's ends (the mirror records one per
micro-batch, the translator one per run) to report the RPO when the source is gone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from drkit.core.batch import MirrorState
from drkit.core.incarnation import Renewal
from drkit.core.status import EndsObservation
from drkit.core.topology import TopicIssue, TopicIssueKind
from drkit.errors import StoreError
from drkit.layout import JobKind, StateLayout, StatePath
from drkit.store import files


@dataclass(frozen=True)
class TranslatorRun:
    finished_at_ms: int
    seconds: float
    groups: int
    checkpoints: int
    appended: int
    #: Groups whose committed offsets this run read: their checkpoints were current when it read them.
    confirmed_groups: tuple[str, ...] = ()
    #: When the run began reading the committed offsets (None in a run file written before drkit kept it).
    read_at_ms: int | None = None

    def confirmed_at(self, group: str) -> int | None:
        """When ``group``'s checkpoints were last known current: the read's start, not the run's end (a commit
        made while the run wrote is not in them)."""
        if group not in self.confirmed_groups:
            return None
        return self.finished_at_ms if self.read_at_ms is None else self.read_at_ms


def _write(path: StatePath, data: dict[str, Any]) -> None:
    files.write_text(path, json.dumps(data))


def _read(path: StatePath) -> dict[str, Any] | None:
    try:
        text = files.read_text(path)
        data = None if text is None else json.loads(text)
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
        # A damaged file is replaced: this observation is what it should have held.
        latest = _observation(_read(path))
        data = _observation_json(observation)
        if latest is not None and latest.at_ms < observation.at_ms:
            data["previous"] = _observation_json(latest)
        _write(path, data)

    def source_ends(self, kind: JobKind, flow: str) -> tuple[EndsObservation | None, EndsObservation | None]:
        """(latest, the one before) observations of the source's end offsets by ``kind``.

        Raises :class:`StoreError` for a file that is there but damaged: read as "never observed" it would
        report an RPO of unknown size without saying why.
        """
        path = self.layout.source_ends(kind, flow)
        if not files.exists(path):
            return None, None
        data = _read(path)
        latest = None if data is None else _observation(data)
        previous = None if data is None or data.get("previous") is None else _observation(data["previous"])
        if latest is None or (data is not None and data.get("previous") is not None and previous is None):
            raise StoreError(
                f"{path}: the record of the source's end offsets is damaged (not the JSON drkit writes): delete "
                f"it and run again (the RPO is then reported unknown until the {_JOB_NAMES[kind]} writes it anew); "
                "nothing was changed"
            )
        return latest, previous


class MirrorFiles:
    """The mirror's own small files: its per-batch state, the target topics it created, and its latest
    topology findings (what ``status`` shows about deleted and refused topics)."""

    #: States kept: the last committed batch's and the one being decided (see core.batch.state_before).
    KEEP = 3

    def __init__(self, layout: StateLayout) -> None:
        self.layout = layout

    def states(self, flow: str) -> list[MirrorState]:
        data = _read(self.layout.mirror_states(flow)) or {}
        out: list[MirrorState] = []
        for s in data.get("states", []):
            try:
                held = {(str(t), int(p)): int(o) for t, p, o in s.get("held", [])}
                ids = {str(k): str(v) for k, v in dict(s.get("topic_ids", {})).items()}
                out.append(MirrorState(str(s["stream_id"]), int(s["batch_id"]), ids, held))
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def record_state(self, flow: str, state: MirrorState) -> None:
        """Keep ``state`` with the newest earlier ones of its stream (a state of this batch or later, left
        by an attempt Spark did not commit, is replaced)."""
        kept = [s for s in self.states(flow) if s.stream_id == state.stream_id and s.batch_id < state.batch_id]
        kept = [*sorted(kept, key=lambda s: s.batch_id)[-(self.KEEP - 1) :], state]
        _write(
            self.layout.mirror_states(flow),
            {
                "states": [
                    {
                        "stream_id": s.stream_id,
                        "batch_id": s.batch_id,
                        "topic_ids": dict(s.topic_ids),
                        "held": [[t, p, o] for (t, p), o in sorted(s.held.items())],
                    }
                    for s in kept
                ]
            },
        )

    def renewals(self, flow: str) -> tuple[Renewal, ...]:
        data = _read(self.layout.renewals(flow)) or {}
        out: list[Renewal] = []
        for r in data.get("renewals", []):
            try:
                out.append(Renewal(str(r[0]), int(r[1]), str(r[2]), int(r[3]), int(r[4])))
            except (IndexError, TypeError, ValueError):
                continue
        return tuple(out)

    def add_renewals(self, flow: str, renewals: list[Renewal]) -> None:
        """Keep the first record of each (topic, partition, topic id): a batch replayed after a crash sees the
        same renewal later, with a boundary at least as high; the first one is the safe one."""
        known = list(self.renewals(flow))
        seen = {(r.topic, r.partition, r.topic_id) for r in known}
        new = [r for r in renewals if (r.topic, r.partition, r.topic_id) not in seen]
        if new:
            rows = [[r.topic, r.partition, r.topic_id, r.at_ms, r.boundary] for r in [*known, *new]]
            _write(self.layout.renewals(flow), {"renewals": rows})

    def created_topics(self, flow: str) -> frozenset[str]:
        data = _read(self.layout.created_topics(flow)) or {}
        return frozenset(str(t) for t in data.get("topics", []))

    def add_created_topics(self, flow: str, topics: list[str]) -> None:
        if topics:
            _write(self.layout.created_topics(flow), {"topics": sorted(self.created_topics(flow) | set(topics))})

    def write_findings(self, flow: str, at_ms: int, issues: tuple[TopicIssue, ...]) -> None:
        _write(self.layout.topology_report(flow), {"at_ms": at_ms, "issues": [i.as_dict() for i in issues]})

    def findings(self, flow: str) -> tuple[int | None, tuple[TopicIssue, ...]]:
        """(when, the topology findings) of the flow's latest reconciliation; (None, ()) if none."""
        data = _read(self.layout.topology_report(flow))
        if data is None:
            return None, ()
        issues: list[TopicIssue] = []
        for i in data.get("issues", []):
            try:
                issues.append(TopicIssue(TopicIssueKind(i["kind"]), i["source"], i["target"], i["detail"]))
            except (KeyError, ValueError, TypeError):
                continue
        at = data.get("at_ms")
        return (int(at) if isinstance(at, int) else None), tuple(issues)


def _observation_json(o: EndsObservation) -> dict[str, Any]:
    return {"at_ms": o.at_ms, "ends": {f"{t}/{p}": e for (t, p), e in sorted(o.ends.items())}}


def _observation(data: Any) -> EndsObservation | None:
    """The observation in ``data`` (``{"at_ms": ..., "ends": {"topic/partition": end}}``), or None if damaged."""
    try:
        ends: dict[tuple[str, int], int] = {}
        for key, end in data["ends"].items():
            topic, sep, partition = key.rpartition("/")
            if not sep:
                return None
            ends[(topic, int(partition))] = int(end)
        return EndsObservation(int(data["at_ms"]), ends)
    except (KeyError, ValueError, AttributeError, TypeError):
        return None


_JOB_NAMES = {JobKind.MIRROR: "mirror", JobKind.TRANSLATOR: "translator"}
