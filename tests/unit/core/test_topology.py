"""The reconciliation plan of a flow's topics: create, grow what drkit created, configure, refuse."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.origin import origin_overhead
from drkit.core.topology import (
    CONFIG_EXCLUDE_DEFAULT,
    ConfigChange,
    PartitionGrowth,
    SourceTopic,
    TargetTopic,
    TopicCreate,
    TopicIssueKind,
    TopologyPlan,
    config_filter,
    plan_topology,
    producer_limits,
    raised_limit,
    target_record_limits,
)

COPIED = config_filter(p for p, _ in CONFIG_EXCLUDE_DEFAULT)


def prefixed(topic: str) -> str:
    return f"A.{topic}"


def plan(
    selected: list[SourceTopic],
    target: dict[str, TargetTopic],
    owned: frozenset[str] = frozenset(),
    sync_configs: bool = True,
    mirrored_before: tuple[str, ...] | list[str] = (),
) -> TopologyPlan:
    return plan_topology("A->B", "B", selected, target, prefixed, owned, COPIED, sync_configs, mirrored_before)


def test_a_new_topic_is_created_with_its_configs_but_not_the_excluded_ones() -> None:
    configs = {"retention.ms": "1000", "min.insync.replicas": "2", "message.timestamp.type": "LogAppendTime"}
    p = plan([SourceTopic("orders", 6, "id1", configs)], {})
    assert p.creates == (TopicCreate("orders", "A.orders", 6, {"retention.ms": "1000"}),)
    assert p.routes == {"orders": "A.orders"} and not p.issues


def test_partitions_added_on_the_source_grow_the_target_drkit_created() -> None:
    p = plan([SourceTopic("orders", 6)], {"A.orders": TargetTopic("A.orders", 3)}, owned=frozenset({"A.orders"}))
    assert p.growths == (PartitionGrowth("orders", "A.orders", 3, 6),) and p.routes == {"orders": "A.orders"}


def test_a_target_drkit_did_not_create_is_refused_for_that_topic_only() -> None:
    p = plan(
        [SourceTopic("orders", 6), SourceTopic("users", 1)],
        {"A.orders": TargetTopic("A.orders", 3), "A.users": TargetTopic("A.users", 1)},
    )
    assert p.growths == () and p.refused() == {"orders"} and p.routes == {"users": "A.users"}
    (issue,) = p.issues
    assert issue.kind is TopicIssueKind.TARGET_TOO_SMALL and "add partitions to it (at least 6)" in issue.detail


def test_changed_configs_are_set_and_equal_ones_left_alone() -> None:
    source = SourceTopic("orders", 1, configs={"retention.ms": "5", "cleanup.policy": "compact"})
    p = plan([source], {"A.orders": TargetTopic("A.orders", 1, {"cleanup.policy": "compact"})})
    assert p.config_changes == (ConfigChange("orders", "A.orders", {"retention.ms": "5"}, {"retention.ms": None}),)
    assert plan([source], {"A.orders": TargetTopic("A.orders", 1, dict(source.configs))}).empty
    assert not plan([source], {"A.orders": TargetTopic("A.orders", 1)}, sync_configs=False).config_changes


def test_a_deleted_source_topic_is_an_issue_of_its_own_and_nothing_is_deleted() -> None:
    p = plan([SourceTopic("users", 1)], {"A.users": TargetTopic("A.users", 1)}, mirrored_before=["orders", "users"])
    (issue,) = p.issues
    assert (issue.kind, issue.source, issue.target) == (TopicIssueKind.SOURCE_DELETED, "orders", "A.orders")
    assert p.refused() == frozenset() and p.empty


def test_the_default_exclude_list_keeps_cluster_specific_properties() -> None:
    for name in (
        "min.insync.replicas",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "message.timestamp.type",
        "message.timestamp.after.max.ms",
        "unclean.leader.election.enable",
        "remote.storage.enable",
        "local.retention.ms",
    ):
        assert not COPIED(name), name
    for name in ("retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes", "compression.type"):
        assert COPIED(name), name


@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.tuples(st.integers(1, 8), st.one_of(st.none(), st.integers(1, 8)), st.booleans()),
    )
)
def test_after_applying_a_plan_planning_again_changes_nothing(topics: dict[str, tuple[int, int | None, bool]]) -> None:
    selected = [SourceTopic(t, n, configs={"retention.ms": str(n)}) for t, (n, _, _) in topics.items()]
    target = {prefixed(t): TargetTopic(prefixed(t), m) for t, (_, m, _) in topics.items() if m is not None}
    owned = frozenset(prefixed(t) for t, (_, _, mine) in topics.items() if mine)
    first = plan(selected, target, owned)
    after = dict(target)
    for c in first.creates:
        after[c.target] = TargetTopic(c.target, c.partitions, dict(c.configs))
    for g in first.growths:
        after[g.target] = TargetTopic(g.target, g.wanted, after[g.target].configs)
    for ch in first.config_changes:
        after[ch.target] = TargetTopic(ch.target, after[ch.target].partitions, {**after[ch.target].configs, **ch.set})
    again = plan(selected, after, owned | {c.target for c in first.creates})
    assert again.empty and again.issues == first.issues
    # Every routed topic's target holds its partitions; a refused one is never routed.
    for t in selected:
        if t.name in again.routes:
            assert after[prefixed(t.name)].partitions >= t.partitions
        else:
            assert t.name in again.refused()


def test_a_refused_topic_is_its_own_verdict_between_stale_and_lagging() -> None:
    from drkit.core.status import Verdict, flow_verdict

    assert flow_verdict(True, 1.0, 300.0, True, [], refused=True) is Verdict.TOPIC_REFUSED
    assert Verdict.TOPIC_REFUSED.exit_code == 24
    assert flow_verdict(True, None, 300.0, True, [], refused=True) is Verdict.STALE
    assert flow_verdict(False, 1.0, 300.0, True, [], refused=True) is Verdict.SOURCE_UNREACHABLE
    assert flow_verdict(True, None, 300.0, False, [], target_reachable=False) is Verdict.TARGET_UNREACHABLE


def test_a_batch_reconciles_only_the_topics_whose_targets_are_not_ready() -> None:
    from drkit.core.topology import topics_to_prepare

    routes = {"ready": "A.ready", "short": "A.short", "refused": "A.refused"}
    targets = {"A.ready": 3, "A.short": 3, "A.refused": 1}
    needed = {"ready": 3, "short": 6, "new": 1, "refused": 2, "gone": 1}
    source = {"ready": 3, "short": 6, "new": 1, "refused": 2}
    assert topics_to_prepare(needed, source, routes, targets, frozenset({"refused"})) == ["new", "refused", "short"]
    # The source grew a topic the batch does not read beyond yet: its target is grown now all the same.
    assert topics_to_prepare({"ready": 1}, {"ready": 4}, routes, targets, frozenset()) == ["ready"]


def test_a_copied_record_limit_is_raised_by_the_origin_headers_bytes() -> None:
    """A record at the source topic's max.message.bytes gets an origin header on its copy: the target topic
    is created (or set) with the limit raised by the header's bytes, so the copy fits."""
    headroom = origin_overhead("A")
    source = SourceTopic("big", 1, "id1", {"max.message.bytes": "2000", "retention.ms": "5"})
    created = plan_topology("A->B", "B", [source], {}, prefixed, frozenset(), COPIED, headroom=headroom)
    assert created.creates[0].configs == {"max.message.bytes": str(2000 + headroom), "retention.ms": "5"}
    existing = {"A.big": TargetTopic("A.big", 1, {"max.message.bytes": "2000", "retention.ms": "5"})}
    changed = plan_topology("A->B", "B", [source], existing, prefixed, frozenset(), COPIED, headroom=headroom)
    assert [c.set for c in changed.config_changes] == [{"max.message.bytes": str(2000 + headroom)}]
    # Already raised: nothing to change; not set on the source: the target broker's default, untouched.
    existing = {"A.big": TargetTopic("A.big", 1, {"max.message.bytes": str(2000 + headroom), "retention.ms": "5"})}
    assert not plan_topology(
        "A->B", "B", [source], existing, prefixed, frozenset(), COPIED, headroom=headroom
    ).config_changes
    assert raised_limit({"retention.ms": "5"}, headroom) == {"retention.ms": "5"}
    assert raised_limit({"max.message.bytes": str(2**31 - 10)}, headroom) == {"max.message.bytes": str(2**31 - 1)}
    assert headroom >= len(f"drkit.origin{'A'}:{2**63 - 1}")


def test_the_copys_producer_limits_follow_the_target_topics_limits() -> None:
    """Room for a record at the largest limit; batches of several records within the smallest."""
    assert producer_limits([]) == {"message.max.bytes": 1_000_000, "batch.size": 1_000_000}  # librdkafka's
    assert producer_limits([20_060, 4_000_060]) == {"message.max.bytes": 4_000_060, "batch.size": 20_060}
    assert producer_limits([2**31 - 1]) == {"message.max.bytes": 1_000_000_000, "batch.size": 1_000_000}


def test_the_target_limits_are_those_the_plan_leaves() -> None:
    selected = [
        SourceTopic("new", 1, "i1", {"max.message.bytes": "5000"}),
        SourceTopic("set", 1, "i2", {"max.message.bytes": "7000"}),
        SourceTopic("kept", 1, "i3", {}),
        SourceTopic("default", 1, "i4", {}),
    ]
    targets = {
        "A.set": TargetTopic("A.set", 1, {"max.message.bytes": "100"}),
        "A.kept": TargetTopic("A.kept", 1, {"max.message.bytes": "9000"}),
        "A.default": TargetTopic("A.default", 1, {}),
    }
    p = plan_topology("A->B", "B", selected, targets, prefixed, frozenset(), COPIED, headroom=60)
    assert target_record_limits(p, targets) == {"A.new": 5060, "A.set": 7060, "A.kept": 9000}
