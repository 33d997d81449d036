"""Consumer groups' commits as the source cluster records them: ``__consumer_offsets`` decoded and folded.

A record of that topic is a versioned key and a versioned value (or a tombstone, value None), both
big-endian with an int16 version first (schemas: apache/kafka group-coordinator, OffsetCommitKey/Value,
GroupMetadataKey). Key versions 0-1 are an offset commit (group, topic, partition), 2 the group's
metadata; 3 and above are the consumer-group and share-group records of KIP-848 and later, which say
nothing about committed offsets and are returned as ``IGNORED`` (the topic gains record types over Kafka
versions: never an error). A group's metadata value is not decoded (only its tombstone matters here).

Invariant of :class:`CommitLog`: after the records of the log are applied in log order, it holds exactly
the latest committed offset of every (group, topic, partition) the log still has: a commit sets it, an
offset tombstone removes it, a group tombstone removes all of that group's offsets (Kafka writes the
offsets' tombstones too, but their order against the group's is not relied on). Applying a record returns
the groups whose committed offsets changed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import StrEnum

#: The topic these records come from (named in errors).
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"

#: Key versions: an offset commit's, and a group metadata record's (schemas' validVersions).
OFFSET_COMMIT_KEY_VERSIONS = frozenset({0, 1})
GROUP_METADATA_KEY_VERSION = 2
#: OffsetCommitValue versions decoded; 4 and above are flexible (compact strings, tagged fields).
OFFSET_COMMIT_VALUE_VERSIONS = frozenset({0, 1, 2, 3, 4})
FIRST_FLEXIBLE_VALUE_VERSION = 4


class RecordKind(StrEnum):
    """What one ``__consumer_offsets`` record says."""

    OFFSET_COMMIT = "offset-commit"
    OFFSET_TOMBSTONE = "offset-tombstone"
    GROUP_METADATA = "group-metadata"
    GROUP_TOMBSTONE = "group-tombstone"
    IGNORED = "ignored"


class MalformedRecord(ValueError):
    """A ``__consumer_offsets`` record whose bytes do not follow its schema (truncated, bad lengths)."""


@dataclass(frozen=True)
class GroupRecord:
    """One decoded record. ``topic``/``partition`` for offset records; ``offset`` and the rest for a commit
    only; ``key_version`` always (the only field that matters for ``IGNORED``). ``leader_epoch`` and
    ``expire_timestamp`` are None where the value version lacks them or holds -1."""

    kind: RecordKind
    key_version: int
    group: str = ""
    topic: str = ""
    partition: int = -1
    offset: int = -1
    leader_epoch: int | None = None
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True)
class Committed:
    """A group's committed offset for one partition, with the time (ms) the coordinator recorded it."""

    offset: int
    commit_timestamp: int


class _Reader:
    """Big-endian reads over one buffer; every short read is a MalformedRecord naming ``where``."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.pos = 0
        self.where = where

    def fail(self, what: str) -> MalformedRecord:
        return MalformedRecord(f"{self.where}: {what} at byte {self.pos} of {len(self.data)}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"truncated (needs {n} bytes)")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise self.fail("unsigned varint longer than 5 bytes")

    def text(self, length: int) -> str:
        if length < 0:
            raise self.fail(f"bad string length {length}")
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("string is not UTF-8") from None

    def string(self) -> str:
        return self.text(self.int16())

    def compact_string(self) -> str:
        return self.text(self.uvarint() - 1)

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} bytes past the record's end")


def where_of(topic: str | None, partition: int | None, offset: int | None) -> str:
    """How an error names the record: topic-partition@offset where the caller knows it."""
    if topic is None:
        return f"{CONSUMER_OFFSETS_TOPIC} record"
    part = "" if partition is None else f"-{partition}"
    at = "" if offset is None else f"@{offset}"
    return f"{topic}{part}{at}"


def decode(
    key: bytes,
    value: bytes | None,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
) -> GroupRecord:
    """One ``__consumer_offsets`` record (``value`` None: a tombstone) as a :class:`GroupRecord`.

    Raises MalformedRecord (naming ``topic``-``partition``@``offset`` when given) if the bytes do not
    follow the schema of their version, or an offset commit's value has a version not decoded here."""
    where = where_of(topic, partition, offset)
    keys = _Reader(key, f"{where} key")
    version = keys.int16()
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        group, key_topic, key_partition = keys.string(), keys.string(), keys.int32()
        keys.end()
        if value is None:
            return GroupRecord(RecordKind.OFFSET_TOMBSTONE, version, group, key_topic, key_partition)
        return _offset_commit(version, group, key_topic, key_partition, _Reader(value, f"{where} value"))
    if version == GROUP_METADATA_KEY_VERSION:
        group = keys.string()
        keys.end()
        kind = RecordKind.GROUP_TOMBSTONE if value is None else RecordKind.GROUP_METADATA
        return GroupRecord(kind, version, group)
    if version < 0:
        raise keys.fail(f"negative key version {version}")
    return GroupRecord(RecordKind.IGNORED, version)


def _offset_commit(key_version: int, group: str, topic: str, partition: int, r: _Reader) -> GroupRecord:
    version = r.int16()
    if version not in OFFSET_COMMIT_VALUE_VERSIONS:
        raise r.fail(f"offset commit value version {version} is not one of 0-4")
    offset = r.int64()
    epoch = r.int32() if version >= 3 else -1
    flexible = version >= FIRST_FLEXIBLE_VALUE_VERSION
    metadata = r.compact_string() if flexible else r.string()
    commit_timestamp = r.int64()
    expire = r.int64() if version == 1 else -1
    if flexible:
        r.skip_tagged_fields()
    r.end()
    return GroupRecord(
        RecordKind.OFFSET_COMMIT,
        key_version,
        group,
        topic,
        partition,
        offset,
        None if epoch == -1 else epoch,
        metadata,
        commit_timestamp,
        None if expire == -1 else expire,
    )


class CommitLog:
    """The latest committed offset per (group, topic, partition), folded from decoded records in log order
    (the module's invariant). Only :meth:`apply` changes it."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[tuple[str, int], Committed]] = {}

    def apply(self, record: GroupRecord) -> frozenset[str]:
        """Fold one record in; the groups whose committed offsets changed (empty or one group)."""
        if record.kind is RecordKind.OFFSET_COMMIT:
            entry = Committed(record.offset, record.commit_timestamp)
            offsets = self._groups.setdefault(record.group, {})
            if offsets.get((record.topic, record.partition)) == entry:
                return frozenset()
            offsets[(record.topic, record.partition)] = entry
            return frozenset({record.group})
        if record.kind is RecordKind.OFFSET_TOMBSTONE:
            offsets = self._groups.get(record.group, {})
            if offsets.pop((record.topic, record.partition), None) is None:
                return frozenset()
            if not offsets:
                del self._groups[record.group]
            return frozenset({record.group})
        if record.kind is RecordKind.GROUP_TOMBSTONE:
            return frozenset({record.group}) if self._groups.pop(record.group, None) else frozenset()
        return frozenset()

    def apply_all(self, records: list[GroupRecord] | tuple[GroupRecord, ...]) -> frozenset[str]:
        """Fold records in order; the groups any of them changed."""
        changed: set[str] = set()
        for record in records:
            changed |= self.apply(record)
        return frozenset(changed)

    def groups(self) -> frozenset[str]:
        """The groups with at least one committed offset."""
        return frozenset(self._groups)

    def offsets(self, group: str) -> dict[tuple[str, int], Committed]:
        """A copy of ``group``'s committed offsets by (topic, partition); empty for an unknown group."""
        return dict(self._groups.get(group, {}))
