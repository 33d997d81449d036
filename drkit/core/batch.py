"""What one mirror micro-batch copies, given what Spark planned and what the mirror knows.

Spark plans each batch as end offsets per source partition (its offset log); the batch's start is the
previous batch's end, or the query's initial offsets. Spark's Kafka source runs with ``failOnDataLoss``
off, because a deleted topic would otherwise stop every topic of the flow; drkit decides instead, here:

* a partition Spark has no start for (a new topic, a partition added, a topic created again after a
  batch saw it gone) is copied from its first record (``EARLIEST``);
* a topic whose Kafka topic id changed since the mirror last copied it is a new incarnation (deleted and
  created again): every partition of it is copied from its first record, whatever Spark planned, since
  Spark's start offsets belong to the old incarnation;
* a partition whose end went back within one incarnation lost records on the source (an unclean leader
  election): reported, and nothing below the new end is copied twice;
* a refused topic (its target cannot hold its partitions) is not copied; each of its partitions is
  *held* from the first offset not copied, so that when the refusal is lifted the mirror copies from
  there, in order, before anything newer: no record is skipped, even though Spark moved on;
* a partition Spark no longer lists (its topic was deleted) is simply not copied; its holds are dropped.

Invariant: for every partition the mirror copies, the records ``[since, until)`` follow the last record
copied before (or start the incarnation), so the target partition receives the source partition's
records in order, each once per successful batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from drkit.core.offsets import BatchRanges, SourceOffsets

#: A start offset meaning "the partition's first record" (librdkafka's OFFSET_BEGINNING).
EARLIEST = -2

Partition = tuple[str, int]


@dataclass(frozen=True)
class MirrorState:
    """What the mirror knew after copying batch ``batch_id`` of stream ``stream_id``: the topic id each
    topic was copied under, and the partitions held (not copied) from an offset."""

    stream_id: str
    batch_id: int
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    held: Mapping[Partition, int] = field(default_factory=dict)


def state_before(states: Iterable[MirrorState], stream_id: str, batch_id: int) -> MirrorState:
    """The state a batch starts from: the newest one recorded for an earlier batch of the same stream. A
    state recorded for this batch or a later one belongs to an attempt whose batch Spark did not commit
    (the process died before): it is ignored, and the batch decides again."""
    best: MirrorState | None = None
    for s in states:
        if s.stream_id == stream_id and s.batch_id < batch_id and (best is None or s.batch_id > best.batch_id):
            best = s
    return best if best is not None else MirrorState(stream_id, -1)


def renewed_topics(known: Mapping[str, str], current: Mapping[str, str]) -> frozenset[str]:
    """Topics whose id changed since they were last copied: deleted and created again. A topic never
    copied, or whose id is unknown on either side, is not renewed."""
    return frozenset(t for t, tid in current.items() if tid and known.get(t) and known[t] != tid)


@dataclass(frozen=True)
class LostRange:
    """Offsets ``[until, since)`` of a partition that went back within one incarnation: records the
    source no longer holds and whose offsets it will reuse."""

    topic: str
    partition: int
    since: int
    until: int


@dataclass(frozen=True)
class BatchPlan:
    ranges: BatchRanges  # (topic, partition) -> [since, until); since may be EARLIEST
    held: Mapping[Partition, int]  # the holds after this batch
    lost: tuple[LostRange, ...] = ()

    def records(self) -> int:
        """An upper bound of the offsets the batch spans (a partition from EARLIEST counts from 0)."""
        return sum(until - max(since, 0) for since, until in self.ranges.values())


def plan_batch(
    start: SourceOffsets,
    end: SourceOffsets,
    held_before: Mapping[Partition, int],
    refused: frozenset[str] = frozenset(),
    renewed: frozenset[str] = frozenset(),
) -> BatchPlan:
    """The ranges a batch copies and the holds after it (see the module docstring)."""
    ranges: BatchRanges = {}
    held: dict[Partition, int] = {}
    lost: list[LostRange] = []
    for topic, partitions in sorted(end.items()):
        for name, until in sorted(partitions.items(), key=lambda kv: int(kv[0])):
            key = (topic, int(name))
            planned = start.get(topic, {}).get(name)
            since = EARLIEST if planned is None or topic in renewed else planned
            if since != EARLIEST and until < since:
                lost.append(LostRange(topic, key[1], since, until))
                since = until
            if key in held_before and topic not in renewed:
                since = held_before[key]  # owed from there: Spark moved on, the mirror did not
            if topic in refused:
                held[key] = since
                continue
            if until > max(since, 0):
                ranges[key] = (since, until)
    return BatchPlan(ranges, held, tuple(lost))


def lost_message(flow: str, lost: LostRange) -> str:
    """The operator's line for a source partition whose end went back within one incarnation."""
    return (
        f"flow {flow}: source partition {lost.topic}/{lost.partition} went back from offset "
        f"{lost.since} to {lost.until} without being created again: records the mirror had not all copied "
        "were lost on the source (an unclean leader election?)"
    )


@dataclass(frozen=True)
class ShortRead:
    """A partition whose read stopped at ``reached`` (the consumer's position) before ``until``, the end
    Spark planned: the source no longer holds offsets it held when Spark planned the batch (an unclean
    leader election truncated it, or it was deleted and created again shorter)."""

    topic: str
    partition: int
    until: int
    reached: int


def short_reads(ranges: BatchRanges, reached: Mapping[Partition, int]) -> tuple[ShortRead, ...]:
    """The partitions of ``ranges`` whose read did not reach the planned end.

    ``reached`` is, per partition, the consumer's position when the read of it ended: one past the last
    record seen, or the offset at which the consumer reported the end of the partition. A compaction hole,
    a transaction marker or an aborted record at the end of a range is no shortfall: the position passes
    them (the end of the partition is reported at or past ``until``, or a later record arrives). A
    partition with no position at all never answered and is short from its start."""
    out: list[ShortRead] = []
    for (topic, partition), (since, until) in sorted(ranges.items()):
        position = reached.get((topic, partition), max(since, 0))
        if position < until:
            out.append(ShortRead(topic, partition, until, position))
    return tuple(out)


def short_read_message(flow: str, short: ShortRead) -> str:
    """The operator's line for a partition that ended before the end Spark planned."""
    return (
        f"flow {flow}: source partition {short.topic}/{short.partition} ends at offset {short.reached}, before "
        f"offset {short.until} that Spark planned for this batch: the source lost records it held when the batch "
        "was planned (truncated by an unclean leader election?)"
    )


def hold_short_reads(held: Mapping[Partition, int], shorts: Iterable[ShortRead]) -> dict[Partition, int]:
    """The holds after a batch whose short partitions go on (``fail_on_data_loss = false``): each is owed
    from where its read stopped, so records written again at those offsets are copied by the next batch,
    not skipped because Spark's next batch starts at the planned end."""
    out = dict(held)
    for short in shorts:
        out[(short.topic, short.partition)] = short.reached
    return out
