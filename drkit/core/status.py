"""What the mirror and translator have done, how far behind they are, and what that means.

Pure: the adapters probe the source (end offsets, the age of the oldest unmirrored record) and
read the stores; this module turns those facts into per-partition lag, per-flow verdicts, the RPO
of a failover and a group's offsets. Where a fact is unknown (the source unreachable, nothing
mirrored yet) the figure is ``None``, never a guess that looks better than the truth.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from drkit.core.checkpoints import RecordedCheckpoint, retranslate
from drkit.core.consistency import TargetDivergence
from drkit.core.heartbeat import HEARTBEAT_TOPIC
from drkit.core.mirror_lease import LeaseReport
from drkit.core.offsets import SyncRange
from drkit.core.ports import SyncProgress, TopicPartition
from drkit.core.readiness import GroupReadiness
from drkit.core.recovery import RecoveryVerdict
from drkit.core.topology import TopicIssue
from drkit.core.translate import SyncIndex


class Verdict(StrEnum):
    """A flow's health, worst last (the overall verdict is the worst of the flows)."""

    HEALTHY = "healthy"
    LAGGING = "lagging"
    STALE = "stale"
    #: A selected topic is not mirrored at all: its target cannot hold its partitions (drkit.core.topology).
    TOPIC_REFUSED = "topic refused"
    SOURCE_UNREACHABLE = "source unreachable"
    #: The target does not answer: the mirror cannot copy and a failover could not commit there. Worse
    #: than an unreachable source: that is the disaster drkit is for, this leaves nowhere to fail over to.
    TARGET_UNREACHABLE = "target unreachable"
    #: A target partition holds fewer records than its offset-syncs say (deleted or truncated): the lag
    #: and every translation onto it are wrong, whatever the source says.
    TARGET_DIVERGED = "target diverged"

    @property
    def exit_code(self) -> int:
        """``drkit status``'s exit code, for scripts and monitors (apart from the error codes 1-7)."""
        return _EXIT_CODES[self]


_EXIT_CODES = {
    Verdict.HEALTHY: 0,
    Verdict.LAGGING: 20,
    Verdict.STALE: 21,
    Verdict.SOURCE_UNREACHABLE: 22,
    Verdict.TARGET_DIVERGED: 23,
    Verdict.TOPIC_REFUSED: 24,
    Verdict.TARGET_UNREACHABLE: 25,
}
_SEVERITY = list(Verdict)


def _seconds(ms: float) -> float:
    return round(ms / 1000, 1)


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    mirrored_up_to: int  # next upstream offset the mirror will copy
    source_end: int | None  # None: the source did not answer
    lag_records: int | None
    lag_seconds: float | None  # age of the oldest record not mirrored yet; None where unknown
    seconds_since_last_sync: float | None


def partition_lags(
    progress: Mapping[TopicPartition, SyncProgress],
    ends: Mapping[TopicPartition, int] | None,
    oldest_unmirrored_ms: Mapping[TopicPartition, int],
    now_ms: float,
    diverged: Collection[TopicPartition] = (),
) -> tuple[PartitionLag, ...]:
    """Lag per partition mirrored or present on the source (``ends`` None: source unreachable).

    A partition in ``diverged`` (its target copy no longer holds what the syncs say was mirrored: the
    topic deleted, re-created or truncated) has no lag to tell (None), never the 0 its syncs would give.
    """
    rows = []
    for key in sorted(set(progress) | set(ends or {})):
        p = progress.get(key)
        next_offset = p.next_upstream if p is not None else 0
        end = None if ends is None else ends.get(key)
        lag = None if end is None or key in diverged else max(0, end - next_offset)
        if lag is None:
            lag_seconds = None
        elif lag == 0:
            lag_seconds = 0.0
        else:
            oldest = oldest_unmirrored_ms.get(key)
            lag_seconds = None if oldest is None else _seconds(now_ms - oldest)
        synced = None if p is None or p.synced_at_ms is None else _seconds(now_ms - p.synced_at_ms)
        rows.append(PartitionLag(key[0], key[1], next_offset, end, lag, lag_seconds, synced))
    return tuple(rows)


def unmirrored_positions(
    progress: Mapping[TopicPartition, SyncProgress], ends: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """The first unmirrored offset of every partition the mirror is behind on."""
    out = {}
    for key, end in ends.items():
        p = progress.get(key)
        next_offset = p.next_upstream if p is not None else 0
        if next_offset < end:
            out[key] = next_offset
    return out


def flow_verdict(
    source_reachable: bool,
    translator_run_age: float | None,
    max_age_seconds: float,
    anything_mirrored: bool,
    lags: Iterable[PartitionLag],
    diverged: bool = False,
    refused: bool = False,
    target_reachable: bool = True,
) -> Verdict:
    if diverged:
        return Verdict.TARGET_DIVERGED
    # Before staleness: with the target gone the translator cannot run, and "stale" would send the
    # operator to the translator instead of to the cluster.
    if not target_reachable:
        return Verdict.TARGET_UNREACHABLE
    if not source_reachable:
        return Verdict.SOURCE_UNREACHABLE
    if translator_run_age is None or translator_run_age > max_age_seconds or not anything_mirrored:
        return Verdict.STALE
    if refused:
        return Verdict.TOPIC_REFUSED
    if any(p.lag_records for p in lags):
        return Verdict.LAGGING
    return Verdict.HEALTHY


def overall_verdict(verdicts: Iterable[Verdict]) -> Verdict:
    return max(verdicts, key=_SEVERITY.index, default=Verdict.HEALTHY)


@dataclass(frozen=True)
class FlowStatus:
    flow: str
    verdict: Verdict
    source_reachable: bool
    mirror_running: bool
    checkpoint_running: bool
    lag_records: int | None
    checkpoint_last_run_age_seconds: float | None
    checkpoint_last_run_seconds: float | None
    groups: tuple[GroupReadiness, ...]
    partitions: tuple[PartitionLag, ...]
    heartbeat_latency_seconds: float | None = None  # no heartbeats yet: unknown, not zero
    #: How old the newest heartbeat copied to the target is (drkit.core.heartbeat); None: none seen.
    heartbeat_age_seconds: float | None = None
    #: False: the target did not answer, so whether it still holds what the syncs say is unknown.
    target_reachable: bool = True
    target_divergences: tuple[TargetDivergence, ...] = ()
    #: The operator's line for ``target_divergences`` (empty when there are none).
    target_problem: str = ""
    #: Topics of the flow deleted on the source or refused, from the mirror's latest reconciliation ...
    topic_issues: tuple[TopicIssue, ...] = ()
    #: ... made this long ago (None: the mirror never reconciled this flow's topology).
    topology_age_seconds: float | None = None
    #: One line per cluster of the flow that did not answer its probe, and why (drkit.core.reach).
    unreachable: tuple[str, ...] = ()
    #: Which process mirrors the flow and which stand by, from the target's lease topic (drkit.core.mirror_lease);
    #: None: unknown (the target did not answer, or no mirror with a lease ever ran for it).
    mirror_lease: LeaseReport | None = None
    #: The records the flow's open failover left on its source (drkit.core.recovery): its verdict, and the
    #: offsets not on the target yet (by the offset-syncs only: never fewer than ``drkit recover`` says; None:
    #: not known).
    left_behind: RecoveryVerdict = RecoveryVerdict.NO_FAILOVER
    left_behind_offsets: int | None = 0
    #: Why the commit follower's live checkpoints were not read (empty: read, or the flow does not follow
    #: commits): the groups' checkpoint ages are then the rows' alone, older than a failover may find.
    live_checkpoints_unread: str = ""

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        d["left_behind"] = self.left_behind.value
        for g in d["groups"]:
            g["readiness"] = g["readiness"].value
        for row in d["target_divergences"]:
            row["kind"] = row["kind"].value
        d["topic_issues"] = [i.as_dict() for i in self.topic_issues]
        return d


@dataclass(frozen=True)
class StatusReport:
    verdict: Verdict
    flows: tuple[FlowStatus, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "flows": [f.as_dict() for f in self.flows]}


class EndsSource(StrEnum):
    """Where the source end offsets of an RPO figure came from."""

    LIVE = "live"
    LAST_OBSERVATION = "last observation"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class EndsObservation:
    """The source's end offsets (read_committed) seen at ``at_ms`` by the mirror or the translator."""

    at_ms: int
    ends: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class RpoPartition:
    topic: str
    partition: int
    mirrored_up_to: int
    source_end: int | None
    unmirrored_offsets: int | None
    last_sync_age_seconds: float | None


RPO_NOTE = (
    "offsets the mirror had not copied (transaction markers count as offsets: an upper bound at the "
    "time of the observation); with the source unreachable, records produced after the last "
    "observation are unknown to drkit: the estimate extrapolates the produce rate seen before it"
)


@dataclass(frozen=True)
class RpoReport:
    """How much the mirror had not copied when the failover was planned.

    Live (the source answered): ``unmirrored_offsets`` is exact (up to transaction markers).
    From a last observation: ``unmirrored_offsets`` is a lower bound (what was not mirrored when the
    source was last seen), ``observation_age_seconds`` says how old that is, and
    ``estimated_since_observation`` extrapolates what was produced after it (a labelled estimate, or
    None without a rate). ``unmirrored_offsets`` is None (unknown), never 0, when the observation
    is older than the last mirrored batch: the mirror copied past what was seen, so the
    observation says nothing about the loss.
    """

    source_reachable: bool
    source_ends_from: EndsSource
    observed_at: str | None  # ISO time of the end offsets used
    unmirrored_offsets: int | None  # exact when live; a lower bound from an observation; None: unknown
    partitions: tuple[RpoPartition, ...]
    observation_age_seconds: float | None = None
    unmirrored_at_observation: int | None = None  # the raw figure at the observation, whatever its age
    estimated_since_observation: int | None = None  # records/s before the observation x its age
    produce_rate_per_second: float | None = None
    lower_bound: bool = False  # True: the loss is at least unmirrored_offsets, possibly more
    note: str = RPO_NOTE

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["source_ends_from"] = self.source_ends_from.value
        return d


def produce_rate(latest: EndsObservation, previous: EndsObservation | None) -> float | None:
    """Records per second the source grew by between two observations (None without two)."""
    if previous is None or latest.at_ms <= previous.at_ms:
        return None
    grown = sum(
        max(0, end - previous.ends.get(key, end)) for key, end in latest.ends.items() if key[0] != HEARTBEAT_TOPIC
    )
    return grown / ((latest.at_ms - previous.at_ms) / 1000)


def rpo_report(
    progress: Mapping[TopicPartition, SyncProgress],
    live: Mapping[TopicPartition, int] | None,
    observation: EndsObservation | None,
    previous: EndsObservation | None,
    now_ms: float,
    copied: Mapping[TopicPartition, int] | None = None,
) -> RpoReport:
    """The RPO from live source ends (``live``), else from the freshest observation of them.

    ``copied``: per partition, one past the greatest source offset whose copy is on the target past the
    synced end (drkit.core.origin.copied_through): copies made ahead of their syncs are not lost."""
    if live is not None:
        ends: Mapping[TopicPartition, int] | None = live
        source, at_ms = EndsSource.LIVE, int(now_ms)
    elif observation is not None:
        ends, source, at_ms = observation.ends, EndsSource.LAST_OBSERVATION, observation.at_ms
    else:
        ends, source, at_ms = None, EndsSource.UNKNOWN, None
    partitions = []
    # Heartbeats are not the operator's data: losing some says nothing of the RPO (their age says how live).
    for key in sorted(k for k in set(progress) | set(ends or {}) if k[0] != HEARTBEAT_TOPIC):
        p = progress.get(key)
        next_offset = max(p.next_upstream if p is not None else 0, (copied or {}).get(key, 0))
        end = None if ends is None else ends.get(key)
        partitions.append(
            RpoPartition(
                key[0],
                key[1],
                next_offset,
                end,
                None if end is None else max(0, end - next_offset),
                None if p is None or p.synced_at_ms is None else _seconds(now_ms - p.synced_at_ms),
            )
        )
    known = [p.unmirrored_offsets for p in partitions if p.unmirrored_offsets is not None]
    at_observation = sum(known) if known else None
    observed = None if at_ms is None else datetime.fromtimestamp(at_ms / 1000, UTC).isoformat()
    if source is not EndsSource.LAST_OBSERVATION or observation is None:
        return RpoReport(
            live is not None,
            source,
            observed,
            at_observation,
            tuple(partitions),
            0.0 if live is not None else None,
            at_observation,
        )
    last_sync = max((p.synced_at_ms for p in progress.values() if p.synced_at_ms is not None), default=None)
    outdated = last_sync is not None and observation.at_ms < last_sync
    age = _seconds(now_ms - observation.at_ms)
    rate = produce_rate(observation, previous)
    estimate = None if rate is None else round(rate * max(0.0, age))
    return RpoReport(
        False,
        source,
        observed,
        None if outdated else at_observation,
        tuple(partitions),
        age,
        at_observation,
        estimate,
        None if rate is None else round(rate, 1),
        lower_bound=True,
    )


@dataclass(frozen=True)
class GroupOffsetRow:
    """One partition of a group: on the source, checkpointed, translated now, on the target."""

    topic: str
    partition: int
    source_committed: int | None  # None: source unreachable or no commit
    checkpointed_offset: int
    checkpointed_translation: int | None
    target_topic: str
    translated_now: int | None
    position: str
    target_group_offset: int | None
    checkpoint_age_seconds: float


@dataclass(frozen=True)
class GroupOffsets:
    flow: str
    group: str
    partitions: tuple[GroupOffsetRow, ...]
    #: One line per cluster of the flow that did not answer (drkit.core.reach): its columns are unknown.
    unreachable: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "group": self.group,
            "partitions": [asdict(p) for p in self.partitions],
            "unreachable": list(self.unreachable),
        }


def group_offset_rows(
    recorded: Iterable[RecordedCheckpoint],
    ranges: Mapping[TopicPartition, list[SyncRange]],
    live: Mapping[TopicPartition, int] | None,
    on_target: Mapping[TopicPartition, int],
    now_ms: float,
    confirmed_at_ms: int | None = None,
) -> tuple[GroupOffsetRow, ...]:
    rows = []
    for r in recorded:
        c = r.checkpoint
        key = (c.source_topic, c.partition)
        now = retranslate(c, SyncIndex(ranges[key]) if key in ranges else None)
        rows.append(
            GroupOffsetRow(
                c.source_topic,
                c.partition,
                None if live is None else live.get(key),
                c.upstream_offset,
                c.downstream_offset,
                c.target_topic,
                now.downstream_offset,
                now.position.value,
                on_target.get((c.target_topic, c.partition)),
                round(r.age_at(now_ms, confirmed_at_ms), 1),
            )
        )
    return tuple(rows)
