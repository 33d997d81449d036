"""Failback through the inverse never re-reads what the group is known to have processed on the origin.

Every path of the failback plan by example; its rule (drkit.core.resume) and the record-by-record model
are in test_resume.py.
"""

from __future__ import annotations

from drkit.core.checkpoints import CommittedOffset
from drkit.core.offsets import SyncRange
from drkit.core.plan import GroupFacts, Plan, Route, failback_plan
from drkit.core.refusals import RefusalReason
from drkit.core.resume import Basis
from drkit.core.translate import SyncIndex

# origin orders/0: 0..999 mirrored to 0..999; the origin went on to 1100 before the disaster.
INDEX = SyncIndex([SyncRange(0, 999, 0, 999)])

ROUTES = {"A.orders": Route("orders", True, "A->B"), "orders": Route("B.orders", False, "B->A")}
INDEXES = {
    ("A->B", "orders", 0): INDEX,
    ("A->B", "orders", 1): INDEX,
    ("B->A", "orders", 0): SyncIndex([SyncRange(0, 9, 100, 109)]),
}


def plan_for(
    on_b: dict[tuple[str, int], int],
    on_a: dict[tuple[str, int], int],
    checkpoints: dict[tuple[str, str, int], int] | None,
) -> Plan:
    offsets = [CommittedOffset("g", t, p, o) for (t, p), o in on_b.items()]
    return failback_plan(
        "A->B",
        "A",
        ["g"],
        offsets,
        ROUTES,
        INDEXES,
        {"g": GroupFacts(None, on_a)},
        {("orders", 0): (10, 10)},
        "B",
        "B->A",
        checkpoints,
    )


def test_plan_resumes_past_the_mirror_without_a_warning() -> None:
    plan = plan_for({("A.orders", 0): 1000}, {("orders", 0): 1100}, {("g", "orders", 0): 1050})
    assert plan.ok and plan.warnings == ()
    [move] = plan.moves
    assert (move.new, move.current, move.known, move.basis, move.changes) == (
        1100,
        1100,
        1100,
        Basis.ORIGIN_OFFSET,
        False,
    )
    assert plan.as_dict()["moves"][0]["basis"] == "origin_offset"


def test_plan_from_the_checkpoint_when_the_origin_lost_the_group() -> None:
    plan = plan_for({("A.orders", 0): 1000}, {}, {("g", "orders", 0): 1100})
    assert plan.commits() == {"g": {("orders", 0): 1100}}
    assert plan.moves[0].basis is Basis.CHECKPOINT and plan.warnings == ()


def test_plan_follows_a_group_set_back_on_the_copy_and_warns() -> None:
    plan = plan_for({("A.orders", 0): 400}, {("orders", 0): 1100}, {("g", "orders", 0): 1100})
    assert plan.ok and plan.commits() == {"g": {("orders", 0): 400}}
    assert plan.warnings == (
        "group g orders/0: moves back to 400, before offset 1100 (the offset it holds there) up to which it "
        "had processed on A: its offset on B (A.orders/0 400) was set back before that point "
        "(700 offsets will be read again)",
    )


def test_plan_warns_when_only_the_checkpoint_knows_what_was_processed() -> None:
    plan = plan_for({("A.orders", 0): 400}, {}, {("g", "orders", 0): 1100})
    assert plan.commits() == {"g": {("orders", 0): 400}}
    assert "before offset 1100 (its last checkpoint)" in plan.warnings[0]


def test_plan_warns_when_the_reverse_flow_route_moves_back() -> None:
    plan = plan_for({("orders", 0): 3}, {("B.orders", 0): 108}, None)
    assert plan.commits() == {"g": {("B.orders", 0): 103}}
    assert plan.warnings == ("group g B.orders/0: moves back from 108 to 103 (records will be read again on A)",)


def test_plan_with_nothing_mirrored_moves_to_what_is_known_or_refuses() -> None:
    known = plan_for({("A.orders", 2): 0}, {}, {("g", "orders", 2): 50})
    assert known.ok and known.commits() == {"g": {("orders", 2): 50}}
    unknown = plan_for({("A.orders", 2): 0}, {}, None)
    assert [r.reason for r in unknown.refusals] == [RefusalReason.UNTRANSLATABLE]
