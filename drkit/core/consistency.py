"""Does the target still hold what the offset-syncs say the mirror wrote there?

A sync row says: upstream offsets ``u..U`` of a source partition landed at ``d..D`` of the target
partition. A target partition that ends at or below ``D`` no longer holds those copies: the topic was
deleted (and possibly recreated, by the mirror, auto-creation or a person) or truncated. The syncs
then translate onto records that do not exist, and the lag looks like 0 while the target is empty.

Pure: the adapters read the syncs' progress and the target's partition counts and end offsets; this
module names every target partition that falls short, with the numbers. Log start offsets are not
a signal (retention moves them forward on a healthy target); the end offset is: Kafka never moves a
partition's end backwards except by deleting or truncating it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from itertools import groupby

from drkit.core.ports import SyncProgress, TopicPartition


class DivergenceKind(StrEnum):
    TOPIC_MISSING = "topic missing"  # the target topic does not exist
    PARTITION_MISSING = "partition missing"  # it exists with fewer partitions than were synced
    BELOW_SYNCED_END = "below synced end"  # the partition ends before the last synced copy


@dataclass(frozen=True)
class SyncedPartition:
    """What the syncs say one target partition holds: copies up to ``last_downstream``."""

    source_topic: str
    target_topic: str
    partition: int
    last_upstream: int
    last_downstream: int

    @property
    def synced_end(self) -> int:
        """The least end offset the target partition must have."""
        return self.last_downstream + 1


@dataclass(frozen=True)
class TargetDivergence:
    """A target partition that no longer holds what its syncs say (``end`` None: it does not exist)."""

    kind: DivergenceKind
    source_topic: str
    target_topic: str
    partition: int
    synced_end: int
    end: int | None

    def describe(self) -> str:
        found = "missing" if self.end is None else f"end {self.end}"
        return f"partition {self.partition}: {found}, synced up to {self.synced_end - 1}"


def synced_partitions(
    progress: Mapping[TopicPartition, SyncProgress],
    target_topics: Mapping[str, str],
    wanted: Callable[[str], bool] = lambda _: True,
) -> tuple[SyncedPartition, ...]:
    """The target partitions the syncs describe, of the source topics ``wanted`` accepts."""
    return tuple(
        SyncedPartition(topic, target_topics[topic], partition, p.last_upstream, p.last_downstream)
        for (topic, partition), p in sorted(progress.items())
        if topic in target_topics and wanted(topic)
    )


def target_divergences(
    synced: Iterable[SyncedPartition], counts: Mapping[str, int], ends: Mapping[TopicPartition, int]
) -> tuple[TargetDivergence, ...]:
    """Every synced target partition the target no longer holds to its synced end.

    ``counts``: the target's topics and partition counts; ``ends``: end offsets of (target topic,
    partition). A partition of an existing topic with no end offset reported is not judged (unknown
    is not evidence)."""
    out = []
    for s in synced:
        have = counts.get(s.target_topic)
        if have is None:
            out.append(_divergence(DivergenceKind.TOPIC_MISSING, s, None))
        elif s.partition >= have:
            out.append(_divergence(DivergenceKind.PARTITION_MISSING, s, None))
        else:
            end = ends.get((s.target_topic, s.partition))
            if end is not None and end < s.synced_end:
                out.append(_divergence(DivergenceKind.BELOW_SYNCED_END, s, end))
    return tuple(sorted(out, key=lambda d: (d.target_topic, d.partition)))


def _divergence(kind: DivergenceKind, s: SyncedPartition, end: int | None) -> TargetDivergence:
    return TargetDivergence(kind, s.source_topic, s.target_topic, s.partition, s.synced_end, end)


def topics_to_read(synced: Iterable[SyncedPartition], counts: Mapping[str, int]) -> dict[str, int]:
    """The existing target topics whose end offsets the check needs (topic -> partition count)."""
    return {s.target_topic: counts[s.target_topic] for s in synced if s.target_topic in counts}


def divergence_message(flow: str, target: str, divergences: Iterable[TargetDivergence]) -> str:
    """One line for the operator: which topics, the numbers, why it matters and what to do."""
    topics = []
    for topic, group in groupby(
        sorted(divergences, key=lambda d: (d.target_topic, d.partition)), lambda d: d.target_topic
    ):
        found = list(group)
        missing = found[0].kind is DivergenceKind.TOPIC_MISSING
        shown = "; ".join(d.describe() for d in found[:5]) + (f"; {len(found) - 5} more" if len(found) > 5 else "")
        state = "does not exist" if missing else "holds fewer records than its offset-syncs say"
        topics.append((topic, found[0].source_topic, f"target topic {topic} on {target} {state} ({shown})"))
    if not topics:
        return ""
    sources = ", ".join(sorted({source for _, source, _ in topics}))
    return (
        "; ".join(text for _, _, text in topics)
        + f": it was deleted or truncated, and the offset-syncs of flow {flow} no longer describe it. "
        + f"drkit does not recreate it: restore its records on {target}, or start flow {flow} over with a new "
        + "[state] root (its syncs and stream checkpoint stay in the old one); to mirror the other topics "
        + f"meanwhile, exclude {sources} from the flow's topics"
    )
