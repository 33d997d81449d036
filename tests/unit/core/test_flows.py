"""The flow-topology rules (drkit.core.flows): each finding by example, and the invariants by property."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.core.flows import (
    Finding,
    Flow,
    Policy,
    Problem,
    loop_finding,
    may_overlap,
    simple_cycles,
    topology_findings,
)
from drkit.core.policy import PrefixPolicy
from drkit.core.selection import NameSelector

P, ID = Policy.PREFIX, Policy.IDENTITY
ALL = NameSelector((".*",), ())


def findings(flows: Sequence[Flow], selectors: Sequence[NameSelector] | None = None) -> list[Finding]:
    return list(topology_findings(flows, selectors or [ALL] * len(flows)))


# --------------------------------------------------------------------------- findings by example


def test_two_way_prefix_is_accepted() -> None:
    assert findings([Flow("A", "B"), Flow("B", "A")]) == []


def test_two_way_identity_is_accepted() -> None:
    # The mirror never copies a record whose drkit.origin headers name the flow's target.
    assert findings([Flow("A", "B", ID), Flow("B", "A", ID)]) == []


def test_prefix_ring_is_accepted() -> None:
    assert findings([Flow("A", "B"), Flow("B", "C"), Flow("C", "A")]) == []


def test_identity_ring_is_accepted() -> None:
    assert findings([Flow("A", "B", ID), Flow("B", "C", ID), Flow("C", "A", ID)]) == []


def test_ring_with_a_prefix_handoff_is_accepted() -> None:
    # B receives and sends with the prefix policy: a copy coming round is recognised there.
    assert findings([Flow("A", "B"), Flow("B", "C"), Flow("C", "A", ID)]) == []


def test_mixed_policy_pair() -> None:
    flows = [Flow("A", "B"), Flow("B", "A", ID)]
    assert findings(flows) == [Finding(Problem.MIXED_POLICY_PAIR, 1, (0, 1), 0)]


def test_mixed_policy_pair_names_the_identity_flow_whatever_the_order() -> None:
    flows = [Flow("B", "A", ID), Flow("A", "B")]
    assert findings(flows) == [Finding(Problem.MIXED_POLICY_PAIR, 0, (1, 0), 1)]


def test_loop_without_prefix_handoff() -> None:
    flows = [Flow("A", "B"), Flow("B", "C", ID), Flow("C", "A", ID)]
    assert findings(flows) == [Finding(Problem.NO_PREFIX_HANDOFF, 1, (0, 1, 2), 1)]


def test_loop_with_mixed_separators() -> None:
    flows = [Flow("A", "B", P, "."), Flow("B", "A", P, "_")]
    assert findings(flows) == [Finding(Problem.MIXED_SEPARATORS, 1, (0, 1), 1)]


def test_identity_separator_does_not_count() -> None:
    flows = [Flow("A", "B", P, "."), Flow("B", "C", P, "."), Flow("C", "A", ID, "_")]
    assert findings(flows) == []


def test_identity_fan_in() -> None:
    flows = [Flow("A", "C", ID), Flow("B", "C", ID)]
    assert findings(flows) == [Finding(Problem.IDENTITY_FAN_IN, 1, (0, 1), 0)]


def test_identity_fan_in_with_disjoint_selections_is_accepted() -> None:
    flows = [Flow("A", "C", ID), Flow("B", "C", ID)]
    selectors = [NameSelector(("orders.*",), ()), NameSelector(("payments.*",), ())]
    assert findings(flows, selectors) == []


def test_prefix_fan_in_is_accepted() -> None:
    assert findings([Flow("A", "C"), Flow("B", "C")]) == []


def test_loops_come_before_fan_ins() -> None:
    flows = [Flow("A", "C", ID), Flow("B", "C", ID), Flow("C", "A"), Flow("A", "B", ID)]
    assert [f.problem for f in findings(flows)][-1] is Problem.IDENTITY_FAN_IN
    assert findings(flows)[0].problem is not Problem.IDENTITY_FAN_IN


def test_simple_cycles_start_from_the_least_cluster() -> None:
    flows = [Flow("C", "A"), Flow("B", "C"), Flow("A", "B"), Flow("B", "A")]
    assert simple_cycles(flows) == [(2, 1, 0), (2, 3)]


def test_may_overlap_literals() -> None:
    assert not may_overlap(NameSelector(("orders",), ()), NameSelector(("payments",), ()))
    assert may_overlap(NameSelector(("orders",), ()), NameSelector(("ord.*",), ()))
    assert not may_overlap(NameSelector(("orders",), ()), NameSelector(("ord.*",), ("orders",)))
    assert may_overlap(NameSelector(("a|orders",), ()), NameSelector(("or.*",), ()))


# --------------------------------------------------------------------------- properties

CLUSTERS = "ABCD"
flow_st = st.builds(
    Flow,
    source=st.sampled_from(CLUSTERS),
    target=st.sampled_from(CLUSTERS),
    policy=st.sampled_from(Policy),
    separator=st.sampled_from([".", "_"]),
).filter(lambda f: f.source != f.target)
flows_st = st.lists(flow_st, max_size=6)


def _cycles_by_brute_force(flows: Sequence[Flow]) -> set[tuple[int, ...]]:
    """Every sequence of flows that closes on itself through distinct clusters, rotated to its least cluster."""
    found: set[tuple[int, ...]] = set()
    for size in range(1, len(CLUSTERS) + 1):
        for path in itertools.permutations(range(len(flows)), size):
            hops = [flows[i] for i in path]
            chained = all(hops[j].target == hops[(j + 1) % size].source for j in range(size))
            if chained and len({h.source for h in hops}) == size:
                start = min(range(size), key=lambda j: hops[j].source)
                found.add(path[start:] + path[:start])
    return found


def _copies_forever(flows: Sequence[Flow], cycle: Sequence[int]) -> bool:
    """Send a local topic round ``cycle`` from each of its clusters, as the mirror would, for three laps."""
    if all(flows[i].policy is Policy.IDENTITY for i in cycle):
        return False  # drkit.origin headers stop records at a cluster they have been to
    aliases = frozenset(c for f in flows for c in (f.source, f.target))
    for start in range(len(cycle)):
        name, stopped = "t", False
        for hop in range(3 * len(cycle)):
            flow = flows[cycle[(start + hop) % len(cycle)]]
            if flow.policy is Policy.PREFIX:
                policy = PrefixPolicy(flow.separator)
                if any(re.fullmatch(p, name) for p in policy.cycle_exclusions(flow.target, aliases)):
                    stopped = True
                    break
                name = policy.target_topic(flow.source, name)
        if not stopped:
            return True
    return False


@given(flows_st)
@settings(max_examples=300, deadline=None)
def test_simple_cycles_are_every_cycle_once(flows: list[Flow]) -> None:
    cycles = simple_cycles(flows)
    assert len(cycles) == len(set(cycles))
    assert set(cycles) == _cycles_by_brute_force(flows)


@given(flows_st)
@settings(max_examples=300, deadline=None)
def test_a_loop_is_refused_exactly_when_records_would_go_round_forever(flows: list[Flow]) -> None:
    for cycle in simple_cycles(flows):
        assert (loop_finding(flows, cycle) is not None) == _copies_forever(flows, cycle)


@given(flows_st)
@settings(max_examples=200, deadline=None)
def test_identity_only_topologies_have_no_loop_findings(flows: list[Flow]) -> None:
    identity = [Flow(f.source, f.target, Policy.IDENTITY, f.separator) for f in flows]
    assert all(f.problem is Problem.IDENTITY_FAN_IN for f in findings(identity))


@given(flows_st)
@settings(max_examples=200, deadline=None)
def test_a_finding_names_a_flow_it_involves(flows: list[Flow]) -> None:
    for finding in findings(flows):
        assert finding.flow in finding.flows and finding.other in finding.flows
        if finding.problem is Problem.IDENTITY_FAN_IN:
            a, b = finding.flows
            assert a < b and flows[a].target == flows[b].target
            assert flows[a].policy is flows[b].policy is Policy.IDENTITY
        else:  # a loop, in travel order
            loop = [flows[i] for i in finding.flows]
            assert all(loop[j].target == loop[(j + 1) % len(loop)].source for j in range(len(loop)))


# Patterns from literal pieces and a few operators over a tiny alphabet, so that overlaps are common.
_piece = st.sampled_from(["a", "b", "ab", "ba", r"\.", ".", ".*", "a+", "b?", "[ab]", "(?:a|b)"])
_alternative = st.lists(_piece, min_size=1, max_size=3).map("".join)
_pattern = st.lists(_alternative, min_size=1, max_size=2).map("|".join)
_selector = st.builds(
    NameSelector,
    include=st.lists(_pattern, min_size=1, max_size=2).map(tuple),
    exclude=st.lists(_pattern, max_size=1).map(tuple),
)
_names = ["".join(chars) for size in range(5) for chars in itertools.product("ab.", repeat=size)]


@given(_selector, _selector)
@settings(max_examples=300, deadline=None)
def test_may_overlap_never_misses_a_shared_name(a: NameSelector, b: NameSelector) -> None:
    if any(a.matches(name) and b.matches(name) for name in _names):
        assert may_overlap(a, b)


@given(_selector, _selector)
@settings(max_examples=200, deadline=None)
def test_may_overlap_is_symmetric(a: NameSelector, b: NameSelector) -> None:
    assert may_overlap(a, b) == may_overlap(b, a)
