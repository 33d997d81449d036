"""The pure rules of a truthful apply: how it ended (from what reads back), which of two applies on a
group may commit (the lease), which plans the destination has moved under, and the trail's folding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.audit import Action, OperationRecord, OperationStatus, fold, to_complete
from drkit.core.lease import LEASE_SECONDS, Intent, decide_lease, open_intents
from drkit.core.outcome import decide_apply, drifted
from drkit.core.plan import Move, Plan
from drkit.core.translate import Position

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NOW_MS = T0.timestamp() * 1000
PLANNED = {"g1": {("t", 0): 10, ("t", 1): 20}, "g2": {("t", 0): 5}}


@pytest.mark.parametrize(
    "held, errors, stopped, status",
    [
        (PLANNED, {}, False, OperationStatus.APPLIED),
        (PLANNED, {}, True, OperationStatus.APPLIED),  # stopped after the last commit: nothing is missing
        ({"g1": PLANNED["g1"]}, {"g2": "active members"}, False, OperationStatus.PARTIAL),
        ({"g1": PLANNED["g1"]}, {}, True, OperationStatus.INTERRUPTED),
        ({}, {}, True, OperationStatus.INTERRUPTED),
        ({"g1": {("t", 0): 9}}, {"g1": "refused", "g2": "refused"}, False, OperationStatus.FAILED),
    ],
)
def test_the_outcome_is_what_reads_back(
    held: dict[str, dict[tuple[str, int], int]], errors: dict[str, str], stopped: bool, status: OperationStatus
) -> None:
    outcome = decide_apply(PLANNED, held, errors, stopped)
    assert outcome.status is status
    assert outcome.errors == errors


def test_the_outcome_names_every_partition_committed_and_not() -> None:
    outcome = decide_apply(PLANNED, {"g1": {("t", 0): 10, ("t", 1): 19}}, {}, True)
    assert outcome.committed == {"g1": {"t/0": 10}}
    assert outcome.not_committed == {
        "g1": {"t/1": {"planned": 20, "held": 19}},
        "g2": {"t/0": {"planned": 5, "held": None}},
    }
    assert outcome.counts == (1, 3)


offsets = st.dictionaries(
    st.sampled_from(["g1", "g2", "g3"]),
    st.dictionaries(st.tuples(st.just("t"), st.integers(0, 3)), st.integers(0, 5), max_size=4),
    max_size=3,
)


@given(offsets, offsets, st.booleans())
def test_every_planned_partition_is_committed_or_not_never_both(
    planned: dict[str, dict[tuple[str, int], int]], held: dict[str, dict[tuple[str, int], int]], stopped: bool
) -> None:
    outcome = decide_apply(planned, held, {}, stopped)
    done, total = outcome.counts
    assert total == sum(len(v) for v in planned.values())
    for group, parts in planned.items():
        for (t, p), want in parts.items():
            key = f"{t}/{p}"
            in_done = key in outcome.committed.get(group, {})
            assert in_done != (key in outcome.not_committed.get(group, {}))
            assert in_done == (held.get(group, {}).get((t, p)) == want)
    assert (outcome.status is OperationStatus.APPLIED) == (done == total)


def _move(group: str, current: int | None, new: int | None) -> Move:
    return Move(group, "t", "A.t", 0, 0, current, new, Position.MIRRORED)


def test_a_plan_drifts_when_the_destination_moved_since_it_was_made() -> None:
    plan = Plan(Action.FAILOVER, "A->B", "B", (_move("g1", 3, 10), _move("g2", None, 7), _move("g3", 1, None)))
    assert drifted(plan, {"g1": {("A.t", 0): 3}, "g2": {}}) == []
    assert drifted(plan, {"g1": {("A.t", 0): 10}, "g2": {("A.t", 0): 7}}) == []  # already where planned
    assert drifted(plan, {"g1": {("A.t", 0): 12}, "g2": {}, "g3": {("A.t", 0): 9}}) == ["group g1 A.t/0: 3 -> 12"]


def _intent(id: str, groups: set[str], version: int | None, age_s: float = 1.0) -> Intent:
    return Intent(id, "failover", "A->B", frozenset(groups), "u", "h", NOW_MS - age_s * 1000, version)


def test_the_intent_committed_first_holds_the_group() -> None:
    first, second = _intent("a", {"g"}, 4), _intent("b", {"g", "h"}, 5)
    assert decide_lease("a", [first, second], NOW_MS).granted
    refused = decide_lease("b", [first, second], NOW_MS)
    assert (refused.granted, refused.holder, refused.group) == (False, first, "g")
    assert "group g is being moved by failover A->B (operation a, u@h), started first" in refused.refusal()


def test_other_groups_do_not_conflict_and_an_unknown_version_is_older() -> None:
    assert decide_lease("b", [_intent("a", {"x"}, 4), _intent("b", {"g"}, 5)], NOW_MS).granted
    assert not decide_lease("b", [_intent("a", {"g"}, None), _intent("b", {"g"}, 5)], NOW_MS).granted


def test_a_stale_intent_is_reported_not_waited_for() -> None:
    old = _intent("a", {"g"}, 1, age_s=LEASE_SECONDS + 1)
    decision = decide_lease("b", [old, _intent("b", {"g"}, 5)], NOW_MS)
    assert decision.granted and decision.stale == (old,)


def test_the_own_intent_must_be_visible() -> None:
    with pytest.raises(ValueError):
        decide_lease("b", [_intent("a", {"g"}, 1)], NOW_MS)


@given(
    st.lists(
        st.tuples(st.sets(st.sampled_from("ghij"), min_size=1), st.integers(0, 3), st.booleans()),
        min_size=1,
        max_size=6,
    )
)
def test_of_applies_sharing_a_group_at_most_one_is_granted_and_the_first_always_is(
    specs: list[tuple[set[str], int, bool]],
) -> None:
    intents = [
        _intent(f"op{n}", groups, n * 10 + jitter, age_s=LEASE_SECONDS + 5 if stale else 1)
        for n, (groups, jitter, stale) in enumerate(specs)
    ]
    live = [i for i in intents if NOW_MS - i.started_ms <= LEASE_SECONDS * 1000]
    granted = {i.id for i in live if decide_lease(i.id, intents, NOW_MS).granted}
    for a in live:
        for b in live:
            if a.id < b.id and a.groups & b.groups:
                assert not (a.id in granted and b.id in granted)
    if live:
        assert min(live, key=Intent.order).id in granted


def _record(id: str, status: OperationStatus, groups: tuple[str, ...] = ("g",), minutes: int = 0) -> OperationRecord:
    return OperationRecord(
        id,
        Action.FAILOVER,
        "A->B",
        groups,
        None,
        status is OperationStatus.DRY_RUN,
        {},
        {"status": status.value},
        "u",
        "h",
        "0",
        T0 + timedelta(minutes=minutes),
        None if status is OperationStatus.APPLYING else T0,
    )


def test_fold_keeps_the_outcome_of_an_apply_and_the_intent_of_one_without() -> None:
    rows = [
        _record("b", OperationStatus.APPLYING, minutes=2),
        _record("a", OperationStatus.INTERRUPTED, minutes=1),
        _record("a", OperationStatus.APPLYING, minutes=1),
    ]
    assert [(r.id, r.status) for r in fold(rows)] == [("b", "applying"), ("a", "interrupted")]
    assert [i.id for i in open_intents(rows, {"b": 7})] == ["b"]
    assert open_intents(rows, {"b": 7})[0].version == 7


@pytest.mark.parametrize(
    "newest, completes",
    [
        (OperationStatus.INTERRUPTED, "x"),
        (OperationStatus.PARTIAL, "x"),
        (OperationStatus.FAILED, "x"),
        (OperationStatus.APPLYING, "x"),
        (OperationStatus.APPLIED, None),
    ],
)
def test_a_rerun_completes_the_newest_unfinished_apply(newest: OperationStatus, completes: str | None) -> None:
    rows = [
        _record("d", OperationStatus.DRY_RUN, minutes=3),  # changed nothing: looked past
        _record("r", OperationStatus.REFUSED, minutes=2),
        _record("x", newest, minutes=1),
        _record("y", OperationStatus.PARTIAL),
    ]
    assert to_complete(rows, Action.FAILOVER, "A->B", {"g"}) == completes
    assert to_complete(rows, Action.FAILOVER, "A->B", {"other"}) is None
    assert to_complete(rows, Action.FAILBACK, "A->B", {"g"}) is None
