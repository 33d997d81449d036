"""The commit follower on real brokers: groups committing every 100 ms while the Delta interval is 30 s.

Only the follower can be fresh here: the translator's interval run writes Delta once at the start, then not
for 30 s. After the groups stop, each group's newest record on the target's checkpoint topic must hold exactly
the group's last committed offset C, the topic must be compacted with one partition, failover (a dry run) must
place each group at that C's translation (nothing re-read), where the Delta rows alone are older; the ages
measured by the follower (source commit timestamp -> append acknowledged) are printed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import ConfigResource
from prometheus_client import REGISTRY
from support.kafka_io import commit, create_topic, produce, unique

from drkit import metrics
from drkit.config import DrkitConfig
from drkit.core.live_checkpoints import CHECKPOINT_TOPIC, decode_value
from drkit.kafka.admin import KafkaAdmin
from drkit.service import Drkit
from drkit.translator.job import TranslatorRunner

FLOW = "A->B"
GROUPS = 4
STEPS = 30  # commits per group and partition, one every 100 ms
SETTLE_SECONDS = 3.0  # the topic holds the last commits within this after the groups stop


def _bucket_counts() -> dict[float, float]:
    out = {}
    for bound in (*map(float, metrics.FOLLOW_AGE_BUCKETS), float("inf")):
        value = REGISTRY.get_sample_value(
            "drkit_checkpoint_follow_age_seconds_bucket", {"flow": FLOW, "le": _le(bound)}
        )
        out[bound] = value or 0.0
    return out


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def _quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The upper bound of the bucket holding quantile ``q`` of the ages observed between the two readings."""
    total = after[float("inf")] - before[float("inf")]
    for bound in sorted(after):
        if after[bound] - before[bound] >= q * total:
            return bound
    return float("inf")


def test_the_checkpoint_topic_holds_each_groups_last_commit_and_failover_uses_it(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic = unique("follow")
    groups = [unique(f"follow-g{i}") for i in range(GROUPS)]
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(800)])
    for group in groups:
        commit(clusters["A"], group, {(topic, 0): 1, (topic, 1): 1})
    flow = {
        "source": "A",
        "target": "B",
        "topics": {"include": [topic]},
        "groups": {"include": groups},
        "checkpoint": {"interval_seconds": 30, "follow_commits": True, "follow_interval_ms": 100},
    }
    service = Drkit(make_config([flow]), spark)
    service.mirror(None, once=True)
    runner = TranslatorRunner(service.translator_context(), service.config.flows_named(FLOW))
    thread = threading.Thread(target=runner.run, args=(False,), daemon=True)
    before = _bucket_counts()
    thread.start()
    consumers = {
        g: Consumer({"bootstrap.servers": clusters["A"], "group.id": g, "enable.auto.commit": False}) for g in groups
    }
    try:
        deadline = time.monotonic() + 60
        while not (runner.followers and runner.followers[0].caught_up) or not service.context.checkpoints.latest(
            FLOW, groups
        ):
            assert time.monotonic() < deadline, "the follower never caught up / Delta never written"
            time.sleep(0.1)
        delta_before = {
            (r.checkpoint.group, r.checkpoint.partition): r.checkpoint.upstream_offset
            for r in service.context.checkpoints.latest(FLOW, groups)
        }
        assert set(delta_before.values()) == {1}

        last: dict[tuple[str, int], int] = {}
        for step in range(1, STEPS + 1):
            started = time.monotonic()
            for i, group in enumerate(groups):
                offsets = {0: 1 + step * 10 + i, 1: 1 + step * 7 + i}
                if step == STEPS and i == 0:
                    offsets = {0: 5, 1: 5}  # a reset to earlier as the last commit: newer in log order, kept
                consumers[group].commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
                )
                last.update({(group, p): o for p, o in offsets.items()})
            time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
        stopped_at = time.monotonic()

        target = KafkaAdmin(service.config.clusters["B"], "B")
        held: dict[tuple[str, int], int] = {}
        while time.monotonic() < stopped_at + SETTLE_SECONDS:
            found = target.live_checkpoint_values(FLOW) or {}
            held = {
                (c.checkpoint.group, c.checkpoint.partition): c.checkpoint.upstream_offset
                for g, value in found.items()
                if g in groups
                for c in decode_value(FLOW, g, value)
            }
            if held == last:
                break
            time.sleep(0.05)
        settled = time.monotonic() - stopped_at
        assert held == last, f"checkpoint topic {held} != last commits {last}"
        resource = ConfigResource(ConfigResource.Type.TOPIC, CHECKPOINT_TOPIC)
        configs = target.client.describe_configs([resource])[resource].result(30)
        assert configs["cleanup.policy"].value == "compact"
        assert target.partition_counts()[CHECKPOINT_TOPIC] == 1

        # Delta alone is older: its only run was before the commits (the interval is 30 s).
        delta = {
            (r.checkpoint.group, r.checkpoint.partition): r.checkpoint.upstream_offset
            for r in service.context.checkpoints.latest(FLOW, groups)
        }
        assert delta == delta_before and delta != last

        plan = service.failover(FLOW, groups).plan
        assert not plan.refusals, plan.refusals
        committed = {(m.group, m.partition): m.committed for m in plan.moves}
        assert committed == last  # the groups' last C: nothing re-read
        assert all(m.new == m.committed for m in plan.moves), plan.moves  # mirrored 1:1 onto a fresh topic

        after = _bucket_counts()
        count = after[float("inf")] - before[float("inf")]
        p50, p99 = _quantile(before, after, 0.5), _quantile(before, after, 0.99)
        print(
            f"\nfollow: {GROUPS} groups x 2 partitions x {STEPS} commits; {count:.0f} appended commits observed; "
            f"age p50 <= {p50 * 1000:.0f} ms, p99 <= {p99 * 1000:.0f} ms (histogram buckets); "
            f"the topic settled {settled * 1000:.0f} ms after the last commit"
        )
        assert count > 0
    finally:
        runner.stopped.set()
        thread.join(60)
        for consumer in consumers.values():
            consumer.close()
    assert not thread.is_alive()
