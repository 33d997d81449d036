"""Replication policies and internal topics."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.policy import IdentityPolicy, PrefixPolicy, is_internal_topic, policy_for, topic_name_problem

AB = frozenset({"A", "B"})
ABC = frozenset({"A", "B", "C"})


def _excluded(patterns: list[str], topic: str) -> bool:
    return any(re.fullmatch(p, topic) for p in patterns)


# --------------------------------------------------------------------------- prefix


def test_prefix_target_and_source_topic() -> None:
    p = PrefixPolicy()
    assert p.name == "prefix"
    assert p.target_topic("A", "orders") == "A.orders"
    assert p.target_topic("B", "A.orders") == "B.A.orders"
    assert p.source_topic("A", "A.orders") == "orders"
    assert p.source_topic("B", "B.A.orders") == "A.orders"
    assert p.source_topic("A", "B.orders") is None
    assert p.source_topic("A", "orders") is None
    assert p.source_topic("A", "AB.orders") is None  # a prefix of the alias is not the alias


def test_prefix_custom_separator() -> None:
    p = PrefixPolicy("-")
    assert p.target_topic("A", "orders") == "A-orders"
    assert p.source_topic("A", "A-orders") == "orders"
    assert p.source_topic("A", "A.orders") is None
    assert p.origin_of("A-orders", AB) == "A"
    assert p.origin_of("A.orders", AB) is None


def test_prefix_origin_of() -> None:
    p = PrefixPolicy()
    assert p.origin_of("A.orders", AB) == "A"
    assert p.origin_of("B.A.orders", AB) == "B"  # the last hop
    assert p.origin_of("orders", AB) is None
    assert p.origin_of("C.orders", AB) is None  # not a known cluster: a local topic
    assert p.origin_of("C.orders", ABC) == "C"
    assert p.origin_of("A", AB) is None  # no separator


@given(
    alias=st.text("ABCXYZabc019_-", min_size=1, max_size=6),
    topic=st.text("abcdefxyz019._-", min_size=1, max_size=20),
)
def test_prefix_round_trip(alias: str, topic: str) -> None:
    p = PrefixPolicy()
    remote = p.target_topic(alias, topic)
    assert p.source_topic(alias, remote) == topic
    assert p.origin_of(remote, frozenset({alias})) == alias


@pytest.mark.parametrize(
    ("topic", "excluded"),
    [
        ("A.orders", True),  # came from A
        ("B.A.orders", True),  # came from A via B
        ("A.B.orders", True),  # came from B via A
        ("A.B.A.orders", True),
        ("orders", False),
        ("B.orders", False),
        ("Aorders", False),
        ("AA.orders", False),  # a different (unknown) name that starts with A
        ("A.", False),  # nothing after the separator
        ("orders.A.x", False),  # the alias appears, but not as a hop
    ],
)
def test_prefix_cycle_exclusions_flow_b_to_a(topic: str, excluded: bool) -> None:
    # flow B -> A: the target is A, so nothing that came from A may be copied back to it
    patterns = PrefixPolicy().cycle_exclusions("A", AB)
    assert _excluded(patterns, topic) is excluded


@pytest.mark.parametrize(
    ("topic", "excluded"),
    [
        ("A.orders", True),
        ("C.A.orders", True),  # came from A via C
        ("B.C.A.orders", True),
        ("orders", False),
        ("C.orders", False),
        ("B.C.orders", False),
    ],
)
def test_prefix_cycle_exclusions_three_clusters(topic: str, excluded: bool) -> None:
    patterns = PrefixPolicy().cycle_exclusions("A", ABC)
    assert _excluded(patterns, topic) is excluded


def test_prefix_cycle_exclusions_only_follow_known_aliases() -> None:
    # Hops are recognised only through known cluster aliases (as in origin_of): with C unknown,
    # "C.A.orders" is a local topic of B, not a copy, and is mirrored. Pinned current behaviour.
    patterns = PrefixPolicy().cycle_exclusions("A", AB)
    assert not _excluded(patterns, "C.A.orders")
    assert not _excluded(patterns, "C.orders")


def test_prefix_cycle_exclusions_escape_separator_and_alias() -> None:
    patterns = PrefixPolicy().cycle_exclusions("A", AB)
    assert not _excluded(patterns, "AXorders")  # "." is literal, not any character
    patterns = PrefixPolicy("+").cycle_exclusions("a+b", frozenset({"a+b", "c"}))
    assert _excluded(patterns, "a+b+orders")
    assert _excluded(patterns, "c+a+b+orders")
    assert not _excluded(patterns, "aab+orders")


@given(
    hops=st.lists(st.sampled_from(sorted(ABC)), max_size=4),
    topic=st.text("orderspayment_-", min_size=1, max_size=10),
)
def test_prefix_cycle_exclusions_match_hop_chain(hops: list[str], topic: str) -> None:
    # a topic reached through the hops (outermost first) loops back to A iff A is among them
    p = PrefixPolicy()
    name = topic
    for alias in reversed(hops):
        name = p.target_topic(alias, name)
    assert _excluded(p.cycle_exclusions("A", ABC), name) is ("A" in hops)


# --------------------------------------------------------------------------- identity


def test_identity_policy() -> None:
    p = IdentityPolicy()
    assert p.name == "identity"
    assert p.target_topic("A", "orders") == "orders"
    assert p.source_topic("A", "orders") == "orders"
    assert p.source_topic("A", "A.orders") == "A.orders"
    assert p.origin_of("A.orders", AB) is None
    assert p.origin_of("orders", AB) is None
    assert p.cycle_exclusions("A", AB) == []


# --------------------------------------------------------------------------- policy_for


def test_policy_for() -> None:
    assert policy_for("prefix") == PrefixPolicy()
    assert policy_for("prefix", "_") == PrefixPolicy("_")
    assert policy_for("prefix", "_").target_topic("A", "x") == "A_x"
    assert policy_for("identity") == IdentityPolicy()
    assert policy_for("identity").name == "identity"


@pytest.mark.parametrize("name", ["", "Prefix", "default", "mm2", "identity "])
def test_policy_for_unknown(name: str) -> None:
    with pytest.raises(ValueError, match="unknown replication policy"):
        policy_for(name)


# --------------------------------------------------------------------------- internal topics


@pytest.mark.parametrize(
    "topic",
    [
        "__consumer_offsets",
        "__transaction_state",
        "__cluster_metadata",
        "_drkit.x",
        "_drkit.offset_syncs",
        "mm2-offset-syncs.B.internal",
        "mm2-configs.A.internal",
        "x.internal",
        "heartbeats-internal",
        ".hidden",
        "connect-configs",
        "connect-offsets",
        "connect-status",
        "_schemas",
    ],
)
def test_internal_topics(topic: str) -> None:
    assert is_internal_topic(topic)


@pytest.mark.parametrize(
    "topic",
    [
        "orders",
        "A.orders",
        "internal",
        "orders_internal",
        "internal.orders",
        "_drkit",  # no dot after
        "drkit.x",
        "connect-configs2",
        "my-connect-configs",
        "connect",
        "_schemas2",
        "mm2",
        "_orders",
    ],
)
def test_normal_topics_not_internal(topic: str) -> None:
    assert not is_internal_topic(topic)


@given(st.text(max_size=300))
def test_topic_name_problem_is_kafkas_topic_validate(name: str) -> None:
    legal = re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", name) is not None and name not in (".", "..")
    assert (topic_name_problem(name) is None) == legal
