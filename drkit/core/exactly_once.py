"""Exactly-once copies: which transactional id writes a partition, and what a restarted copy skips.

A flow in ``exactly_once`` delivery copies with transactional producers. Invariants:

* **One id per partition, everywhere.** Every copy of source partition ``(topic, p)`` is written through
  the transactional id of its slot (:func:`slot_of`: the topic's hash plus the partition number, modulo
  the flow's ``transaction_slots``), whoever copies it: the driver, any copy task, any process, any host.
  So initialising a producer of that id fences every older writer of the partition (Kafka's zombie
  fencing: a crashed process's producer, a copy task's lost attempt, a second mirror of the flow) and
  aborts its open transaction.
* **Fence, then read back.** A producer that copies a partition for the first time since it was
  initialised first reads the partition's committed records on the target past the last offset-sync
  (``read_committed``). What it finds there was committed by an earlier writer after its last sync was
  recorded (a crash between Kafka's commit and the Delta append, or another mirror before it was fenced):
  :func:`resume` keeps those copies as the batch's own, exactly as their origin headers and target
  offsets say, and the copy goes on after them. Reading before fencing could miss a zombie's commit.
* **A partition's copies in a batch are one transaction.** A transaction commits a partition's whole
  planned range or nothing, so the copies a restart finds are always a prefix of the range, in order.
* **A transaction's span trades visibility for throughput only while behind.** The continuous copier commits a
  slot's transaction after :func:`transaction_span`: its base (the latency a ``read_committed`` consumer adds)
  while it keeps up with the source; while it is behind, long enough that its commits, which hold the copying
  thread, take at most a tenth of its time, and never longer than ``BEHIND_SPAN_SECONDS``.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from drkit.core.offsets import BatchRanges

Partition = tuple[str, int]


class Delivery(StrEnum):
    """What a flow's mirror promises about copies of one source record on the target."""

    AT_LEAST_ONCE = "at_least_once"  # never lost; a crash may copy a record again (an orphan, no sync)
    EXACTLY_ONCE = "exactly_once"  # once among the records a read_committed consumer of the target sees


#: Transactional ids per flow by default: at most this many copy tasks per batch on a cluster, and as many
#: transactions per batch. Every host that may run a flow's mirror must use the flow's same value.
TRANSACTION_SLOTS = 4


def slot_of(topic: str, partition: int, slots: int) -> int:
    """The slot whose transactional id writes every copy of ``topic/partition`` (consecutive partitions of
    a topic go to consecutive slots, so a topic's partitions spread over all of them)."""
    return (zlib.crc32(topic.encode()) + partition) % max(1, slots)


#: The copier is behind the source once this many reads in a row filled their chunk: a backlog fills every read,
#: where one full read after the copying thread was held up (a slow commit, a busy machine) is a moment's lag.
BEHIND_FULL_READS = 3
#: While the copier is behind the source, the most of its time its commits may hold the copying thread.
BEHIND_COMMIT_SHARE = 0.1
#: While the copier is behind, the longest a transaction stays open (what a backlog's records wait on top).
BEHIND_SPAN_SECONDS = 0.5


def transaction_span(base: float, last_commit: float, behind: bool) -> float:
    """How long a slot's transaction of the continuous copier stays open before it is committed. Caught up:
    ``base``. Behind (``BEHIND_FULL_READS`` reads in a row filled their chunk), the records read wait in the
    source anyway, and a commit (a flush of every copy in flight, then ``EndTxn``) holds the copying thread for
    ``last_commit`` seconds: the transaction stays open until the commit costs at most ``BEHIND_COMMIT_SHARE``
    of the time, up to ``BEHIND_SPAN_SECONDS``, never shorter than ``base``."""
    if not behind:
        return base
    share = BEHIND_COMMIT_SHARE
    return max(base, min(BEHIND_SPAN_SECONDS, last_commit * (1 - share) / share))


def transactional_id(flow: str, slot: int) -> str:
    """The transactional id of one slot of a flow: stable across restarts, processes and hosts."""
    return f"drkit-mirror.{flow}.{slot}"


def slot_groups(ranges: BatchRanges, slots: int) -> tuple[tuple[int, BatchRanges], ...]:
    """A batch's partitions grouped by slot (one copy task per slot, whole partitions), slots in order."""
    groups: dict[int, BatchRanges] = {}
    for key in sorted(ranges):
        groups.setdefault(slot_of(key[0], key[1], slots), {})[key] = ranges[key]
    return tuple(sorted(groups.items()))


@dataclass(frozen=True)
class Resume:
    """What a batch still copies after reading back the target's committed copies."""

    #: the ranges left to copy: each starts after the copies found (a range they complete is dropped)
    ranges: BatchRanges
    #: per partition, the (upstream, downstream) offsets of the committed copies found in its range
    found: Mapping[Partition, tuple[tuple[int, int], ...]]
    #: partitions whose committed copies reach past the range: read back again before the next batch
    again: frozenset[Partition]

    def reached(self, planned: BatchRanges) -> dict[Partition, int]:
        """Where the reads of the dropped partitions would have ended: their planned ends."""
        return {key: until for key, (_, until) in planned.items() if key not in self.ranges}


def resume(ranges: BatchRanges, tails: Mapping[Partition, Sequence[tuple[int | None, int]]]) -> Resume:
    """The batch's ranges after the committed copies read back from the target (``tails``: per partition,
    (upstream or None, downstream) in target order, from past the last sync).

    A copy counts when its origin is in the range and after every copy counted before it (records with no
    origin of this flow, and earlier copies met again, are someone else's or a past at-least-once run's:
    they stay where they are, unsynced). The range then starts one past the last copy counted; a range
    left empty is dropped (a range left with only markers or holes is read, to see its end)."""
    left: BatchRanges = {}
    found: dict[Partition, tuple[tuple[int, int], ...]] = {}
    again: set[Partition] = set()
    for key, (since, until) in ranges.items():
        pairs: list[tuple[int, int]] = []
        last = max(since, 0) - 1
        for upstream, downstream in tails.get(key, ()):
            if upstream is None:
                continue
            if upstream >= until:
                again.add(key)
                continue
            if upstream > last:
                pairs.append((upstream, downstream))
                last = upstream
        if pairs:
            found[key] = tuple(pairs)
            if last + 1 < until:
                left[key] = (last + 1, until)
        else:
            left[key] = (since, until)
    return Resume(left, found, frozenset(again))
