"""A group's readiness for a failover now: would it be placed exactly, how old is its checkpoint, what would it
read again, and what could it lose.

Pure. ``recorded`` are the checkpoints a failover now would use (per partition the newer of the Delta row and
the follower's live one). A failover translates each one again with the offset-syncs as they are then
(drkit.core.plan.plan_failover), so the readiness does the same with the syncs as they are now; a group is as
ready as its worst partition (:class:`Readiness`). Figures that need a cluster that did not answer are None
(unknown), never 0: a number shown here never looks better than the truth.

Left to the failover's own dry run: the placement of a provisional checkpoint over the target's unsynced tail by
origin headers (it can only be exact or re-read, never lose) and checkpoints of a re-created topic's older
incarnation (drkit.core.incarnation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from drkit.core.checkpoints import CommittedOffset, RecordedCheckpoint
from drkit.core.offsets import SyncRange
from drkit.core.ports import TopicPartition
from drkit.core.translate import Position, SyncIndex, standing


class Readiness(StrEnum):
    """What a failover now would do with a group, best first (a group is as ready as its worst partition)."""

    #: Every partition placed where the group stopped: nothing it processed is read again for the translation's
    #: sake, nothing it did not process is skipped.
    EXACT = "exact"
    #: A partition's committed offset lies before the first mirrored record: the group would be placed at that
    #: record, and the records before it (never mirrored) are not on the target.
    SKIPS = "skips_unmirrored"
    #: A partition's checkpoint is older than the flow's ``max_age_seconds``: the failover refuses the group
    #: unless ``--allow-stale``.
    STALE = "stale"
    #: Nothing of a partition is mirrored: it has no target offset, and the failover refuses the group.
    UNTRANSLATABLE = "untranslatable"


_ORDER = list(Readiness)


@dataclass(frozen=True)
class GroupReadiness:
    """One group's readiness (see the module)."""

    group: str
    #: The age of its oldest partition checkpoint (what the failover's freshness check sees).
    checkpoint_age_seconds: float
    readiness: Readiness
    #: Records the group committed on the source past the checkpoints a failover now would use: it would read
    #: them again on the target. None: the source did not answer, so how many is unknown (never 0).
    reread_records: int | None = None
    #: Records on the source the group has not read (at or past its committed offset now) that the mirror has
    #: not copied: lost to the group if the source died now. None: the source did not answer (unknown).
    at_risk_records: int | None = None


@dataclass(frozen=True)
class GroupFacts:
    """What readiness is decided from, per flow. ``committed`` and ``ends`` are None where the source did not
    answer; ``mirrored_next`` is per partition the next upstream offset the mirror will copy (absent: none)."""

    recorded: Sequence[RecordedCheckpoint]
    now_ms: float
    max_age_seconds: float
    ranges: Mapping[TopicPartition, Sequence[SyncRange]]
    mirrored_next: Mapping[TopicPartition, int]
    committed: Mapping[str, Iterable[CommittedOffset]] | None
    ends: Mapping[TopicPartition, int] | None
    #: Per group, the translator's last confirmation that its checkpoints were still current (epoch ms).
    confirmed_at_ms: Mapping[str, int] | None = None


def group_ages(
    recorded: Iterable[RecordedCheckpoint], now_ms: float, confirmed_at_ms: Mapping[str, int] | None = None
) -> dict[str, float]:
    """Per group, the age of its oldest partition checkpoint (what failover's freshness check sees),
    counted from the translator's last confirmation of the group where there is one."""
    ages: dict[str, float] = {}
    for r in recorded:
        age = round(r.age_at(now_ms, (confirmed_at_ms or {}).get(r.checkpoint.group)), 1)
        ages[r.checkpoint.group] = max(ages.get(r.checkpoint.group, 0.0), age)
    return ages


def group_rereads(
    recorded: Iterable[RecordedCheckpoint], committed: Mapping[str, Iterable[CommittedOffset]] | None
) -> dict[str, int | None]:
    """Per group, the records committed past its checkpoints: ``recorded`` the checkpoints a failover now would
    use, ``committed`` the groups' offsets on the source now (None: the source did not answer: unknown). A
    partition without a committed offset now adds nothing; one committed below its checkpoint (a reset) too."""
    now = _committed_now(committed)
    out: dict[str, int | None] = {}
    for r in recorded:
        c = r.checkpoint
        if committed is None:
            out[c.group] = None
            continue
        out[c.group] = (out.get(c.group) or 0) + max(0, now.get(c.key, c.upstream_offset) - c.upstream_offset)
    return out


def partition_readiness(r: RecordedCheckpoint, facts: GroupFacts) -> Readiness:
    """One partition's readiness: its checkpoint translated with the syncs now, as a failover now would."""
    c = r.checkpoint
    key = (c.source_topic, c.partition)
    ranges = facts.ranges.get(key)
    t = SyncIndex(ranges).translate(c.upstream_offset) if ranges else standing(c.position, c.downstream_offset)
    if t.offset is None:
        return Readiness.UNTRANSLATABLE
    if r.age_at(facts.now_ms, (facts.confirmed_at_ms or {}).get(c.group)) > facts.max_age_seconds:
        return Readiness.STALE
    if t.position is Position.BEFORE_FIRST:
        return Readiness.SKIPS
    return Readiness.EXACT


def group_at_risk(facts: GroupFacts) -> dict[str, int | None]:
    """Per group, the records at risk (see :attr:`GroupReadiness.at_risk_records`); None where the source's ends
    or the group's offsets are not known."""
    now = _committed_now(facts.committed)
    out: dict[str, int | None] = {}
    for r in facts.recorded:
        c = r.checkpoint
        end = None if facts.ends is None else facts.ends.get((c.source_topic, c.partition))
        if facts.committed is None or end is None:
            out[c.group] = None
            continue
        if c.group in out and out[c.group] is None:
            continue
        read_from = max(now.get(c.key, c.upstream_offset), facts.mirrored_next.get((c.source_topic, c.partition), 0))
        out[c.group] = (out.get(c.group) or 0) + max(0, end - read_from)
    return out


def readiness(facts: GroupFacts) -> tuple[GroupReadiness, ...]:
    """Every group's readiness, by group name."""
    worst: dict[str, Readiness] = {}
    for r in facts.recorded:
        here = partition_readiness(r, facts)
        worst[r.checkpoint.group] = max(worst.get(r.checkpoint.group, here), here, key=_ORDER.index)
    ages = group_ages(facts.recorded, facts.now_ms, facts.confirmed_at_ms)
    rereads = group_rereads(facts.recorded, facts.committed)
    at_risk = group_at_risk(facts)
    return tuple(GroupReadiness(g, ages[g], worst[g], rereads.get(g), at_risk.get(g)) for g in sorted(worst))


def _committed_now(committed: Mapping[str, Iterable[CommittedOffset]] | None) -> dict[tuple[str, str, int], int]:
    now: dict[tuple[str, str, int], int] = {}
    for group, offsets in (committed or {}).items():
        now.update({(group, o.topic, o.partition): o.offset for o in offsets if o.offset >= 0})
    return now
