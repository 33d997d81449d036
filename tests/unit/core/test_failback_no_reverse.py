"""Failback with no reverse flow is refused when a group holds a position on the cluster being left's own
topics (issue 15, item 5): applying would drop that position, so it is refused like a lagging reverse flow."""

from __future__ import annotations

from drkit.core.checkpoints import CommittedOffset
from drkit.core.offsets import SyncRange
from drkit.core.plan import Plan, ReverseFlow, failback_plan, failback_routes
from drkit.core.policy import PrefixPolicy
from drkit.core.refusals import RefusalReason
from drkit.core.selection import NameSelector
from drkit.core.translate import SyncIndex

COPIES = {"A.orders": "orders"}  # A->B's copies on B
INDEXES = {("A->B", "orders", 0): SyncIndex([SyncRange(0, 99, 0, 99)])}


def plan(offsets: dict[str, dict[tuple[str, int], int]], reverse: ReverseFlow | None) -> Plan:
    rows = [CommittedOffset(g, t, p, o) for g, held in offsets.items() for (t, p), o in held.items()]
    routes = failback_routes({r.topic for r in rows}, "A->B", COPIES, reverse)
    indexes = dict(INDEXES)
    if reverse is not None:
        indexes[(reverse.name, "orders", 0)] = SyncIndex([SyncRange(0, 9, 0, 9)])
    return failback_plan(
        "A->B",
        "A",
        list(offsets),
        rows,
        routes,
        indexes,
        {},
        {("orders", 0): (10, 10)},
        "B",
        None if reverse is None else reverse.name,
    )


def test_a_group_on_the_targets_own_topics_is_refused_naming_them_and_what_to_do() -> None:
    p = plan({"billing": {("A.orders", 0): 55, ("orders", 0): 8, ("audit", 1): 3, ("audit", 0): 2}}, None)
    assert not p.ok
    assert [(r.reason, r.group, r.detail) for r in p.refusals] == [
        (
            RefusalReason.NO_REVERSE_FLOW,
            "billing",
            "group 'billing' has offsets on audit, orders on B and no reverse flow B->A is configured to bring "
            "that position back; configure flow B->A and run its mirror until it catches up, or delete the "
            "group's offsets on those topics on B if it need not resume there",
        )
    ]
    assert p.warnings == ()  # no "left alone" warning: nothing is left alone, nothing is applied


def test_only_the_groups_holding_such_positions_are_refused() -> None:
    p = plan({"billing": {("A.orders", 0): 55, ("orders", 0): 8}, "reports": {("A.orders", 0): 40}}, None)
    assert [(r.reason, r.group) for r in p.refusals] == [(RefusalReason.NO_REVERSE_FLOW, "billing")]


def test_a_group_only_on_the_copies_moves_back_without_a_reverse_flow() -> None:
    p = plan({"billing": {("A.orders", 0): 55}}, None)
    assert p.ok and p.warnings == ()
    assert p.commits() == {"billing": {("orders", 0): 55}}


def test_with_a_reverse_flow_a_topic_it_does_not_select_is_left_alone_with_a_warning() -> None:
    reverse = ReverseFlow("B->A", "B", NameSelector(("orders",), ()), PrefixPolicy("."))
    p = plan({"billing": {("A.orders", 0): 55, ("orders", 0): 8, ("audit", 0): 2}}, reverse)
    assert p.ok
    assert p.warnings == ("group billing: offsets on audit are not covered by the flows; left alone",)
    assert p.commits() == {"billing": {("orders", 0): 55, ("B.orders", 0): 8}}
