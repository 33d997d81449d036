"""Live checkpoints: each source group's newest committed offsets, translated, as one record on the target.

The follower (drkit.translator.follow) reads the source's ``__consumer_offsets`` and appends, per selected source
group that changed, one record to the target's :data:`CHECKPOINT_TOPIC` (compacted, one partition, as MirrorMaker
2's ``<source>.checkpoints.internal``): key :func:`record_key` (the flow and the group), value
:func:`encode_value`, a small versioned JSON of every checkpoint the group holds (per source partition the
translated offset, the upstream offset C, the translation's position and the source commit timestamp); a
tombstone when the group was deleted. The changes of a thousand groups are then one produce request, where a
commit per group (a shadow consumer group each) would take the target a thousand OffsetCommits, and
compaction keeps each key's newest record: failover reads every group's newest checkpoint in one pass of one
partition, bounded by the keys and the part not compacted yet (drkit.kafka.checkpoint_topic).

Invariants:

- A key names one (flow, group): the JSON array of the two (any group name, never ambiguous); a record whose
  key or value is not one drkit wrote (another version, not JSON) says nothing.
- A group's record only moves forward in the source's log order: :class:`PendingCommits` keeps, per group and
  partition, the last record of ``__consumer_offsets`` in log order (a reset to an earlier offset is a newer
  commit and is kept), :class:`LiveState` holds each group's whole current set, and every record carries it
  whole: the newest record of a key is the group's newest state (one partition, an idempotent producer: the
  records are appended in the order they were sent). The offsets are never compared to decide.
- A deleted group (group tombstone) gets a tombstone; a deleted offset (offset tombstone) is left out of the
  group's next record. Either way the live store says nothing of it and failover uses the ``checkpoints``
  table's row, as it always did for a deleted group (its last checkpoint is kept: drkit.core.checkpoints
  ``GROUP_DELETED``).
- :func:`newest` picks, per partition, the newer of the table's row and the live checkpoint by time: the live
  one wins only when its source commit is later than the table's knowledge (its row or the translator's
  confirmation of it). It assumes the source brokers' and drkit's clocks agree within a follow interval.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from drkit.core.checkpoints import Checkpoint, RecordedCheckpoint
from drkit.core.group_commits import GroupRecord, RecordKind
from drkit.core.translate import Position

#: The compacted topic on each target cluster holding its flows' live checkpoints (one partition: one order).
CHECKPOINT_TOPIC = "_drkit.checkpoints"
#: The version of the value's JSON written now (a reader ignores versions it does not know).
VALUE_VERSION = 1

TopicPartition = tuple[str, int]


def record_key(flow: str, group: str) -> bytes:
    """The key of ``group``'s record in ``flow``."""
    return json.dumps([flow, group], separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_key(key: bytes | None) -> tuple[str, str] | None:
    """The (flow, group) a record's key names; None when it is not a key drkit wrote."""
    if not key:
        return None
    try:
        body = json.loads(key)
    except ValueError:
        return None
    if isinstance(body, list) and len(body) == 2 and all(isinstance(x, str) for x in body):
        return body[0], body[1]
    return None


@dataclass(frozen=True)
class LiveCheckpoint:
    """A source group's newest commit of one partition, as the checkpoint topic holds it: the checkpoint, dated
    by its source commit."""

    checkpoint: Checkpoint
    commit_timestamp_ms: int

    @property
    def recorded(self) -> RecordedCheckpoint:
        """As a recorded checkpoint, dated by its source commit."""
        return RecordedCheckpoint(self.checkpoint, self.commit_timestamp_ms)


def encode_value(checkpoints: Iterable[LiveCheckpoint]) -> bytes:
    """A group's record value: compact JSON of its checkpoints, ordered by source topic and partition."""
    entries = [
        {
            "t": c.checkpoint.source_topic,
            "tt": c.checkpoint.target_topic,
            "p": c.checkpoint.partition,
            "c": c.checkpoint.upstream_offset,
            "d": c.checkpoint.downstream_offset,
            "pos": c.checkpoint.position.value,
            "ts": c.commit_timestamp_ms,
        }
        for c in sorted(checkpoints, key=lambda c: (c.checkpoint.source_topic, c.checkpoint.partition))
    ]
    body = {"v": VALUE_VERSION, "cps": entries}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_value(flow: str, group: str, value: bytes | None) -> list[LiveCheckpoint]:
    """The live checkpoints of ``group`` in ``flow`` a record's value holds; none for a tombstone or a value drkit
    did not write (another version, not JSON): such a record says nothing. An entry with a field missing or of
    the wrong type is left out alone."""
    if not value:
        return []
    try:
        body = json.loads(value)
    except ValueError:
        return []
    if not isinstance(body, dict) or body.get("v") != VALUE_VERSION or not isinstance(body.get("cps"), list):
        return []
    out = []
    for e in body["cps"]:
        live = _entry(flow, group, e)
        if live is not None:
            out.append(live)
    return out


def _entry(flow: str, group: str, e: object) -> LiveCheckpoint | None:
    if not isinstance(e, dict):
        return None
    try:
        topic, target, partition, upstream, down, ts = e["t"], e["tt"], e["p"], e["c"], e["d"], e["ts"]
        position = Position(e["pos"])
    except (KeyError, ValueError):
        return None
    ints_ok = all(isinstance(x, int) for x in (partition, upstream, ts)) and (down is None or isinstance(down, int))
    if not ints_ok or not isinstance(topic, str) or not isinstance(target, str):
        return None
    return LiveCheckpoint(Checkpoint(flow, group, topic, target, partition, upstream, down, position), ts)


# -- which commits are kept, coalesced ----------------------------------------------------------------------


@dataclass
class GroupChange:
    """What changed of one group since the last write: ``deleted`` when the group was deleted first, then the
    newest record per (source topic, partition), None for a deleted offset; ``rewrite`` when the group's record
    must be appended again whatever changed (its last append failed)."""

    deleted: bool = False
    partitions: dict[TopicPartition, tuple[int, int] | None] = field(default_factory=dict)
    rewrite: bool = False


class PendingCommits:
    """The selected groups' changes since the last write, coalesced per group and partition in log order."""

    def __init__(self, keep_group: Callable[[str], bool], keep_topic: Callable[[str], bool]) -> None:
        self._keep_group = keep_group
        self._keep_topic = keep_topic
        self._changes: dict[str, GroupChange] = {}

    def note(self, record: GroupRecord) -> None:
        """Keep ``record`` (the next one in log order) if it concerns a selected group and topic."""
        if not record.group or not self._keep_group(record.group):
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

    def drain(self) -> dict[str, GroupChange]:
        """Every pending change, by group."""
        changes, self._changes = self._changes, {}
        return changes

    def requeue(self, group: str, change: GroupChange) -> None:
        """Put back a change that was not written (its translation failed), under anything noted since (which
        is newer in log order)."""
        newer = self._changes.get(group)
        if newer is None:
            self._changes[group] = change
        elif not newer.deleted:
            newer.deleted = change.deleted
            newer.partitions = {**change.partitions, **newer.partitions}
            newer.rewrite = newer.rewrite or change.rewrite

    def rewrite(self, group: str) -> None:
        """Have ``group``'s record appended again at the next write (its last append failed): with its state as it
        is then, which is at least as new as what failed."""
        self._changes.setdefault(group, GroupChange()).rewrite = True

    def __len__(self) -> int:
        return len(self._changes)


@dataclass(frozen=True)
class CheckpointRecord:
    """One record to append: ``group``'s whole live state (``value``; None: a tombstone), and the source commit
    times of the commits it adds (the checkpoint age is measured from them)."""

    group: str
    key: bytes
    value: bytes | None
    commit_timestamps: tuple[int, ...]


class LiveState:
    """Each selected group's live checkpoints of one flow as last appended, whole (the follower's own)."""

    def __init__(self, flow: str) -> None:
        self.flow = flow
        self._groups: dict[str, dict[TopicPartition, LiveCheckpoint]] = {}

    def held(self, group: str) -> list[LiveCheckpoint]:
        """``group``'s live checkpoints as its last record holds them."""
        return list(self._groups.get(group, {}).values())

    def apply(
        self,
        changes: Mapping[str, GroupChange],
        translated: Mapping[str, list[Checkpoint]],
        timestamps: Mapping[tuple[str, str, int], int],
    ) -> list[CheckpointRecord]:
        """Fold ``changes`` in and return the records to append, ordered by group: ``translated`` holds each
        group's changed commits as checkpoints (drkit.core.checkpoints.plan_checkpoints), ``timestamps`` their
        source commit times by (group, topic, partition). A partition whose commit translates to nothing (not
        mirrored yet) keeps what it held (an older commit: re-reads, never a loss). A group is appended when its
        set changed, it was deleted, or it is to be rewritten; an empty set is a tombstone."""
        out = []
        for group, change in sorted(changes.items()):
            before = self._groups.get(group, {})
            after = {} if change.deleted else dict(before)
            for (topic, partition), value in change.partitions.items():
                if value is None:
                    after.pop((topic, partition), None)
            stamps = []
            for c in translated.get(group, []):
                if c.downstream_offset is None:
                    continue
                ts = timestamps[c.key]
                after[(c.source_topic, c.partition)] = LiveCheckpoint(c, ts)
                stamps.append(ts)
            if after == before and not change.deleted and not change.rewrite:
                continue
            if after:
                self._groups[group] = after
            else:
                self._groups.pop(group, None)
            body = encode_value(after.values()) if after else None
            out.append(CheckpointRecord(group, record_key(self.flow, group), body, tuple(stamps)))
        return out


# -- which checkpoint failover uses ------------------------------------------------------------------------------


def newest(
    recorded: RecordedCheckpoint | None, live: LiveCheckpoint | None, confirmed_at_ms: int | None = None
) -> RecordedCheckpoint | None:
    """The newer of the ``checkpoints`` table's row and the live checkpoint of one partition (module invariant):
    the live one only when its source commit is later than the row and the translator's confirmation of it
    (``confirmed_at_ms``: the last run that read the group's offsets and found the row current)."""
    if live is None:
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
