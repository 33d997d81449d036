"""Live checkpoints: each source group's newest committed offset, translated, held by a shadow group on the target.

The follower (drkit.translator.follow) reads the source's ``__consumer_offsets`` and commits, per selected
source group, to the target group :func:`shadow_group` (``drkit.ckpt.<flow>.<group>``): per (target topic,
partition) the translated offset, and as commit metadata a small versioned JSON (:func:`encode_metadata`) with
the upstream offset C, the source topic, the translation's position and the source commit timestamp. Reading a
group's newest checkpoint is then one OffsetFetch of its shadow group, whatever the history.

Invariants:

- A shadow group's name is the prefix, the flow (``A->B``: cluster aliases hold no ``.``) and the group; a
  name without the prefix is never one, and two (flow, group) pairs never share one. Shadow groups are never
  selected as source groups (:func:`is_shadow`), so a reversed flow does not shadow them again.
- A shadow group only moves forward in the source's log order: :class:`PendingCommits` keeps, per group and
  partition, the last record of ``__consumer_offsets`` in log order (a reset to an earlier offset is a newer
  commit and is kept), and the follower writes one group's changes one request at a time, each after the
  previous one was acknowledged. The offsets are never compared to decide.
- A deleted group (group tombstone) loses its shadow group; a deleted offset (offset tombstone) gets a
  ``deleted`` marker (Kafka's admin API cannot delete one group offset while keeping the others). Either way
  the live store says nothing of it and failover uses the ``checkpoints`` table's row, as it always did for a
  deleted group (its last checkpoint is kept: drkit.core.checkpoints ``GROUP_DELETED``).
- :func:`newest` picks, per partition, the newer of the table's row and the live checkpoint by time: the live
  one wins only when its source commit is later than the table's knowledge (its row or the translator's
  confirmation of it). It assumes the source brokers' and drkit's clocks agree within a follow interval.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from drkit.core.checkpoints import Checkpoint, CommittedOffset, RecordedCheckpoint
from drkit.core.group_commits import GroupRecord, RecordKind
from drkit.core.translate import Position

#: The prefix of every shadow group's name (a user group with it is never translated).
SHADOW_PREFIX = "drkit.ckpt."
#: The version of the commit metadata's JSON written now (a reader ignores versions it does not know).
METADATA_VERSION = 1
#: Kafka's ``offset.metadata.max.bytes`` default: metadata longer than this is refused by the broker.
MAX_METADATA_BYTES = 4096
#: The offset a shadow group commits for a deleted offset (only its metadata's marker counts).
DELETED_OFFSET = 0

TopicPartition = tuple[str, int]


def shadow_group(flow: str, group: str) -> str:
    """The target group holding ``group``'s live checkpoints of ``flow``."""
    return f"{SHADOW_PREFIX}{flow}.{group}"


def is_shadow(group: str) -> bool:
    """Whether ``group`` is a shadow group (never translated itself)."""
    return group.startswith(SHADOW_PREFIX)


@dataclass(frozen=True)
class LiveCheckpoint:
    """A source group's newest commit of one partition, as its shadow group holds it: the checkpoint, dated by
    its source commit, or a marker that the offset was deleted (``deleted``: only the key of its checkpoint
    counts)."""

    checkpoint: Checkpoint
    commit_timestamp_ms: int
    deleted: bool = False

    @property
    def recorded(self) -> RecordedCheckpoint:
        """As a recorded checkpoint, dated by its source commit."""
        return RecordedCheckpoint(self.checkpoint, self.commit_timestamp_ms)


def encode_metadata(c: LiveCheckpoint) -> str:
    """The shadow commit's metadata: compact JSON, at most MAX_METADATA_BYTES (ValueError beyond)."""
    k = c.checkpoint
    body: dict[str, object] = {
        "v": METADATA_VERSION,
        "c": k.upstream_offset,
        "t": k.source_topic,
        "p": k.position.value,
        "ts": c.commit_timestamp_ms,
        "d": k.downstream_offset,
    }
    if c.deleted:
        body["x"] = True
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode("utf-8")) > MAX_METADATA_BYTES:
        raise ValueError(f"checkpoint metadata of {k.group!r} is over {MAX_METADATA_BYTES} bytes")
    return text


def decode_metadata(
    flow: str, group: str, target_topic: str, partition: int, text: str | None
) -> LiveCheckpoint | None:
    """The live checkpoint of ``flow`` a shadow commit's metadata holds; None when it is not one drkit wrote (another
    version, not JSON, fields missing): such a commit says nothing."""
    if not text:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("v") != METADATA_VERSION:
        return None
    try:
        upstream, topic, ts, down = body["c"], body["t"], body["ts"], body["d"]
        position = Position(body["p"])
    except (KeyError, ValueError):
        return None
    ints_ok = isinstance(upstream, int) and isinstance(ts, int) and (down is None or isinstance(down, int))
    if not ints_ok or not isinstance(topic, str):
        return None
    checkpoint = Checkpoint(flow, group, topic, target_topic, partition, upstream, down, position)
    return LiveCheckpoint(checkpoint, ts, body.get("x") is True)


def live_checkpoints(flow: str, group: str, offsets: Iterable[CommittedOffset]) -> list[LiveCheckpoint]:
    """The live checkpoints of ``group`` in ``flow`` from its shadow group's committed offsets (``offsets``)."""
    out = []
    for o in offsets:
        live = decode_metadata(flow, group, o.topic, o.partition, o.metadata)
        if live is not None:
            out.append(live)
    return out


# -- which commits are kept, coalesced ----------------------------------------------------------------------


@dataclass
class GroupChange:
    """What changed of one group since the last write: ``deleted`` when the group was deleted first (its
    shadow group goes), then the newest record per (source topic, partition), None for a deleted offset."""

    deleted: bool = False
    partitions: dict[TopicPartition, tuple[int, int] | None] = field(default_factory=dict)


class PendingCommits:
    """The selected groups' changes since the last write, coalesced per group and partition in log order."""

    def __init__(self, keep_group: Callable[[str], bool], keep_topic: Callable[[str], bool]) -> None:
        self._keep_group = keep_group
        self._keep_topic = keep_topic
        self._changes: dict[str, GroupChange] = {}

    def note(self, record: GroupRecord) -> None:
        """Keep ``record`` (the next one in log order) if it concerns a selected group and topic."""
        if not record.group or is_shadow(record.group) or not self._keep_group(record.group):
            return
        if record.kind is RecordKind.GROUP_TOMBSTONE:
            self._changes[record.group] = GroupChange(deleted=True)
            return
        if record.kind not in (RecordKind.OFFSET_COMMIT, RecordKind.OFFSET_TOMBSTONE):
            return
        if not self._keep_topic(record.topic):
            return
        change = self._changes.setdefault(record.group, GroupChange())
        value = (record.offset, record.commit_timestamp) if record.kind is RecordKind.OFFSET_COMMIT else None
        change.partitions[(record.topic, record.partition)] = value

    def drain(self, skip: Collection[str] = ()) -> dict[str, GroupChange]:
        """Every pending change, by group, but those of the groups in ``skip`` (a write of theirs is in flight:
        they stay pending, to be written after it)."""
        if not skip:
            changes, self._changes = self._changes, {}
            return changes
        changes = {g: c for g, c in self._changes.items() if g not in skip}
        self._changes = {g: c for g, c in self._changes.items() if g in skip}
        return changes

    def requeue(self, group: str, change: GroupChange) -> None:
        """Put back a change whose write failed, under anything noted since (which is newer in log order)."""
        newer = self._changes.get(group)
        if newer is None:
            self._changes[group] = change
        elif not newer.deleted:
            newer.deleted = change.deleted
            newer.partitions = {**change.partitions, **newer.partitions}

    def __len__(self) -> int:
        return len(self._changes)


@dataclass(frozen=True)
class ShadowWrite:
    """One follow interval's writes: shadow groups to delete first, then per shadow group the offsets and
    metadata to commit by (target topic, partition); ``commit_timestamps`` per shadow group the source commit
    times of what it commits (the checkpoint age is measured from them)."""

    deletes: tuple[str, ...]
    commits: dict[str, dict[TopicPartition, tuple[int, str]]]
    commit_timestamps: dict[str, tuple[int, ...]]


def shadow_write(
    flow: str,
    changes: Mapping[str, GroupChange],
    translated: Mapping[str, list[Checkpoint]],
    timestamps: Mapping[tuple[str, str, int], int],
    topic_map: Mapping[str, str],
) -> ShadowWrite:
    """The writes for ``changes``: ``translated`` holds each group's changed commits as checkpoints (translated
    by drkit.core.checkpoints.plan_checkpoints), ``timestamps`` their source commit times by (group, topic,
    partition). A partition nothing of which is mirrored is left out (the target may not have it yet)."""
    deletes = tuple(sorted(shadow_group(flow, g) for g, ch in changes.items() if ch.deleted))
    commits: dict[str, dict[TopicPartition, tuple[int, str]]] = {}
    stamps: dict[str, tuple[int, ...]] = {}
    for group, change in sorted(changes.items()):
        name = shadow_group(flow, group)
        out: dict[TopicPartition, tuple[int, str]] = {}
        times: list[int] = []
        for c in translated.get(group, []):
            if c.downstream_offset is None:
                continue
            ts = timestamps[c.key]
            out[(c.target_topic, c.partition)] = (c.downstream_offset, encode_metadata(LiveCheckpoint(c, ts)))
            times.append(ts)
        for (topic, partition), value in sorted(change.partitions.items()):
            target = topic_map.get(topic)
            if value is None and target is not None:
                marker = Checkpoint(flow, group, topic, target, partition, -1, None, Position.UNMIRRORED)
                gone = LiveCheckpoint(marker, -1, deleted=True)
                out[(target, partition)] = (DELETED_OFFSET, encode_metadata(gone))
        if out:
            commits[name] = out
            stamps[name] = tuple(times)
    return ShadowWrite(deletes, commits, stamps)


# -- which checkpoint failover uses ------------------------------------------------------------------------------


def newest(
    recorded: RecordedCheckpoint | None, live: LiveCheckpoint | None, confirmed_at_ms: int | None = None
) -> RecordedCheckpoint | None:
    """The newer of the ``checkpoints`` table's row and the live checkpoint of one partition (module invariant):
    the live one only when its source commit is later than the row and the translator's confirmation of it
    (``confirmed_at_ms``: the last run that read the group's offsets and found the row current), and it is not
    a deletion marker (a deleted offset falls back to the row, as a deleted group does)."""
    if live is None or live.deleted:
        return recorded
    if recorded is None:
        return live.recorded
    known = max(recorded.checkpointed_at_ms, confirmed_at_ms or 0)
    if live.commit_timestamp_ms > known and live.checkpoint.upstream_offset != recorded.checkpoint.upstream_offset:
        return live.recorded
    return recorded


def merge_newest(
    recorded: Iterable[RecordedCheckpoint],
    live: Iterable[LiveCheckpoint],
    confirmed_at: Callable[[str], int | None],
) -> list[RecordedCheckpoint]:
    """Per (group, source topic, partition), :func:`newest` of the rows and the live checkpoints; ordered by key."""
    rows = {r.checkpoint.key: r for r in recorded}
    lives = {c.checkpoint.key: c for c in live}
    out = []
    for key in sorted(set(rows) | set(lives)):
        chosen = newest(rows.get(key), lives.get(key), confirmed_at(key[0]))
        if chosen is not None:
            out.append(chosen)
    return out
