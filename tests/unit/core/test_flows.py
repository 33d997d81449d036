"""drkit.core.flows: the flow topologies refused, each finding by example and the rules by property."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.core.flows import FlowEdge, PolicyName, topology_problem
from drkit.core.selection import NameSelector

P, ID = PolicyName.PREFIX, PolicyName.IDENTITY


def edge(source: str, target: str, policy: PolicyName = P, separator: str = ".") -> FlowEdge:
    return FlowEdge(f"{source}->{target}", source, target, policy, separator)


def everything(n: int) -> list[NameSelector]:
    return [NameSelector((".*",), ()) for _ in range(n)]


def test_two_way_prefix_and_two_way_identity_are_accepted() -> None:
    assert topology_problem([edge("A", "B"), edge("B", "A")], everything(2)) is None
    assert topology_problem([edge("A", "B", ID), edge("B", "A", ID)], everything(2)) is None


def test_mixed_policies_both_ways_loop_forever() -> None:
    problem = topology_problem([edge("A", "B", ID), edge("B", "A")], everything(2))
    assert problem is not None and problem.key == "flows[0].replication_policy"
    assert "copies of copies would be created forever" in problem.reason


def test_a_ring_needs_two_prefix_flows_in_a_row() -> None:
    ring = [edge("A", "B", P), edge("B", "C", ID), edge("C", "A", P)]
    assert topology_problem(ring, everything(3)) is None  # C->A then A->B: A receives and sends with prefix
    broken = [edge("A", "B", P), edge("B", "C", ID), edge("C", "A", ID)]
    problem = topology_problem(broken, everything(3))
    assert problem is not None and "form a loop in which no cluster both receives and sends" in problem.reason


def test_prefix_flows_of_a_loop_need_one_separator() -> None:
    problem = topology_problem([edge("A", "B", P, "."), edge("B", "A", P, "_")], everything(2))
    assert problem is not None and problem.key == "flows[1].separator"


def test_two_identity_flows_into_one_cluster_must_select_different_names() -> None:
    orders, payments = NameSelector(("orders.*",), ()), NameSelector(("payments.*",), ())
    fan_in = [edge("A", "C", ID), edge("B", "C", ID)]
    assert topology_problem(fan_in, [orders, payments]) is None
    problem = topology_problem(fan_in, [orders, NameSelector(("ord.*",), ())])
    assert problem is not None and problem.key == "flows[1].topics.include"


CLUSTERS = ["A", "B", "C", "D"]
flows_strategy = st.lists(
    st.tuples(st.sampled_from(CLUSTERS), st.sampled_from(CLUSTERS), st.sampled_from([P, ID]), st.sampled_from(".-")),
    max_size=6,
).map(lambda rows: list({(s, t): edge(s, t, p, sep) for s, t, p, sep in rows if s != t}.values()))


@settings(max_examples=200)
@given(flows=flows_strategy, seed=st.integers(0, 1000))
def test_whether_flows_are_refused_does_not_depend_on_their_order(flows: list[FlowEdge], seed: int) -> None:
    shuffled = list(flows)
    random.Random(seed).shuffle(shuffled)
    refused = topology_problem(flows, everything(len(flows))) is not None
    assert refused == (topology_problem(shuffled, everything(len(shuffled))) is not None)


@settings(max_examples=200)
@given(flows=flows_strategy, extra=flows_strategy)
def test_adding_flows_never_makes_a_refused_topology_acceptable(flows: list[FlowEdge], extra: list[FlowEdge]) -> None:
    if topology_problem(flows, everything(len(flows))) is None:
        return
    more = flows + [e for e in extra if (e.source, e.target) not in {(f.source, f.target) for f in flows}]
    assert topology_problem(more, everything(len(more))) is not None


@settings(max_examples=200)
@given(flows=flows_strategy)
def test_flows_all_prefix_with_one_separator_are_always_accepted(flows: list[FlowEdge]) -> None:
    prefix = [FlowEdge(f.name, f.source, f.target, P, ".") for f in flows]
    assert topology_problem(prefix, everything(len(prefix))) is None
