"""Topic and group selection as one full-match regular expression."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.policy import IdentityPolicy, PrefixPolicy
from drkit.core.selection import NameSelector, group_selector, topic_selector

AB = frozenset({"A", "B"})


# --------------------------------------------------------------------------- NameSelector


def test_include_is_full_match_not_search() -> None:
    s = NameSelector(("orders",), ())
    assert s.matches("orders")
    assert not s.matches("orders2")
    assert not s.matches("my-orders")
    assert not s.matches("xordersx")
    assert not s.matches("")


def test_include_alternatives_and_regex() -> None:
    s = NameSelector(("orders", "pay.*"), ())
    assert s.matches("orders")
    assert s.matches("payments")
    assert s.matches("pay")
    assert not s.matches("repay")


def test_include_with_top_level_alternation_stays_anchored() -> None:
    # "a|b" must not leak out of its group and match "a" followed by anything
    s = NameSelector(("a|b",), ("x",))
    assert s.matches("a")
    assert s.matches("b")
    assert not s.matches("ab")
    assert not s.matches("a2")


def test_exclude_is_full_match_too() -> None:
    s = NameSelector((".*",), ("orders",))
    assert not s.matches("orders")
    assert s.matches("orders2")
    assert s.matches("old-orders")


def test_exclude_wins() -> None:
    s = NameSelector(("orders.*",), ("orders-tmp", "orders\\..*"))
    assert s.matches("orders")
    assert s.matches("orders-v2")
    assert not s.matches("orders-tmp")
    assert not s.matches("orders.dlq")
    both = NameSelector(("orders",), ("orders",))
    assert not both.matches("orders")


def test_exclude_alternatives_of_different_lengths() -> None:
    # the lookahead must try every alternative, not only the first that matches a prefix
    s = NameSelector((".*",), ("a", "ab", "abc"))
    assert not s.matches("a")
    assert not s.matches("ab")
    assert not s.matches("abc")
    assert s.matches("abcd")
    assert s.matches("b")


def test_empty_include_matches_nothing() -> None:
    s = NameSelector((), ())
    assert not s.matches("orders")
    assert not s.matches("")
    assert s.select(["a", "b", "orders"]) == []
    assert NameSelector((), ("x",)).select(["a", "x"]) == []


def test_select_sorted_and_filtered() -> None:
    s = NameSelector(("o.*", "p.*"), ("pz",))
    assert s.select(["pz", "payments", "zeta", "orders", "alpha", "o"]) == ["o", "orders", "payments"]


def test_pattern_is_usable_as_a_plain_regex() -> None:
    # the same string feeds Spark's subscribePattern: it must compile and agree with matches()
    s = NameSelector(("orders.*", "pay"), ("orders-tmp",))
    compiled = re.compile(s.pattern)
    for name in ["orders", "orders-tmp", "orders-x", "pay", "payx", ""]:
        assert (compiled.fullmatch(name) is not None) is s.matches(name)


SAFE = st.text("abcxyz019._-", min_size=1, max_size=8)


@given(
    include=st.lists(SAFE, max_size=5),
    exclude=st.lists(SAFE, max_size=5),
    extra=st.lists(SAFE, max_size=5),
)
def test_literal_names_property(include: list[str], exclude: list[str], extra: list[str]) -> None:
    s = NameSelector(tuple(re.escape(n) for n in include), tuple(re.escape(n) for n in exclude))
    names = set(include) | set(exclude) | set(extra)
    for name in names:
        assert s.matches(name) == (name in include and name not in exclude)
    assert s.select(names) == sorted(n for n in names if n in include and n not in exclude)


# --------------------------------------------------------------------------- topic_selector


def test_topic_selector_excludes_internal_topics() -> None:
    s = topic_selector([".*"], [], PrefixPolicy(), "A", AB)
    for topic in [
        "__consumer_offsets",
        "__transaction_state",
        "_drkit.offset_syncs",
        "mm2-offset-syncs.B.internal",
        "x.internal",
        "connect-configs",
        "_schemas",
    ]:
        assert not s.matches(topic), topic
    assert s.matches("orders")


def test_topic_selector_excludes_cycles_flow_b_to_a() -> None:
    # flow B -> A (target A): copies of A's topics never go back
    s = topic_selector([".*"], [], PrefixPolicy(), "A", AB)
    assert not s.matches("A.orders")
    assert not s.matches("B.A.orders")
    assert s.matches("orders")
    assert s.matches("C.orders")
    three = topic_selector([".*"], [], PrefixPolicy(), "A", frozenset({"A", "B", "C"}))
    assert not three.matches("C.A.orders")
    assert three.matches("C.orders")
    assert three.select(["orders", "A.orders", "C.orders", "C.A.orders", "__consumer_offsets"]) == [
        "C.orders",
        "orders",
    ]


def test_topic_selector_user_include_exclude() -> None:
    s = topic_selector(["orders.*", "payments"], ["orders-tmp"], PrefixPolicy(), "A", AB)
    assert s.matches("orders")
    assert s.matches("orders-eu")
    assert s.matches("payments")
    assert not s.matches("orders-tmp")
    assert not s.matches("payments2")
    assert not s.matches("invoices")


def test_topic_selector_identity_policy_has_no_cycle_exclusions() -> None:
    s = topic_selector([".*"], [], IdentityPolicy(), "A", AB)
    assert s.matches("A.orders")
    assert not s.matches("__consumer_offsets")


# --------------------------------------------------------------------------- group_selector


def test_group_selector_excludes_internal_groups() -> None:
    s = group_selector([".*"], [])
    for group in ["_drkit", "_drkit-mirror", "drkit-failover", "connect-cluster", "connect-mm2", "__x"]:
        assert not s.matches(group), group
    for group in ["billing", "orders-consumer", "drkit", "my-drkit-x", "_consumers"]:
        assert s.matches(group), group


def test_group_selector_user_include_exclude() -> None:
    s = group_selector(["app-.*"], ["app-test"])
    assert s.matches("app-billing")
    assert not s.matches("app-test")
    assert not s.matches("billing")
    assert s.select(["app-z", "drkit-x", "app-a", "app-test"]) == ["app-a", "app-z"]


def test_group_selector_never_selects_drkits_own_groups() -> None:
    """Not the mirror's and tail readers' groups, nor the shadow groups earlier versions kept live checkpoints in
    (a reversed flow would translate them back)."""
    selector = group_selector([".*"], [])
    for own in ("_drkit-tail", "drkit-mirror-readback-1", "drkit.ckpt.A->B.billing", "connect-x", "__x"):
        assert not selector.matches(own), own
    assert selector.matches("billing") and selector.matches("drkit_ckpt.x") and selector.matches("drkit.ckptx")
