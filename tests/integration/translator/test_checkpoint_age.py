"""Checkpoint age counts from the translator's last confirmation, not from the last change.

An idle group's offsets do not change, so the translator appends no new checkpoint row; but each run
confirms them. Failover (and status) must see the age since that confirmation: a group the translator
just confirmed is fresh however old its row is, and one it stopped confirming becomes stale.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from support.clocks import ManualClock
from support.kafka_io import commit, create_topic, produce, unique

from drkit.config import DrkitConfig
from drkit.core.refusals import RefusalReason
from drkit.service import Drkit

LIMIT = 4.0  # max_age_seconds of the flow


def test_an_idle_group_confirmed_by_the_translator_is_fresh_and_one_left_unconfirmed_is_stale(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic, idle, dropped = unique("idle"), unique("idle-group"), unique("dropped-group")
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(40)])
    for group in (idle, dropped):
        commit(clusters["A"], group, {(topic, 0): 10, (topic, 1): 20})
    flow = {
        "source": "A",
        "target": "B",
        "topics": {"include": [topic]},
        "groups": {"include": [idle, dropped]},
        "checkpoint": {"max_age_seconds": LIMIT},
    }
    clock = ManualClock()
    service = Drkit(make_config([flow]), spark, clock=clock)
    service.mirror(None, once=True)
    [first] = service.translate(None, once=True)
    assert first.appended == 4

    clock.advance(LIMIT + 1.5)  # both rows are now older than the limit
    # The translator runs again for the idle group only (the other left its selection): no row changes.
    confirming = Drkit(make_config([{**flow, "groups": {"include": [idle]}}]), spark, clock=clock)
    [again] = confirming.translate(None, once=True)
    assert again.appended == 0 and again.groups == 1

    clock.advance(1.0)
    plan = service.failover("A->B", [idle, dropped]).plan
    ages = {m.group: m.age_seconds for m in plan.moves}
    assert ages[idle] == 1.0, ages  # counted from the confirmation, a second ago
    assert ages[dropped] == LIMIT + 2.5, ages  # counted from its row
    stale = {r.group for r in plan.refusals if r.reason is RefusalReason.STALE}
    assert stale == {dropped}, plan.refusals
    shown = {g.group: g.checkpoint_age_seconds for g in service.status("A->B").flows[0].groups}
    assert shown == {idle: 1.0, dropped: LIMIT + 2.5}, shown  # status shows the age failover judges by
