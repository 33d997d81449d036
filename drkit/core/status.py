"""What the mirror and translator have done, how far behind they are, and what that means.

Pure: the adapters probe the source (end offsets, the age of the oldest unmirrored record) and
read the stores; this module turns those facts into per-partition lag, per-flow verdicts, the RPO
of a failover and a group's offsets. Where a fact is unknown (the source unreachable, nothing
mirrored yet) the figure is ``None``, never a guess that looks better than the truth.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from drkit.core.checkpoints import RecordedCheckpoint, retranslate
from drkit.core.offsets import SyncRange
from drkit.core.ports import SyncProgress, TopicPartition
from drkit.core.translate import SyncIndex


class Verdict(StrEnum):
    """A flow's health, worst last (the overall verdict is the worst of the flows)."""

    HEALTHY = "healthy"
    LAGGING = "lagging"
    STALE = "stale"
    SOURCE_UNREACHABLE = "source unreachable"

    @property
    def exit_code(self) -> int:
        """``drkit status``'s exit code, for scripts and monitors (apart from the error codes 1-7)."""
        return _EXIT_CODES[self]


_EXIT_CODES = {Verdict.HEALTHY: 0, Verdict.LAGGING: 20, Verdict.STALE: 21, Verdict.SOURCE_UNREACHABLE: 22}
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
) -> tuple[PartitionLag, ...]:
    """Lag per partition mirrored or present on the source (``ends`` None: source unreachable)."""
    rows = []
    for key in sorted(set(progress) | set(ends or {})):
        p = progress.get(key)
        next_offset = p.next_upstream if p is not None else 0
        end = None if ends is None else ends.get(key)
        lag = None if end is None else max(0, end - next_offset)
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


def unmirrored_positions(progress: Mapping[TopicPartition, SyncProgress],
                         ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The first unmirrored offset of every partition the mirror is behind on."""
    out = {}
    for key, end in ends.items():
        p = progress.get(key)
        next_offset = p.next_upstream if p is not None else 0
        if next_offset < end:
            out[key] = next_offset
    return out


def flow_verdict(source_reachable: bool, translator_run_age: float | None, max_age_seconds: float,
                 anything_mirrored: bool, lags: Iterable[PartitionLag]) -> Verdict:
    if not source_reachable:
        return Verdict.SOURCE_UNREACHABLE
    if translator_run_age is None or translator_run_age > max_age_seconds or not anything_mirrored:
        return Verdict.STALE
    if any(p.lag_records for p in lags):
        return Verdict.LAGGING
    return Verdict.HEALTHY


def overall_verdict(verdicts: Iterable[Verdict]) -> Verdict:
    return max(verdicts, key=_SEVERITY.index, default=Verdict.HEALTHY)


def group_ages(recorded: Iterable[RecordedCheckpoint], now_ms: float) -> dict[str, float]:
    """Per group, the age of its oldest partition checkpoint (what failover's freshness check sees)."""
    ages: dict[str, float] = {}
    for r in recorded:
        age = round(r.age_at(now_ms), 1)
        ages[r.checkpoint.group] = max(ages.get(r.checkpoint.group, 0.0), age)
    return ages


@dataclass(frozen=True)
class GroupAge:
    group: str
    checkpoint_age_seconds: float


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
    groups: tuple[GroupAge, ...]
    partitions: tuple[PartitionLag, ...]
    heartbeat_latency_seconds: float | None = None  # no heartbeats yet: unknown, not zero

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value
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
class RpoPartition:
    topic: str
    partition: int
    mirrored_up_to: int
    source_end: int | None
    unmirrored_offsets: int | None
    last_sync_age_seconds: float | None


RPO_NOTE = "offsets the mirror had not copied (transaction markers count as offsets: an upper bound)"


@dataclass(frozen=True)
class RpoReport:
    source_reachable: bool
    source_ends_from: EndsSource
    observed_at: str | None  # ISO time of the end offsets used
    unmirrored_offsets: int | None  # None: unknown
    partitions: tuple[RpoPartition, ...]
    note: str = RPO_NOTE

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["source_ends_from"] = self.source_ends_from.value
        return d


def rpo_report(progress: Mapping[TopicPartition, SyncProgress], ends: Mapping[TopicPartition, int] | None,
               reachable: bool, observed_at_ms: int | None, now_ms: float) -> RpoReport:
    """How much the mirror had not copied, from live or last observed source end offsets."""
    partitions = []
    for key in sorted(set(progress) | set(ends or {})):
        p = progress.get(key)
        next_offset = p.next_upstream if p is not None else 0
        end = None if ends is None else ends.get(key)
        partitions.append(RpoPartition(
            key[0], key[1], next_offset, end, None if end is None else max(0, end - next_offset),
            None if p is None or p.synced_at_ms is None else _seconds(now_ms - p.synced_at_ms)))
    known = [p.unmirrored_offsets for p in partitions if p.unmirrored_offsets is not None]
    source = EndsSource.LIVE if reachable else (
        EndsSource.LAST_OBSERVATION if ends is not None else EndsSource.UNKNOWN)
    observed = None if observed_at_ms is None else datetime.fromtimestamp(observed_at_ms / 1000, UTC).isoformat()
    return RpoReport(reachable, source, observed, sum(known) if known else None, tuple(partitions))


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

    def as_dict(self) -> dict[str, Any]:
        return {"flow": self.flow, "group": self.group, "partitions": [asdict(p) for p in self.partitions]}


def group_offset_rows(recorded: Iterable[RecordedCheckpoint], ranges: Mapping[TopicPartition, list[SyncRange]],
                      live: Mapping[TopicPartition, int] | None, on_target: Mapping[TopicPartition, int],
                      now_ms: float) -> tuple[GroupOffsetRow, ...]:
    rows = []
    for r in recorded:
        c = r.checkpoint
        key = (c.source_topic, c.partition)
        now = retranslate(c, SyncIndex(ranges[key]) if key in ranges else None)
        rows.append(GroupOffsetRow(
            c.source_topic, c.partition, None if live is None else live.get(key), c.upstream_offset,
            c.downstream_offset, c.target_topic, now.downstream_offset, now.position.value,
            on_target.get((c.target_topic, c.partition)), round(r.age_at(now_ms), 1)))
    return tuple(rows)
