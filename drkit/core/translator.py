"""The translator run's own decisions, apart from translation itself (``drkit.core.checkpoints``).

Pure: which partitions need the source's bounds read, which groups a run confirmed, and which
translated offsets may be committed to a target group. Invariant: a target group's offset is only
ever moved forward, and a group with active members is never committed to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from drkit.core.checkpoints import Checkpoint, CommittedOffset
from drkit.core.translate import SyncIndex

TopicPartition = tuple[str, int]


def unmirrored_partitions(
    committed: Mapping[str, Iterable[CommittedOffset]],
    topic_map: Mapping[str, str],
    indexes: Mapping[TopicPartition, SyncIndex],
) -> set[TopicPartition]:
    """The mirrored topics' partitions a group has an offset on but of which nothing was mirrored."""
    return {
        (c.topic, c.partition)
        for offsets in committed.values()
        for c in offsets
        if c.offset >= 0 and c.topic in topic_map and (c.topic, c.partition) not in indexes
    }


def confirmed_groups(committed: Mapping[str, Iterable[CommittedOffset]]) -> list[str]:
    """The groups with at least one real commit: a run that read them confirms their checkpoints as current."""
    return sorted(g for g, offsets in committed.items() if any(o.offset >= 0 for o in offsets))


def translated_by_group(current: Iterable[Checkpoint]) -> dict[str, list[Checkpoint]]:
    """The checkpoints with a translation, per group (those without one cannot be committed)."""
    by_group: dict[str, list[Checkpoint]] = {}
    for c in current:
        if c.downstream_offset is not None:
            by_group.setdefault(c.group, []).append(c)
    return by_group


def forward_commits(
    checkpoints: Iterable[Checkpoint], current: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """The target group's offsets to commit: the translated ones past its ``current`` offsets, never back."""
    return {
        (c.target_topic, c.partition): c.downstream_offset
        for c in checkpoints
        if c.downstream_offset is not None and c.downstream_offset > current.get((c.target_topic, c.partition), -1)
    }
