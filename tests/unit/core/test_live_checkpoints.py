"""Live checkpoints: shadow-group names, the commit metadata's round trip, which commits are kept and coalesced,
and which of a Delta row and a live checkpoint failover uses."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.checkpoints import Checkpoint, CommittedOffset, RecordedCheckpoint
from drkit.core.group_commits import GroupRecord, RecordKind
from drkit.core.live_checkpoints import (
    MAX_METADATA_BYTES,
    SHADOW_PREFIX,
    GroupChange,
    LiveCheckpoint,
    PendingCommits,
    decode_metadata,
    encode_metadata,
    is_shadow,
    live_checkpoints,
    merge_newest,
    newest,
    shadow_group,
    shadow_write,
)
from drkit.core.selection import group_selector
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


# -- names ------------------------------------------------------------------------------------------------------


@given(ALIAS, ALIAS, GROUP, GROUP)
def test_a_shadow_name_is_never_a_plain_group_nor_another_pairs(a: str, b: str, group: str, other: str) -> None:
    name = shadow_group(f"{a}->{b}", group)
    assert is_shadow(name) and name.startswith(SHADOW_PREFIX)
    if not other.startswith(SHADOW_PREFIX):
        assert name != other and not is_shadow(other)
    assert shadow_group(f"{a}->{b}", other) != name or other == group


@given(ALIAS, ALIAS, ALIAS, ALIAS, GROUP, GROUP)
def test_two_flow_group_pairs_never_share_a_shadow(a: str, b: str, c: str, d: str, g1: str, g2: str) -> None:
    if (a, b, g1) != (c, d, g2):
        assert shadow_group(f"{a}->{b}", g1) != shadow_group(f"{c}->{d}", g2)


def test_shadow_groups_are_never_selected_for_translation() -> None:
    selector = group_selector([".*"], [])
    assert not selector.matches(shadow_group(FLOW, "billing"))
    assert selector.matches("billing") and selector.matches("drkit_ckpt.x")


# -- metadata ---------------------------------------------------------------------------------------------------

LIVE = st.builds(
    LiveCheckpoint,
    st.builds(
        Checkpoint,
        st.just(FLOW),
        GROUP,
        st.from_regex(r"[A-Za-z0-9._-]{1,249}", fullmatch=True),
        st.just("B.t"),
        st.integers(0, 10_000),
        st.integers(-1, 2**63 - 1),
        st.none() | st.integers(0, 2**63 - 1),
        st.sampled_from(list(Position)),
    ),
    st.integers(-1, 2**50),
    st.booleans(),
)


@given(LIVE)
def test_metadata_round_trips_within_the_broker_limit(live: LiveCheckpoint) -> None:
    text = encode_metadata(live)
    assert len(text.encode()) <= MAX_METADATA_BYTES
    c = live.checkpoint
    assert decode_metadata(c.flow, c.group, c.target_topic, c.partition, text) == live


def test_metadata_not_drkits_says_nothing() -> None:
    for text in (
        None,
        "",
        "x",
        "[]",
        '{"v":2,"c":1}',
        '{"v":1,"c":1}',
        '{"v":1,"c":"1","t":"t","p":"mirrored","ts":1,"d":null}',
    ):
        assert decode_metadata(FLOW, "g", "B.t", 0, text) is None
    assert live_checkpoints(FLOW, "g", [CommittedOffset("g", "B.t", 0, 5, "client metadata")]) == []


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
        commit(shadow_group(FLOW, "g"), "t", 0, 1, 130),
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


def test_a_failed_write_goes_back_under_anything_newer() -> None:
    p = pending()
    p.note(commit("g", "t", 1, 8, 150))
    p.requeue("g", GroupChange(True, {("t", 0): (5, 100), ("t", 1): (7, 110)}))
    p.requeue("h", GroupChange(False, {("t", 0): (1, 90)}))
    assert p.drain() == {
        "g": GroupChange(True, {("t", 0): (5, 100), ("t", 1): (8, 150)}),
        "h": GroupChange(False, {("t", 0): (1, 90)}),
    }


def test_the_write_translates_commits_and_marks_deleted_offsets() -> None:
    changes = {
        "g": GroupChange(False, {("t", 0): (5, 100), ("t", 1): None, ("t", 2): (4, 90)}),
        "h": GroupChange(True, {}),
    }
    translated = {
        "g": [
            Checkpoint(FLOW, "g", "t", "A.t", 0, 5, 50, Position.MIRRORED),
            Checkpoint(FLOW, "g", "t", "A.t", 2, 4, None, Position.UNMIRRORED),  # the target may not have it
        ]
    }
    write = shadow_write(FLOW, changes, translated, {("g", "t", 0): 100, ("g", "t", 2): 90}, {"t": "A.t"})
    assert write.deletes == (shadow_group(FLOW, "h"),)
    offsets = write.commits[shadow_group(FLOW, "g")]
    assert set(offsets) == {("A.t", 0), ("A.t", 1)}
    assert offsets[("A.t", 0)][0] == 50
    assert decode_metadata(FLOW, "g", "A.t", 0, offsets[("A.t", 0)][1]) == LiveCheckpoint(
        Checkpoint(FLOW, "g", "t", "A.t", 0, 5, 50, Position.MIRRORED), 100
    )
    gone = decode_metadata(FLOW, "g", "A.t", 1, offsets[("A.t", 1)][1])
    assert gone is not None and gone.deleted
    assert write.commit_timestamps == {shadow_group(FLOW, "g"): (100,)}


# -- which one failover uses -------------------------------------------------------------------------------------


def row(offset: int, at_ms: int) -> RecordedCheckpoint:
    return RecordedCheckpoint(Checkpoint(FLOW, "g", "t", "A.t", 0, offset, offset * 10, Position.MIRRORED), at_ms)


def live(offset: int, ts: int, deleted: bool = False) -> LiveCheckpoint:
    return LiveCheckpoint(Checkpoint(FLOW, "g", "t", "A.t", 0, offset, offset * 10, Position.MIRRORED), ts, deleted)


def test_the_live_checkpoint_wins_only_when_committed_after_what_delta_knows() -> None:
    assert newest(row(10, 1_000), live(12, 1_500)) == live(12, 1_500).recorded
    assert newest(row(10, 1_000), live(3, 1_500)) == live(3, 1_500).recorded  # a reset: newer
    assert newest(row(12, 2_000), live(10, 1_500)) == row(12, 2_000)  # the follower lagged
    assert newest(row(10, 1_000), live(12, 1_500), confirmed_at_ms=1_600) == row(10, 1_000)
    assert newest(row(10, 1_000), live(10, 1_500)) == row(10, 1_000)  # the same C: the row
    assert newest(None, live(12, 1_500)) == live(12, 1_500).recorded
    assert newest(row(10, 1_000), None) == row(10, 1_000)
    assert newest(None, None) is None


def test_a_deleted_offset_falls_back_to_the_row_never_to_a_live_offset() -> None:
    assert newest(row(10, 1_000), live(12, 1_500, deleted=True)) == row(10, 1_000)
    assert newest(None, live(12, 1_500, deleted=True)) is None


def test_merge_takes_the_newest_per_partition() -> None:
    other = RecordedCheckpoint(Checkpoint(FLOW, "g", "t", "A.t", 1, 7, 70, Position.MIRRORED), 1_000)
    merged = merge_newest([row(10, 1_000), other], [live(12, 1_500)], lambda group: None)
    assert merged == [live(12, 1_500).recorded, other]
