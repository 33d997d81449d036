"""Fencing's rules (drkit.core.fencing): drkit adds only its one binding where it is missing, lifts only what the
trail shows it added, and fencing then lifting gives back the bindings as they were."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.acls import PatternType, Permission, TopicAcl
from drkit.core.audit import Action, OperationRecord, OperationStatus
from drkit.core.fencing import (
    FENCING_KEY,
    AclChange,
    ClusterAcls,
    FenceSide,
    added_by_drkit,
    denial,
    fence,
    lift,
    plan_fencing,
    producers_on,
)

TOPICS = st.lists(st.sampled_from(["orders", "payments", "audit"]), max_size=3, unique=True)
PRINCIPALS = st.lists(st.sampled_from(["User:app", "User:batch", "User:other"]), max_size=3, unique=True)
ACL = st.builds(
    TopicAcl,
    st.sampled_from(list(PatternType)),
    st.sampled_from(["orders", "payments", "ord"]),
    st.sampled_from(["User:app", "User:batch", "User:x"]),
    st.sampled_from(["*", "10.0.0.1"]),
    st.sampled_from(["WRITE", "READ", "ALL"]),
    st.sampled_from(list(Permission)),
)


def applied(change: AclChange) -> dict[str, object]:
    return {FENCING_KEY: {"applied": [change.as_dict()]}}


@given(st.sets(ACL, max_size=8), TOPICS, PRINCIPALS)
def test_fencing_then_lifting_gives_back_the_bindings_as_they_were(
    present: set[TopicAcl], topics: list[str], producers: list[str]
) -> None:
    fenced = fence("A", FenceSide.SOURCE, topics, producers, present)
    after = present | set(fenced.add)
    assert set(fenced.add) == {denial(t, p) for t in topics for p in producers} - present
    drkit_s = added_by_drkit([applied(fenced)], "A")
    lifted = lift("A", FenceSide.SOURCE, drkit_s, after)
    assert (after - set(lifted.delete)) == present
    # Nothing drkit did not add is ever deleted; lifting again deletes nothing more.
    assert not set(lifted.delete) & present
    assert added_by_drkit([applied(fenced), applied(lifted)], "A") == frozenset()


def test_an_operator_s_own_denial_is_never_added_again_nor_lifted() -> None:
    own = denial("orders", "User:app")
    fenced = fence("A", FenceSide.SOURCE, ["orders", "payments"], ["User:app"], {own})
    assert fenced.add == (denial("payments", "User:app"),)
    lifted = lift("A", FenceSide.SOURCE, added_by_drkit([applied(fenced)], "A"), {own, *fenced.add})
    assert lifted.delete == (denial("payments", "User:app"),)


def test_the_binding_is_a_literal_deny_write_for_every_host() -> None:
    assert denial("orders", "User:app") == TopicAcl(
        PatternType.LITERAL, "orders", "User:app", "*", "WRITE", Permission.DENY
    )


def test_a_failover_fences_the_source_and_lifts_the_copies_only_when_kept_read_only() -> None:
    copy = denial("A.orders", "User:app")
    source = ClusterAcls("A", frozenset())
    target = ClusterAcls("B", frozenset({copy}), frozenset({copy}))
    plan = plan_fencing(source, ["orders"], target, ["User:app"], True, FenceSide.SOURCE, flow="A->B")
    assert [(c.cluster, c.add, c.delete) for c in plan.changes] == [
        ("A", (denial("orders", "User:app"),), ()),
        ("B", (), (copy,)),
    ]
    plan = plan_fencing(source, ["orders"], target, ["User:app"], False, FenceSide.SOURCE, flow="A->B")
    assert [c.cluster for c in plan.changes] == ["A"]


def test_a_failback_lifts_the_source_and_fences_the_copies_only_when_kept_read_only() -> None:
    mine = denial("orders", "User:app")
    source = ClusterAcls("A", frozenset({mine}), frozenset({mine}))
    plan = plan_fencing(
        ClusterAcls("B", frozenset()), ["A.orders"], source, ["User:app"], False, FenceSide.TARGET, flow="A->B"
    )
    assert [(c.cluster, c.add, c.delete) for c in plan.changes] == [("A", (), (mine,))]
    plan = plan_fencing(
        ClusterAcls("B", frozenset()), ["A.orders"], source, ["User:app"], True, FenceSide.TARGET, flow="A->B"
    )
    assert [(c.cluster, c.side) for c in plan.changes] == [("B", FenceSide.TARGET), ("A", FenceSide.SOURCE)]


def test_a_source_that_does_not_answer_is_not_fenced_and_the_plan_says_so() -> None:
    plan = plan_fencing(
        ClusterAcls("A", None),
        ["orders"],
        ClusterAcls("B", frozenset()),
        ["User:app"],
        False,
        FenceSide.SOURCE,
        flow="A->B",
    )
    assert plan.empty and len(plan.warnings) == 1 and plan.warnings[0].startswith("A not fenced: it does not answer")
    assert plan.warnings[0].endswith("run drkit fence --flow 'A->B' --apply then")


def test_the_trail_is_folded_in_order_per_cluster() -> None:
    a, b = denial("orders", "User:app"), denial("payments", "User:app")
    trail = [
        applied(AclChange("A", FenceSide.SOURCE, add=(a, b))),
        applied(AclChange("B", FenceSide.TARGET, add=(a,))),
        applied(AclChange("A", FenceSide.SOURCE, delete=(a,))),
        {"status": "applied"},
    ]
    assert added_by_drkit(trail, "A") == {b} and added_by_drkit(trail, "B") == {a}


def op(action: Action, status: OperationStatus, flow: str = "A->B", dry_run: bool = False) -> OperationRecord:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return OperationRecord(
        "id", action, flow, ("g",), None, dry_run, {}, {"status": status.value}, "u", "h", "v", at, at
    )


def test_the_producers_are_on_the_side_the_newest_move_of_the_flow_left_them() -> None:
    over, back = Action.FAILOVER, Action.FAILBACK
    applied, partial = OperationStatus.APPLIED, OperationStatus.PARTIAL
    assert producers_on([], "A->B") is FenceSide.SOURCE
    assert producers_on([op(over, applied)], "A->B") is FenceSide.TARGET
    assert producers_on([op(over, partial)], "A->B") is FenceSide.TARGET  # some groups moved: so did producers
    assert producers_on([op(over, OperationStatus.INTERRUPTED)], "A->B") is FenceSide.TARGET  # some may have
    assert producers_on([op(back, applied), op(over, applied)], "A->B") is FenceSide.SOURCE
    # Looked past: other flows, dry runs, refusals, failures, an apply still running, drkit fence itself.
    past = [
        op(back, applied, flow="B->A"),
        op(back, OperationStatus.DRY_RUN, dry_run=True),
        op(back, OperationStatus.REFUSED),
        op(back, OperationStatus.FAILED),
        op(back, OperationStatus.APPLYING),
        op(Action.FENCE, applied),
    ]
    assert producers_on([*past, op(over, applied)], "A->B") is FenceSide.TARGET
