"""Live checkpoints: the records' keys and values, which commits are kept and coalesced, what each record holds
(a group's whole state, in log order), and which of a Delta row and a live checkpoint failover uses."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.checkpoints import Checkpoint, RecordedCheckpoint
from drkit.core.group_commits import GroupRecord, RecordKind
from drkit.core.live_checkpoints import (
    GroupChange,
    LiveCheckpoint,
    LiveState,
    PendingCommits,
    decode_value,
    encode_value,
    merge_newest,
    newest,
    parse_key,
    record_key,
)
from drkit.core.translate import Position

FLOW = "A->B"
ALIAS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,8}", fullmatch=True)
GROUP = st.text(min_size=1, max_size=30)


def commit(group: str, topic: str, partition: int, offset: int, ts: int) -> GroupRecord:
    return GroupRecord(RecordKind.OFFSET_COMMIT, 1, group, topic, partition, offset, commit_timestamp=ts)


def offset_tombstone(group: str, topic: str, partition: int) -> GroupRecord:
    return GroupRecord(RecordKind.OFFSET_TOMBSTONE, 1, group, topic, partition)


def group_tombstone(group: str) -> GroupRecord:
    return GroupRecord(RecordKind.GROUP_TOMBSTONE, 2, group)


# -- keys and values --------------------------------------------------------------------------------------------


@given(ALIAS, ALIAS, GROUP, ALIAS, ALIAS, GROUP)
def test_a_key_names_one_flow_and_group(a: str, b: str, g1: str, c: str, d: str, g2: str) -> None:
    key = record_key(f"{a}->{b}", g1)
    assert parse_key(key) == (f"{a}->{b}", g1)
    if (a, b, g1) != (c, d, g2):
        assert record_key(f"{c}->{d}", g2) != key


def test_keys_not_drkits_say_nothing() -> None:
    for key in (None, b"", b"x", b"[]", b'["A->B"]', b'["A->B",1]', b'{"f":"A->B"}', b"\xff"):
        assert parse_key(key) is None


def checkpoint(group: str, topic: str, partition: int, c: int, d: int | None, position: Position) -> Checkpoint:
    return Checkpoint(FLOW, group, topic, f"A.{topic}", partition, c, d, position)


LIVE = st.builds(
    LiveCheckpoint,
    st.builds(
        checkpoint,
        st.just("g"),
        st.from_regex(r"[A-Za-z0-9._-]{1,249}", fullmatch=True),
        st.integers(0, 10_000),
        st.integers(-1, 2**63 - 1),
        st.none() | st.integers(0, 2**63 - 1),
        st.sampled_from(list(Position)),
    ),
    st.integers(-1, 2**50),
)


@given(st.lists(LIVE, max_size=20, unique_by=lambda c: (c.checkpoint.source_topic, c.checkpoint.partition)))
def test_a_value_round_trips(lives: list[LiveCheckpoint]) -> None:
    decoded = decode_value(FLOW, "g", encode_value(lives))
    key = lambda c: (c.checkpoint.source_topic, c.checkpoint.partition)  # noqa: E731
    assert decoded == sorted(lives, key=key)


def test_values_not_drkits_say_nothing_and_a_bad_entry_is_left_out_alone() -> None:
    for value in (None, b"", b"x", b"[]", b'{"v":2,"cps":[]}', b'{"v":1}', b'{"v":1,"cps":{}}'):
        assert decode_value(FLOW, "g", value) == []
    good = {"t": "t", "tt": "A.t", "p": 0, "c": 5, "d": 50, "pos": "mirrored", "ts": 100}
    bad = [{**good, "c": "5"}, {**good, "pos": "nowhere"}, {"t": "t"}, 7, {**good, "d": "x"}]
    value = json.dumps({"v": 1, "cps": [*bad, good]}).encode()
    assert decode_value(FLOW, "g", value) == [LiveCheckpoint(checkpoint("g", "t", 0, 5, 50, Position.MIRRORED), 100)]


# -- what is kept, coalesced -------------------------------------------------------------------------------------


def pending() -> PendingCommits:
    return PendingCommits(lambda g: g != "skipped", lambda t: t != "other")


def test_only_selected_groups_and_topics_are_kept_and_coalesced_to_the_last_in_log_order() -> None:
    p = pending()
    for record in (
        commit("g", "t", 0, 5, 100),
        commit("g", "t", 0, 9, 110),
        commit("g", "t", 0, 3, 120),  # a reset to earlier: newer in log order, kept
        commit("g", "t", 1, 7, 115),
        commit("g", "other", 0, 1, 130),
        commit("skipped", "t", 0, 1, 130),
        GroupRecord(RecordKind.GROUP_METADATA, 2, "g"),
    ):
        p.note(record)
    changes = p.drain()
    assert changes == {"g": GroupChange(False, {("t", 0): (3, 120), ("t", 1): (7, 115)})}
    assert p.drain() == {}


def test_deletions_are_kept_and_a_commit_after_a_group_deletion_follows_it() -> None:
    p = pending()
    p.note(commit("g", "t", 0, 5, 100))
    p.note(offset_tombstone("g", "t", 0))
    p.note(commit("h", "t", 0, 5, 100))
    p.note(group_tombstone("h"))
    p.note(commit("h", "t", 1, 2, 140))
    assert p.drain() == {"g": GroupChange(False, {("t", 0): None}), "h": GroupChange(True, {("t", 1): (2, 140)})}


def test_a_failed_write_goes_back_under_anything_newer_and_a_rewrite_keeps_what_is_pending() -> None:
    p = pending()
    p.note(commit("g", "t", 1, 8, 150))
    p.requeue("g", GroupChange(True, {("t", 0): (5, 100), ("t", 1): (7, 110)}))
    p.requeue("h", GroupChange(False, {("t", 0): (1, 90)}))
    p.rewrite("h")
    p.rewrite("k")
    assert p.drain() == {
        "g": GroupChange(True, {("t", 0): (5, 100), ("t", 1): (8, 150)}),
        "h": GroupChange(False, {("t", 0): (1, 90)}, rewrite=True),
        "k": GroupChange(rewrite=True),
    }


def decoded(record_value: bytes | None, group: str = "g") -> list[LiveCheckpoint]:
    return decode_value(FLOW, group, record_value)


def test_each_record_holds_the_groups_whole_state_and_a_deletion_is_a_tombstone() -> None:
    state = LiveState(FLOW)
    c0 = checkpoint("g", "t", 0, 5, 50, Position.MIRRORED)
    c1 = checkpoint("g", "t", 1, 7, 70, Position.MIRRORED)
    (first,) = state.apply(
        {"g": GroupChange(False, {("t", 0): (5, 100), ("t", 1): (7, 90)})},
        {"g": [c0, c1]},
        {("g", "t", 0): 100, ("g", "t", 1): 90},
    )
    assert first.key == record_key(FLOW, "g") and first.commit_timestamps == (100, 90)
    assert decoded(first.value) == [LiveCheckpoint(c0, 100), LiveCheckpoint(c1, 90)]
    # One partition changes: the record still carries both.
    c0b = checkpoint("g", "t", 0, 9, 90, Position.MIRRORED)
    (second,) = state.apply({"g": GroupChange(False, {("t", 0): (9, 120)})}, {"g": [c0b]}, {("g", "t", 0): 120})
    assert decoded(second.value) == [LiveCheckpoint(c0b, 120), LiveCheckpoint(c1, 90)]
    assert second.commit_timestamps == (120,)
    # A deleted offset is left out of the next record; the last one gone is a tombstone.
    (third,) = state.apply({"g": GroupChange(False, {("t", 1): None})}, {}, {})
    assert decoded(third.value) == [LiveCheckpoint(c0b, 120)]
    (fourth,) = state.apply({"g": GroupChange(False, {("t", 0): None})}, {}, {})
    assert fourth.value is None and state.held("g") == []


def test_a_group_deletion_then_a_commit_holds_only_the_commit() -> None:
    state = LiveState(FLOW)
    c0 = checkpoint("g", "t", 0, 5, 50, Position.MIRRORED)
    c1 = checkpoint("g", "t", 1, 2, 20, Position.MIRRORED)
    state.apply({"g": GroupChange(False, {("t", 0): (5, 100)})}, {"g": [c0]}, {("g", "t", 0): 100})
    (record,) = state.apply({"g": GroupChange(True, {("t", 1): (2, 140)})}, {"g": [c1]}, {("g", "t", 1): 140})
    assert decoded(record.value) == [LiveCheckpoint(c1, 140)]
    # A group never held, deleted: a tombstone still (a previous follower may have appended it).
    (gone,) = state.apply({"h": GroupChange(True)}, {}, {})
    assert gone.value is None and gone.group == "h"


def test_an_untranslatable_commit_keeps_what_was_held_and_nothing_new_appends_nothing() -> None:
    state = LiveState(FLOW)
    c0 = checkpoint("g", "t", 0, 5, 50, Position.MIRRORED)
    state.apply({"g": GroupChange(False, {("t", 0): (5, 100)})}, {"g": [c0]}, {("g", "t", 0): 100})
    later = checkpoint("g", "t", 0, 9, None, Position.UNMIRRORED)  # the target may not have it yet
    assert state.apply({"g": GroupChange(False, {("t", 0): (9, 130)})}, {"g": [later]}, {("g", "t", 0): 130}) == []
    assert state.held("g") == [LiveCheckpoint(c0, 100)]
    # Nothing held, nothing translatable: no record at all (no tombstone for what never was).
    assert state.apply({"h": GroupChange(False, {("t", 0): (1, 1)})}, {}, {}) == []


def test_a_rewrite_appends_the_state_as_it_is_then() -> None:
    state = LiveState(FLOW)
    c0 = checkpoint("g", "t", 0, 5, 50, Position.MIRRORED)
    state.apply({"g": GroupChange(False, {("t", 0): (5, 100)})}, {"g": [c0]}, {("g", "t", 0): 100})
    (again,) = state.apply({"g": GroupChange(rewrite=True)}, {}, {})
    assert decoded(again.value) == [LiveCheckpoint(c0, 100)] and again.commit_timestamps == ()
    (gone,) = state.apply({"h": GroupChange(rewrite=True)}, {}, {})  # a tombstone whose append failed
    assert gone.value is None


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["commit", "offset-deleted", "group-deleted"]), st.integers(0, 2), st.integers(0, 99)
        ),
        max_size=40,
    ),
    st.lists(st.integers(1, 5), max_size=10),
)
def test_the_last_record_always_holds_the_log_s_newest_commit_of_each_partition(
    ops: list[tuple[str, int, int]], cuts: list[int]
) -> None:
    """Whatever the writes' boundaries, the newest record of the key holds, per partition, the newest commit
    in log order since the group's last deletion (every commit here translates: C + 1000)."""
    pending, state = PendingCommits(lambda g: True, lambda t: True), LiveState(FLOW)
    truth: dict[int, tuple[int, int]] = {}
    last: bytes | None = None
    boundaries = iter(cuts)
    until_write = next(boundaries, 3)

    def write() -> None:
        nonlocal last
        changes = pending.drain()
        translated: dict[str, list[Checkpoint]] = {}
        stamps = {}
        for g, ch in changes.items():
            for (t, p), v in ch.partitions.items():
                if v is not None:
                    translated.setdefault(g, []).append(checkpoint(g, t, p, v[0], v[0] + 1000, Position.MIRRORED))
                    stamps[(g, t, p)] = v[1]
        for r in state.apply(changes, translated, stamps):
            last = r.value

    for n, (op, partition, offset) in enumerate(ops):
        if op == "commit":
            pending.note(commit("g", "t", partition, offset, n))
            truth[partition] = (offset, n)
        elif op == "offset-deleted":
            pending.note(offset_tombstone("g", "t", partition))
            truth.pop(partition, None)
        else:
            pending.note(group_tombstone("g"))
            truth.clear()
        until_write -= 1
        if until_write == 0:
            write()
            until_write = next(boundaries, 3)
    write()
    held = {c.checkpoint.partition: (c.checkpoint.upstream_offset, c.commit_timestamp_ms) for c in decoded(last)}
    assert held == truth


# -- which one failover uses -------------------------------------------------------------------------------------


def row(offset: int, at_ms: int) -> RecordedCheckpoint:
    return RecordedCheckpoint(Checkpoint(FLOW, "g", "t", "A.t", 0, offset, offset * 10, Position.MIRRORED), at_ms)


def live(offset: int, ts: int) -> LiveCheckpoint:
    return LiveCheckpoint(Checkpoint(FLOW, "g", "t", "A.t", 0, offset, offset * 10, Position.MIRRORED), ts)


def test_the_live_checkpoint_wins_only_when_committed_after_what_delta_knows() -> None:
    assert newest(row(10, 1_000), live(12, 1_500)) == live(12, 1_500).recorded
    assert newest(row(10, 1_000), live(3, 1_500)) == live(3, 1_500).recorded  # a reset: newer
    assert newest(row(12, 2_000), live(10, 1_500)) == row(12, 2_000)  # the follower lagged
    assert newest(row(10, 1_000), live(12, 1_500), confirmed_at_ms=1_600) == row(10, 1_000)
    assert newest(row(10, 1_000), live(10, 1_500)) == row(10, 1_000)  # the same C: the row
    assert newest(None, live(12, 1_500)) == live(12, 1_500).recorded
    assert newest(row(10, 1_000), None) == row(10, 1_000)
    assert newest(None, None) is None


def test_merge_takes_the_newest_per_partition() -> None:
    other = RecordedCheckpoint(Checkpoint(FLOW, "g", "t", "A.t", 1, 7, 70, Position.MIRRORED), 1_000)
    merged = merge_newest([row(10, 1_000), other], [live(12, 1_500)], lambda group: None)
    assert merged == [live(12, 1_500).recorded, other]
