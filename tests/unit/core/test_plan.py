"""The pure rules of plans and outcomes: routes, refusals, statuses, frozen plans."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.audit import Action, OperationStatus
from drkit.core.groups import GroupState, Member
from drkit.core.offsets import SyncRange
from drkit.core.outcome import decide_status
from drkit.core.plan import CheckpointFact, GroupFacts, Plan, ReverseFlow, failback_routes, failover_plan
from drkit.core.policy import PrefixPolicy
from drkit.core.refusals import Refusal, RefusalReason
from drkit.core.selection import NameSelector
from drkit.core.translate import SyncIndex


def test_failback_routes() -> None:
    reverse = ReverseFlow("B->A", "B", NameSelector(("orders|payments",), ()), PrefixPolicy("."))
    routes = failback_routes(["A.orders", "orders", "payments", "other"], "A->B", {"A.orders": "orders"}, reverse)
    assert {t: (r.to_topic, r.inverse, r.via) for t, r in routes.items()} == {
        "A.orders": ("orders", True, "A->B"),
        "orders": ("B.orders", False, "B->A"),
        "payments": ("B.payments", False, "B->A"),
    }
    assert failback_routes(["orders"], "A->B", {}, None) == {}


def test_plans_are_frozen() -> None:
    plan = Plan(Action.FAILOVER, "A->B", "B")
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.refusals = (Refusal(RefusalReason.STALE, "g", "x"),)  # type: ignore[misc]
    assert plan.as_dict()["action"] == "failover"


def test_group_state_activity() -> None:
    assert GroupState("g", "Empty").active is False
    assert GroupState("g", "PreparingRebalance").active is True
    assert GroupState("g", "Empty", (Member("m", "c", "h"),)).active is True
    assert GroupFacts(None, {}).active is False


@given(
    refusals=st.lists(st.sampled_from(list(RefusalReason)), max_size=3),
    apply=st.booleans(),
    confirmed=st.sampled_from([None, True, False]),
)
def test_a_refused_plan_is_never_applied(refusals: list[RefusalReason], apply: bool, confirmed: bool | None) -> None:
    plan = Plan(Action.FAILOVER, "A->B", "B", refusals=tuple(Refusal(r, "g", "") for r in refusals))
    status = decide_status(plan, apply, confirmed)
    if refusals:
        assert status is OperationStatus.REFUSED
    elif not apply:
        assert status is OperationStatus.DRY_RUN
    else:
        assert status is (OperationStatus.DECLINED if confirmed is False else OperationStatus.APPLIED)


@given(
    committed=st.lists(st.integers(0, 300), min_size=1, max_size=5),
    age=st.floats(0, 1000),
    limit=st.floats(1, 1000),
    allow=st.booleans(),
)
def test_failover_commits_exactly_the_translation_or_refuses(
    committed: list[int], age: float, limit: float, allow: bool
) -> None:
    index = SyncIndex([SyncRange(0, 99, 1000, 1099), SyncRange(150, 199, 1100, 1149)])
    facts = [CheckpointFact("g", "t", "A.t", p, c, age) for p, c in enumerate(committed)]
    plan = failover_plan(
        "A->B",
        "B",
        ["g"],
        facts,
        {("t", p): index for p in range(len(committed))},
        {"g": GroupFacts(None, {})},
        limit,
        allow,
    )
    stale = age > limit and not allow
    assert plan.ok is not stale
    assert {r.reason for r in plan.refusals} <= {RefusalReason.STALE}
    assert plan.commits() == {"g": {("A.t", p): index.translate(c).offset for p, c in enumerate(committed)}}
