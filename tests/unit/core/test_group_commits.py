"""``__consumer_offsets`` records decoded per schema version, and the fold of them against a dict model."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.group_commits import (
    CommitLog,
    Committed,
    GroupRecord,
    MalformedRecord,
    RecordKind,
    decode,
)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def offset_key(version: int, group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", version) + _string(group) + _string(topic) + struct.pack(">i", partition)


def group_key(group: str) -> bytes:
    return struct.pack(">h", 2) + _string(group)


def offset_value(
    version: int, offset: int, epoch: int, metadata: str, commit_ts: int, expire_ts: int, tags: list[bytes]
) -> bytes:
    """OffsetCommitValue of ``version`` as the schema lays it out (fields absent from the version dropped)."""
    out = struct.pack(">hq", version, offset)
    if version >= 3:
        out += struct.pack(">i", epoch)
    if version >= 4:
        raw = metadata.encode()
        out += _uvarint(len(raw) + 1) + raw
    else:
        out += _string(metadata)
    out += struct.pack(">q", commit_ts)
    if version == 1:
        out += struct.pack(">q", expire_ts)
    if version >= 4:
        out += _uvarint(len(tags))
        for tag, data in enumerate(tags):
            out += _uvarint(tag) + _uvarint(len(data)) + data
    return out


# Hand-computed from the schemas (not the encoder above), so a mistake shared by encoder and decoder shows.
def test_fixed_bytes_of_each_schema() -> None:
    key = bytes.fromhex("000100016700017400000002")
    v3 = bytes.fromhex("0003000000000000000500000007000000000000000003e8")
    record = decode(key, v3)
    assert record == GroupRecord(RecordKind.OFFSET_COMMIT, 1, "g", "t", 2, 5, 7, "", 1000, None)
    v4 = bytes.fromhex("00040000000000000005ffffffff026d00000000000003e8010002abcd")
    record = decode(key, v4)
    assert (record.offset, record.leader_epoch, record.metadata, record.commit_timestamp) == (5, None, "m", 1000)
    v1 = bytes.fromhex("00010000000000000001000000000000000000020000000000000003")
    record = decode(bytes.fromhex("000000016700017400000000"), v1)
    assert (record.key_version, record.offset, record.commit_timestamp, record.expire_timestamp) == (0, 1, 2, 3)
    assert decode(bytes.fromhex("0002000167"), None) == GroupRecord(RecordKind.GROUP_TOMBSTONE, 2, "g")
    assert decode(bytes.fromhex("0002000167"), b"\x00\x03anything").kind is RecordKind.GROUP_METADATA
    assert decode(key, None) == GroupRecord(RecordKind.OFFSET_TOMBSTONE, 1, "g", "t", 2)


@pytest.mark.parametrize("key_version", [3, 4, 5, 8, 10, 15, 99])
def test_other_key_versions_are_ignored(key_version: int) -> None:
    record = decode(struct.pack(">h", key_version) + _string("group") + b"\x01\x02", b"\x00\x00whatever")
    assert record == GroupRecord(RecordKind.IGNORED, key_version)


names = st.text(max_size=12)


@given(
    st.sampled_from([0, 1]),
    st.integers(0, 4),
    names,
    names,
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**31 - 1),
    names,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-1, 2**63 - 1),
    st.lists(st.binary(max_size=5), max_size=3),
)
def test_round_trip_every_version(
    key_version: int,
    value_version: int,
    group: str,
    topic: str,
    partition: int,
    offset: int,
    epoch: int,
    metadata: str,
    commit_ts: int,
    expire_ts: int,
    tags: list[bytes],
) -> None:
    value = offset_value(value_version, offset, epoch, metadata, commit_ts, expire_ts, tags)
    record = decode(offset_key(key_version, group, topic, partition), value)
    has_epoch = value_version >= 3 and epoch != -1
    has_expire = value_version == 1 and expire_ts != -1
    assert record == GroupRecord(
        RecordKind.OFFSET_COMMIT,
        key_version,
        group,
        topic,
        partition,
        offset,
        epoch if has_epoch else None,
        metadata,
        commit_ts,
        expire_ts if has_expire else None,
    )


@given(names)
def test_group_key_round_trip(group: str) -> None:
    assert decode(group_key(group), None) == GroupRecord(RecordKind.GROUP_TOMBSTONE, 2, group)


@given(st.integers(0, 4), st.data())
def test_truncated_bytes_raise(value_version: int, data: st.DataObject) -> None:
    key = offset_key(1, "grp", "topic", 3)
    value = offset_value(value_version, 42, 1, "meta", 7, 8, [b"x"])
    cut_key = data.draw(st.booleans())
    whole = key if cut_key else value
    cut = data.draw(st.integers(0, len(whole) - 1))
    with pytest.raises(MalformedRecord, match="__consumer_offsets-4@17"):
        if cut_key:
            decode(key[:cut], value, "__consumer_offsets", 4, 17)
        else:
            decode(key, value[:cut], "__consumer_offsets", 4, 17)


def test_bad_lengths_and_versions_raise() -> None:
    key = offset_key(1, "g", "t", 0)
    with pytest.raises(MalformedRecord, match="bad string length"):
        decode(struct.pack(">hh", 1, -1), None)
    with pytest.raises(MalformedRecord, match="past the record's end"):
        decode(key + b"\x00", None)
    with pytest.raises(MalformedRecord, match="version 5"):
        decode(key, struct.pack(">hq", 5, 1) + b"\x00" * 30)
    with pytest.raises(MalformedRecord, match="negative key version"):
        decode(struct.pack(">h", -1), None)


GROUPS = ["a", "b", "c"]
PARTS = [("t", 0), ("t", 1), ("u", 0)]

events = st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(GROUPS), st.sampled_from(PARTS), st.integers(0, 5)),
    st.tuples(st.just("drop"), st.sampled_from(GROUPS), st.sampled_from(PARTS), st.just(0)),
    st.tuples(st.just("delete"), st.sampled_from(GROUPS), st.just(("t", 0)), st.just(0)),
    st.tuples(st.just("other"), st.sampled_from(GROUPS), st.just(("t", 0)), st.just(0)),
)


def _record(event: tuple[str, str, tuple[str, int], int], ts: int) -> tuple[bytes, bytes | None]:
    kind, group, (topic, partition), offset = event
    if kind == "commit":
        return offset_key(1, group, topic, partition), offset_value(ts % 5, offset, -1, "", ts, -1, [])
    if kind == "drop":
        return offset_key(1, group, topic, partition), None
    if kind == "delete":
        return group_key(group), None
    return struct.pack(">h", 3) + _string(group), b"\x00\x00"


@given(st.lists(events, max_size=40))
def test_fold_matches_a_dict_model(sequence: list[tuple[str, str, tuple[str, int], int]]) -> None:
    log = CommitLog()
    model: dict[tuple[str, str, int], Committed] = {}
    for ts, event in enumerate(sequence):
        before = dict(model)
        kind, group, (topic, partition), offset = event
        if kind == "commit":
            model[(group, topic, partition)] = Committed(offset, ts)
        elif kind == "drop":
            model.pop((group, topic, partition), None)
        elif kind == "delete":
            model = {k: v for k, v in model.items() if k[0] != group}
        changed = log.apply(decode(*_record(event, ts)))
        expected_changed = {k[0] for k in set(before) | set(model) if before.get(k) != model.get(k)}
        assert changed == expected_changed
        for g in GROUPS:
            assert log.offsets(g) == {(k[1], k[2]): v for k, v in model.items() if k[0] == g}
        assert log.groups() == {k[0] for k in model}
