"""Checkpoint planning: the rows recorded, the findings reported, checked by example and by property."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.checkpoints import (
    NO_OFFSET,
    Checkpoint,
    CheckpointPlan,
    CommittedOffset,
    Finding,
    FindingKind,
    plan_checkpoints,
    retranslate,
)
from drkit.core.offsets import SyncRange, ranges_from_pairs
from drkit.core.translate import Position, SyncIndex

FLOW = "A->B"
TOPIC_MAP = {"orders": "A.orders", "payments": "A.payments"}
# orders/0: upstream 10..14 -> 100..104, gap, 20..24 -> 110..114 (as in test_translate.py)
INDEXES = {
    ("orders", 0): SyncIndex([SyncRange(10, 14, 100, 104), SyncRange(20, 24, 110, 114)]),
    ("orders", 1): SyncIndex([SyncRange(0, 9, 0, 9)]),
}


def offsets(group: str, *items: tuple[str, int, int] | tuple[str, int, int, str]) -> list[CommittedOffset]:
    """A group's committed offsets from (topic, partition, offset[, metadata]) tuples."""
    return [CommittedOffset(group, *item) for item in items]


def plan(committed: dict[str, list[CommittedOffset]], previous: Iterable[Checkpoint] = ()) -> CheckpointPlan:
    return plan_checkpoints(FLOW, committed, TOPIC_MAP, INDEXES, {c.key: c for c in previous})


def kinds(p: CheckpointPlan) -> list[tuple[FindingKind, str, str | None, int | None]]:
    return [(f.kind, f.group, f.topic, f.partition) for f in p.findings]


def _order(k: tuple[FindingKind, str, str | None, int | None]) -> tuple[str, str, str, int]:
    return (k[0].value, k[1], k[2] or "", -1 if k[3] is None else k[3])


def only(p: CheckpointPlan) -> Checkpoint:
    assert len(p.current) == 1
    return p.current[0]


# --------------------------------------------------------------------------- translation and positions


def test_mirrored_offset_has_no_finding() -> None:
    p = plan({"g": offsets("g", ("orders", 0, 12, "meta"))})
    assert only(p) == Checkpoint(FLOW, "g", "orders", "A.orders", 0, 12, 102, Position.MIRRORED, "meta")
    assert p.findings == []
    assert p.changed == p.current


@pytest.mark.parametrize(
    ("committed", "downstream", "position", "kind"),
    [
        (5, 100, Position.BEFORE_FIRST, FindingKind.BEFORE_FIRST),
        (17, 110, Position.IN_GAP, FindingKind.IN_GAP),
        (25, 115, Position.PAST_END, FindingKind.PROVISIONAL),
        (1000, 115, Position.PAST_END, FindingKind.PROVISIONAL),
    ],
)
def test_position_findings(committed: int, downstream: int, position: Position, kind: FindingKind) -> None:
    p = plan({"g": offsets("g", ("orders", 0, committed))})
    c = only(p)
    assert (c.upstream_offset, c.downstream_offset, c.position) == (committed, downstream, position)
    assert kinds(p) == [(kind, "g", "orders", 0)]
    assert str(committed) in p.findings[0].detail
    assert p.changed == [c]  # recorded although only provisional / in a gap: the upstream offset is kept


@pytest.mark.parametrize("index", [None, SyncIndex([])])
def test_partition_not_mirrored(index: SyncIndex | None) -> None:
    indexes = dict(INDEXES)
    if index is not None:
        indexes[("orders", 7)] = index
    p = plan_checkpoints(FLOW, {"g": offsets("g", ("orders", 7, 42))}, TOPIC_MAP, indexes, {})
    c = only(p)
    assert c.downstream_offset is None
    assert c.position is Position.UNMIRRORED
    assert c.upstream_offset == 42  # kept, so failover can translate it once the partition is mirrored
    assert kinds(p) == [(FindingKind.PARTITION_NOT_MIRRORED, "g", "orders", 7)]
    assert p.changed == [c]


# --------------------------------------------------------------------------- groups and topics


@pytest.mark.parametrize(
    "committed",
    [[], offsets("g", ("orders", 0, NO_OFFSET)), offsets("g", ("orders", 0, -1), ("orders", 1, NO_OFFSET))],
    ids=["nothing", "offset-invalid", "all-negative"],
)
def test_no_commits(committed: list[CommittedOffset]) -> None:
    p = plan({"g": committed})
    assert p.current == [] and p.changed == []
    assert kinds(p) == [(FindingKind.NO_COMMITS, "g", None, None)]


def test_negative_offsets_of_some_partitions_are_ignored() -> None:
    p = plan({"g": offsets("g", ("orders", 0, NO_OFFSET), ("orders", 1, 3))})
    assert [(c.partition, c.downstream_offset) for c in p.current] == [(1, 3)]
    assert p.findings == []


def test_topic_not_mirrored_reported_once_per_group_and_topic() -> None:
    p = plan(
        {
            "g1": offsets("g1", ("audit", 0, 5), ("audit", 1, 6), ("audit", 2, 7), ("orders", 1, 4), ("zz", 0, 1)),
            "g2": offsets("g2", ("audit", 3, 1)),
        }
    )
    assert [(c.group, c.source_topic, c.partition) for c in p.current] == [("g1", "orders", 1)]
    assert kinds(p) == [
        (FindingKind.TOPIC_NOT_MIRRORED, "g1", "audit", None),
        (FindingKind.TOPIC_NOT_MIRRORED, "g1", "zz", None),
        (FindingKind.TOPIC_NOT_MIRRORED, "g2", "audit", None),
    ]


def test_group_with_only_unmirrored_topics_is_not_no_commits() -> None:
    p = plan({"g": offsets("g", ("audit", 0, 5))})
    assert p.current == []
    assert kinds(p) == [(FindingKind.TOPIC_NOT_MIRRORED, "g", "audit", None)]


def test_target_topic_comes_from_topic_map() -> None:
    p = plan({"g": offsets("g", ("payments", 0, 3))})  # mirrored topic, partition without syncs
    assert only(p).target_topic == "A.payments"
    assert only(p).position is Position.UNMIRRORED


def test_groups_and_partitions_in_stable_order() -> None:
    p = plan(
        {
            "b": offsets("b", ("orders", 1, 2), ("orders", 0, 12)),
            "a": offsets("a", ("orders", 1, 1)),
        }
    )
    assert [c.key for c in p.current] == [("a", "orders", 1), ("b", "orders", 0), ("b", "orders", 1)]


# --------------------------------------------------------------------------- changes against previous


def test_same_offsets_are_not_appended_again() -> None:
    first = plan({"g": offsets("g", ("orders", 0, 12), ("orders", 1, 3))})
    second = plan({"g": offsets("g", ("orders", 0, 12), ("orders", 1, 3))}, first.current)
    assert second.current == first.current
    assert second.changed == []
    assert second.findings == []


def test_only_the_changed_row_is_appended() -> None:
    first = plan({"g": offsets("g", ("orders", 0, 12), ("orders", 1, 3))})
    second = plan({"g": offsets("g", ("orders", 0, 13), ("orders", 1, 3))}, first.current)
    assert [(c.key, c.upstream_offset, c.downstream_offset) for c in second.changed] == [(("g", "orders", 0), 13, 103)]
    assert len(second.current) == 2


def test_metadata_change_is_appended() -> None:
    first = plan({"g": offsets("g", ("orders", 0, 12, "v1"))})
    second = plan({"g": offsets("g", ("orders", 0, 12, "v2"))}, first.current)
    assert [(c.upstream_offset, c.metadata) for c in second.changed] == [(12, "v2")]
    assert second.findings == []


def test_translation_change_with_same_upstream_offset_is_appended() -> None:
    """A provisional checkpoint becomes exact once the mirror catches up: a new row, same upstream."""
    first = plan({"g": offsets("g", ("orders", 0, 25))})
    assert only(first).position is Position.PAST_END
    longer = SyncIndex([SyncRange(10, 14, 100, 104), SyncRange(20, 29, 110, 119)])
    caught_up = {**INDEXES, ("orders", 0): longer}
    second = plan_checkpoints(
        FLOW, {"g": offsets("g", ("orders", 0, 25))}, TOPIC_MAP, caught_up, {c.key: c for c in first.current}
    )
    assert [(c.upstream_offset, c.downstream_offset, c.position) for c in second.changed] == [
        (25, 115, Position.MIRRORED)
    ]


def test_moved_backwards() -> None:
    first = plan({"g": offsets("g", ("orders", 0, 22), ("orders", 1, 5))})
    second = plan({"g": offsets("g", ("orders", 0, 11), ("orders", 1, 5))}, first.current)
    assert kinds(second) == [(FindingKind.MOVED_BACKWARDS, "g", "orders", 0)]
    assert "22" in second.findings[0].detail and "11" in second.findings[0].detail
    assert [(c.upstream_offset, c.downstream_offset) for c in second.changed] == [(11, 101)]


def test_moving_forward_is_not_a_finding() -> None:
    first = plan({"g": offsets("g", ("orders", 0, 11))})
    second = plan({"g": offsets("g", ("orders", 0, 22))}, first.current)
    assert second.findings == []


def test_group_deleted_keeps_nothing_new() -> None:
    first = plan({"gone": offsets("gone", ("orders", 0, 12)), "g": offsets("g", ("orders", 1, 3))})
    second = plan({"g": offsets("g", ("orders", 1, 3))}, first.current)
    assert kinds(second) == [(FindingKind.GROUP_DELETED, "gone", None, None)]
    assert all(c.group != "gone" for c in second.current)
    assert second.changed == []


def test_group_without_commits_any_more_is_not_deleted() -> None:
    first = plan({"g": offsets("g", ("orders", 0, 12))})
    second = plan({"g": offsets("g", ("orders", 0, NO_OFFSET))}, first.current)
    assert kinds(second) == [(FindingKind.NO_COMMITS, "g", None, None)]
    assert second.changed == []


def test_findings_are_plain_data() -> None:
    f = plan({"g": []}).findings[0]
    assert f == Finding(FindingKind.NO_COMMITS, "g", detail="the group has no committed offsets")
    assert FindingKind(f.kind.value) is FindingKind.NO_COMMITS


# --------------------------------------------------------------------------- retranslate


def test_retranslate_with_caught_up_syncs() -> None:
    provisional = only(plan({"g": offsets("g", ("orders", 0, 25, "m"))}))
    assert (provisional.downstream_offset, provisional.position) == (115, Position.PAST_END)
    now = retranslate(provisional, SyncIndex([SyncRange(10, 14, 100, 104), SyncRange(20, 29, 110, 119)]))
    assert now == Checkpoint(FLOW, "g", "orders", "A.orders", 0, 25, 115, Position.MIRRORED, "m")
    later = retranslate(
        provisional, SyncIndex([SyncRange(10, 14, 100, 104), SyncRange(20, 24, 110, 114), SyncRange(26, 30, 120, 124)])
    )
    assert (later.downstream_offset, later.position) == (120, Position.IN_GAP)


def test_retranslate_unmirrored_becomes_translated() -> None:
    c = only(plan({"g": offsets("g", ("payments", 0, 3))}))
    assert c.downstream_offset is None
    now = retranslate(c, SyncIndex([SyncRange(0, 9, 50, 59)]))
    assert (now.upstream_offset, now.downstream_offset, now.position) == (3, 53, Position.MIRRORED)


def test_retranslate_without_index_keeps_the_checkpoint() -> None:
    c = only(plan({"g": offsets("g", ("orders", 0, 25))}))
    assert retranslate(c, None) is c


# --------------------------------------------------------------------------- property: brute force


def ref_downstream(mirrored: dict[int, int], committed: int) -> int | None:
    """The rule, by brute force: smallest mirrored u >= C, else largest downstream + 1, else None."""
    if not mirrored:
        return None
    at_or_after = [u for u in mirrored if u >= committed]
    if at_or_after:
        return mirrored[min(at_or_after)]
    return max(mirrored.values()) + 1


def ref_position(mirrored: dict[int, int], committed: int) -> Position:
    if not mirrored:
        return Position.UNMIRRORED
    if committed in mirrored:
        return Position.MIRRORED
    if committed < min(mirrored):
        return Position.BEFORE_FIRST
    if committed > max(mirrored):
        return Position.PAST_END
    return Position.IN_GAP


@st.composite
def partition_mirrors(draw: st.DrawFn) -> dict[int, int]:
    """upstream -> downstream of one partition: a log with gaps, a mirrored subset, increasing targets."""
    length = draw(st.integers(0, 40))
    log: list[int] = []
    u = draw(st.integers(0, 10))
    for _ in range(length):
        log.append(u)
        u += 1 + draw(st.integers(0, 3))  # compaction, transaction markers, aborted records
    keep = draw(st.lists(st.booleans(), min_size=len(log), max_size=len(log)))
    mirrored: dict[int, int] = {}
    d = draw(st.integers(0, 20))
    for offset, kept in zip(log, keep, strict=True):
        if kept:
            mirrored[offset] = d
            d += 1 + draw(st.integers(0, 2))  # target-side gaps (markers of the target's own transactions)
    return mirrored


@given(data=st.data(), partitions=st.lists(partition_mirrors(), min_size=1, max_size=4), n_groups=st.integers(1, 4))
def test_plan_matches_brute_force(data: st.DataObject, partitions: list[dict[int, int]], n_groups: int) -> None:
    indexes = {("orders", p): SyncIndex(ranges_from_pairs(sorted(m.items()))) for p, m in enumerate(partitions)}
    top = max((u for m in partitions for u in m), default=0) + 5
    committed: dict[str, list[CommittedOffset]] = {}
    for g in range(n_groups):
        chosen = data.draw(
            st.lists(st.integers(0, len(partitions) - 1), unique=True, max_size=len(partitions)),
            label=f"partitions of g{g}",
        )
        committed[f"g{g}"] = [
            CommittedOffset(f"g{g}", "orders", p, data.draw(st.integers(0, top), label="C")) for p in chosen
        ]
    p = plan_checkpoints(FLOW, committed, TOPIC_MAP, indexes, {})
    assert len(p.current) == sum(len(v) for v in committed.values())
    by_key = {c.key: c for c in p.current}
    for group, items in committed.items():
        for o in items:
            c = by_key[(group, "orders", o.partition)]
            mirrored = partitions[o.partition]
            assert c.upstream_offset == o.offset
            assert c.downstream_offset == ref_downstream(mirrored, o.offset), (mirrored, o.offset)
            assert c.position is ref_position(mirrored, o.offset)
    assert p.changed == p.current
    position_kind = {
        Position.BEFORE_FIRST: FindingKind.BEFORE_FIRST,
        Position.IN_GAP: FindingKind.IN_GAP,
        Position.PAST_END: FindingKind.PROVISIONAL,
        Position.UNMIRRORED: FindingKind.PARTITION_NOT_MIRRORED,
    }
    expected = [(FindingKind.NO_COMMITS, g, None, None) for g, v in committed.items() if not v]
    expected += [
        (position_kind[c.position], c.group, c.source_topic, c.partition)
        for c in p.current
        if c.position in position_kind
    ]
    assert sorted(kinds(p), key=_order) == sorted(expected, key=_order)


@given(mirrored=partition_mirrors(), committed=st.integers(0, 200))
def test_downstream_is_first_record_at_or_after_commit(mirrored: dict[int, int], committed: int) -> None:
    """Seen from the target: starting at the translation reads exactly the mirrored records >= C."""
    index = SyncIndex(ranges_from_pairs(sorted(mirrored.items())))
    c = plan_checkpoints(
        FLOW, {"g": [CommittedOffset("g", "orders", 0, committed)]}, TOPIC_MAP, {("orders", 0): index}, {}
    ).current[0]
    if c.downstream_offset is None:
        assert not mirrored
        return
    downstream = sorted(mirrored.values())
    upstream_of = {d: u for u, d in mirrored.items()}
    read = [upstream_of[d] for d in downstream[bisect.bisect_left(downstream, c.downstream_offset) :]]
    assert read == [u for u in sorted(mirrored) if u >= committed]
