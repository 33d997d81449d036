"""From committed source offsets to checkpoints: what to record, and what to report.

Pure: the translator adapter reads the groups' committed offsets and the offset-syncs, this
module decides, per (group, topic, partition), the checkpoint row and the findings an operator
should see (no commits, topic not mirrored, partition not mirrored yet, offset before the first
mirrored record, inside a gap, provisional, moved backwards, group deleted). Only checkpoints
that differ from the previous ones are returned, so the history grows only with real changes.

A partition of which nothing was mirrored is translated only when the source holds nothing at or
after the committed offset (``Position.NOTHING_TO_MIRROR``: the target partition's start); the row
records that verdict, so failover can use it with the source gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from drkit.core.translate import PartitionBounds, Position, SyncIndex, translate_unmirrored

#: Kafka's "no committed offset" sentinel (OFFSET_INVALID) and any other negative value.
NO_OFFSET = -1001


@dataclass(frozen=True)
class CommittedOffset:
    """One committed offset of a group on the source."""

    group: str
    topic: str
    partition: int
    offset: int
    metadata: str | None = None


@dataclass(frozen=True)
class Checkpoint:
    """A group's committed source offset and its translation at checkpoint time.

    ``downstream_offset`` is None when nothing of the partition was mirrored yet, unless there was
    nothing to mirror (``Position.NOTHING_TO_MIRROR``: the target partition's start). The upstream
    offset is always kept: a provisional translation (the group was past the mirror) is redone
    with the syncs as they are when it is used.
    """

    flow: str
    group: str
    source_topic: str
    target_topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int | None
    position: Position
    metadata: str | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.group, self.source_topic, self.partition)

    def same_as(self, other: Checkpoint) -> bool:
        return (self.upstream_offset, self.downstream_offset, self.position, self.metadata, self.target_topic) == (
            other.upstream_offset,
            other.downstream_offset,
            other.position,
            other.metadata,
            other.target_topic,
        )


@dataclass(frozen=True)
class RecordedCheckpoint:
    """A checkpoint as the ``checkpoints`` table holds it: with the time it was written."""

    checkpoint: Checkpoint
    checkpointed_at_ms: int  # epoch milliseconds, UTC

    def age_at(self, reference_ms: float, confirmed_at_ms: int | None = None) -> float:
        """Seconds between the checkpoint and ``reference_ms`` (never negative).

        The translator appends a row only when an offset changes; ``confirmed_at_ms`` is the last
        time it read the group's offsets and found this row still current, so an idle group's
        checkpoint is as fresh as that confirmation (a confirmation after the reference is ignored).
        """
        since = self.checkpointed_at_ms
        if confirmed_at_ms is not None and confirmed_at_ms <= reference_ms:
            since = max(since, confirmed_at_ms)
        return max(0.0, (reference_ms - since) / 1000)


class FindingKind(StrEnum):
    NO_COMMITS = "no_commits"  # the group has no committed offsets at all
    TOPIC_NOT_MIRRORED = "topic_not_mirrored"  # offsets on a topic the flow does not mirror
    PARTITION_NOT_MIRRORED = "partition_not_mirrored"  # nothing of the partition mirrored yet
    BEFORE_FIRST = "before_first_mirrored"  # committed offset before the first mirrored record
    IN_GAP = "in_gap"  # committed offset not mirrored (compaction, markers, aborted records)
    PROVISIONAL = "provisional"  # the group is past what is mirrored; re-translated at use
    MOVED_BACKWARDS = "moved_backwards"  # the committed offset went back (reset on the source)
    GROUP_DELETED = "group_deleted"  # the group is gone from the source; its last checkpoint is kept


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    group: str
    topic: str | None = None
    partition: int | None = None
    detail: str = ""


_POSITION_FINDING = {
    Position.BEFORE_FIRST: FindingKind.BEFORE_FIRST,
    Position.IN_GAP: FindingKind.IN_GAP,
    Position.PAST_END: FindingKind.PROVISIONAL,
    Position.UNMIRRORED: FindingKind.PARTITION_NOT_MIRRORED,
}


@dataclass(frozen=True)
class CheckpointPlan:
    current: list[Checkpoint]  # every checkpoint as of now
    changed: list[Checkpoint]  # those that differ from the previous ones: what to append
    findings: list[Finding]


def plan_checkpoints(
    flow: str,
    committed: Mapping[str, Iterable[CommittedOffset]],
    topic_map: Mapping[str, str],
    indexes: Mapping[tuple[str, int], SyncIndex],
    previous: Mapping[tuple[str, str, int], Checkpoint],
    bounds: Mapping[tuple[str, int], PartitionBounds] | None = None,
    target_starts: Mapping[tuple[str, int], int] | None = None,
) -> CheckpointPlan:
    """Translate every committed offset of the selected groups (``committed``: group -> offsets).

    ``topic_map`` maps the flow's mirrored source topics to their target topics; ``indexes``
    holds the syncs per (source topic, partition); ``previous`` the latest checkpoints recorded.
    For partitions without syncs, ``bounds`` holds the source partition's start and end (read after
    the committed offsets) and ``target_starts`` the target partition's start, by (target topic,
    partition): without both, such a partition stays untranslated.
    """
    bounds = bounds or {}
    target_starts = target_starts or {}
    current: list[Checkpoint] = []
    changed: list[Checkpoint] = []
    findings: list[Finding] = []
    for group in sorted(committed):
        offsets = [o for o in committed[group] if o.offset >= 0]
        if not offsets:
            findings.append(Finding(FindingKind.NO_COMMITS, group, detail="the group has no committed offsets"))
            continue
        unmirrored_topics: set[str] = set()
        for c in sorted(offsets, key=lambda o: (o.topic, o.partition)):
            target_topic = topic_map.get(c.topic)
            if target_topic is None:
                unmirrored_topics.add(c.topic)
                continue
            index = indexes.get((c.topic, c.partition))
            translation = (
                index.translate(c.offset)
                if index is not None
                else translate_unmirrored(
                    c.offset, bounds.get((c.topic, c.partition)), target_starts.get((target_topic, c.partition))
                )
            )
            checkpoint = Checkpoint(
                flow,
                group,
                c.topic,
                target_topic,
                c.partition,
                c.offset,
                translation.offset,
                translation.position,
                c.metadata,
            )
            position = translation.position
            current.append(checkpoint)
            kind = _POSITION_FINDING.get(position)
            if kind is not None:
                findings.append(Finding(kind, group, c.topic, c.partition, _detail(checkpoint)))
            before = previous.get(checkpoint.key)
            if before is not None and c.offset < before.upstream_offset:
                findings.append(
                    Finding(
                        FindingKind.MOVED_BACKWARDS,
                        group,
                        c.topic,
                        c.partition,
                        f"committed offset moved back from {before.upstream_offset} to {c.offset}",
                    )
                )
            if before is None or not checkpoint.same_as(before):
                changed.append(checkpoint)
        for topic in sorted(unmirrored_topics):
            findings.append(
                Finding(
                    FindingKind.TOPIC_NOT_MIRRORED,
                    group,
                    topic,
                    detail="the flow does not mirror this topic; its offsets are not translated",
                )
            )
    for group in sorted({key[0] for key in previous} - set(committed)):
        findings.append(
            Finding(
                FindingKind.GROUP_DELETED,
                group,
                detail="the group is gone from the source; its last checkpoint is kept",
            )
        )
    return CheckpointPlan(current, changed, findings)


def _detail(c: Checkpoint) -> str:
    if c.position is Position.UNMIRRORED:
        return f"committed offset {c.upstream_offset}: nothing of this partition is mirrored yet"
    if c.position is Position.PAST_END:
        return (
            f"committed offset {c.upstream_offset} is past the mirror; provisional target offset "
            f"{c.downstream_offset}, re-translated when used"
        )
    if c.position is Position.BEFORE_FIRST:
        return (
            f"committed offset {c.upstream_offset} is before the first mirrored record; "
            f"target offset {c.downstream_offset} (earlier records were not mirrored)"
        )
    return f"committed offset {c.upstream_offset} was not mirrored (gap); next mirrored record at {c.downstream_offset}"


def retranslate(checkpoint: Checkpoint, index: SyncIndex | None) -> Checkpoint:
    """The same checkpoint translated with the syncs as they are now (failover, status)."""
    if index is None:
        return checkpoint
    t = index.translate(checkpoint.upstream_offset)
    return Checkpoint(
        checkpoint.flow,
        checkpoint.group,
        checkpoint.source_topic,
        checkpoint.target_topic,
        checkpoint.partition,
        checkpoint.upstream_offset,
        t.offset,
        t.position,
        checkpoint.metadata,
    )
