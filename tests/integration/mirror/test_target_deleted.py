"""A target topic deleted under its offset-syncs (issue 15, item 2): the mirror refuses to recreate it
and writes no sync, status reports it with a non-zero exit code instead of lag 0."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from support.kafka_io import commit, create_topic, end_offsets, produce, unique

from drkit.config import DrkitConfig
from drkit.core.consistency import DivergenceKind
from drkit.core.status import Verdict
from drkit.errors import RefusedError
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} still listed after deletion"
        time.sleep(0.2)


def recreate_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` again as soon as the broker has finished deleting the old one."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
            return
        except KafkaException as exc:
            if exc.args[0].code() != 36 or time.monotonic() > deadline:  # TOPIC_ALREADY_EXISTS: still deleting
                raise
            time.sleep(0.5)


def sync_rows(service: Drkit, topic: str) -> int:
    return len(SyncTable(service.layout).history("A->B", topic))


def test_a_deleted_target_topic_is_not_recreated_and_status_reports_it(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic, group = unique("gone"), unique("goneg")
    target = f"A.{topic}"
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(30)])
    flow_config = {"source": "A", "target": "B", "topics": {"include": [topic]}, "groups": {"include": [group]}}
    config = make_config([flow_config])
    service = Drkit(config, spark)
    service.mirror(None, once=True)
    assert end_offsets(clusters["B"], target) == {0: 15, 1: 15}
    rows = sync_rows(service, topic)
    assert rows > 0
    service.translate(None, once=True)
    assert service.status(None).verdict is Verdict.HEALTHY

    delete_topic(clusters["B"], target)
    produce(clusters["A"], topic, [{"partition": 0, "value": b"after"} for _ in range(5)])

    # The mirror refuses before creating the topic: none on B, no sync written, one clear line.
    with pytest.raises(RefusedError) as info:
        service.mirror(None, once=True)
    message = str(info.value)
    assert info.value.exit_code == 3
    assert "\n" not in message
    assert message.startswith(
        f"target topic {target} on B does not exist (partition 0: missing, synced up to 14; "
        "partition 1: missing, synced up to 14): it was deleted or truncated, and the offset-syncs of flow A->B"
    ), message
    assert "drkit does not recreate it" in message and f"exclude {topic}" in message, message
    assert target not in AdminClient({"bootstrap.servers": clusters["B"]}).list_topics(timeout=10).topics
    assert sync_rows(service, topic) == rows

    report = service.status(None)
    assert report.verdict is Verdict.TARGET_DIVERGED and report.verdict.exit_code == 23
    [flow] = report.flows
    assert {(d.kind, d.partition) for d in flow.target_divergences} == {
        (DivergenceKind.TOPIC_MISSING, 0),
        (DivergenceKind.TOPIC_MISSING, 1),
    }
    assert flow.target_problem.startswith(f"target topic {target} on B does not exist")

    # Recreated empty (by a person or auto-creation): the same refusal, now with the ends seen.
    recreate_topic(clusters["B"], target, 2)
    with pytest.raises(RefusedError) as info:
        service.mirror(None, once=True)
    assert str(info.value).startswith(
        f"target topic {target} on B holds fewer records than its offset-syncs say "
        "(partition 0: end 0, synced up to 14; partition 1: end 0, synced up to 14)"
    ), str(info.value)
    assert end_offsets(clusters["B"], target) == {0: 0, 1: 0}  # nothing produced onto it
    assert sync_rows(service, topic) == rows
    report = service.status(None)
    assert report.verdict is Verdict.TARGET_DIVERGED
    assert {(d.kind, d.end) for d in report.flows[0].target_divergences} == {(DivergenceKind.BELOW_SYNCED_END, 0)}

    # Failover refuses to translate onto it.
    commit(clusters["A"], group, {(topic, 0): 10})
    service.translate(None, once=True)
    result = service.failover("A->B", [group])
    assert not result.plan.ok
    assert [r.reason.value for r in result.plan.refusals] == ["target_diverged"], result.plan.refusals
