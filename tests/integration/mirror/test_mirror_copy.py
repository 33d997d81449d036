"""The mirror copies records faithfully and records exact offset-syncs (real brokers, Spark, Delta)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from support.kafka_io import create_topic, produce, read_all, unique
from support.mirror_checks import assert_exact_copy, audit_syncs

from drkit.config import DrkitConfig
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable


def syncs(spark: Any, config: DrkitConfig, flow: str, topic: str) -> dict[int, list[Any]]:
    ranges = SyncTable(Drkit(config, spark).layout).ranges(flow, [topic])
    return {p: rs for (t, p), rs in ranges.items() if t == topic}


def topics_on(bootstrap: str) -> dict[str, int]:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: len(t.partitions) for name, t in meta.topics.items()}


def varied_records(n: int, partitions: int) -> list[dict[str, Any]]:
    """Headers, null keys, tombstones, binary values and explicit timestamps."""
    out: list[dict[str, Any]] = []
    base = int(time.time() * 1000) - 60_000  # recent: older records would fall to the 7-day retention
    for i in range(n):
        rec: dict[str, Any] = {
            "partition": i % partitions,
            "key": None if i % 7 == 0 else f"key-{i}".encode(),
            "value": None if i % 11 == 0 else bytes([i % 256, 0, 255, (i * 7) % 256]) + f"v{i}".encode(),
            "timestamp": base + i,
        }
        if i % 3 == 0:
            rec["headers"] = [("trace", f"t{i}".encode()), ("empty", b""), ("bin", bytes([0, 1, 2]))]
        out.append(rec)
    return out


def test_selected_topics_are_copied_record_by_record(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    tag = unique("sel")
    orders, payments, skipped, other = f"{tag}.orders", f"{tag}.payments", f"{tag}.skip", unique("other")
    create_topic(clusters["A"], orders, 3)
    create_topic(clusters["A"], payments, 2)
    create_topic(clusters["A"], skipped, 1)
    create_topic(clusters["A"], other, 1)
    for topic, parts in ((orders, 3), (payments, 2), (skipped, 1), (other, 1)):
        produce(clusters["A"], topic, varied_records(300, parts))
    config = make_config(
        [{"source": "A", "target": "B", "topics": {"include": [f"{tag}\\..*"], "exclude": [".*\\.skip"]}}]
    )

    jobs = Drkit(config, spark).mirror("A->B", once=True)

    on_b = topics_on(clusters["B"])
    assert on_b.get(f"A.{orders}") == 3, "missing target topic is created with the source's partition count"
    assert on_b.get(f"A.{payments}") == 2
    assert f"A.{skipped}" not in on_b and f"A.{other}" not in on_b
    assert jobs[0].records == 600
    for topic in (orders, payments):
        source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
        assert_exact_copy(source, target)
        audit = audit_syncs(syncs(spark, config, "A->B", topic), source, target)
        assert audit.described == len(target) == 300 and audit.orphans == 0

    # A second run finds nothing new: no batch, no new record, no new sync.
    again = Drkit(config, spark).mirror("A->B", once=True)
    assert again[0].records == 0
    assert len(read_all(clusters["B"], f"A.{orders}")) == 300


def test_a_batch_copied_by_the_driver_is_as_exact_as_one_copied_by_tasks(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], caplog: pytest.LogCaptureFixture
) -> None:
    """Batches of 150 records: first copied by Spark tasks on the executors (the driver's copy turned off),
    then, on the same stream, by the driver's own reader; record by record, the copy and its syncs are the same."""
    topic = unique("paths")
    create_topic(clusters["A"], topic, 3)
    records = varied_records(1_800, 3)
    produce(clusters["A"], topic, records[:900])
    flow = {"source": "A", "target": "B", "topics": {"include": [topic]}}
    tasks_only = make_config([{**flow, "mirror": {"max_offsets_per_trigger": 150, "driver_copy_max_records": 0}}])
    by_driver = make_config([{**flow, "mirror": {"max_offsets_per_trigger": 150}}])
    with caplog.at_level("INFO", logger="drkit.mirror.job"):
        [first] = Drkit(tasks_only, spark).mirror("A->B", once=True)
        produce(clusters["A"], topic, records[900:])
        [second] = Drkit(by_driver, spark).mirror("A->B", once=True)
    lines = [r.getMessage() for r in caplog.records if "mirrored" in r.getMessage()]
    assert first.records == second.records == 900 and first.batches == second.batches == 6, lines
    assert all("task(s): executor driver@" in line for line in lines[:6]), lines
    assert all("copied by the driver" in line for line in lines[6:]), lines
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert_exact_copy(source, target)
    audit = audit_syncs(syncs(spark, by_driver, "A->B", topic), source, target)
    assert audit.described == len(target) == 1_800 and audit.orphans == 0


def test_identity_policy_keeps_the_name(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic = unique("ident")
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, varied_records(50, 2))
    config = make_config(
        [{"source": "A", "target": "B", "replication_policy": "identity", "topics": {"include": [topic]}}]
    )
    Drkit(config, spark).mirror(None, once=True)
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], topic)
    assert_exact_copy(source, target)
    audit_syncs(syncs(spark, config, "A->B", topic), source, target)


def test_reverse_flow_never_copies_back(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    tag = unique("rv")
    create_topic(clusters["A"], f"{tag}.a", 1)
    create_topic(clusters["B"], f"{tag}.b", 1)
    produce(clusters["A"], f"{tag}.a", varied_records(20, 1))
    produce(clusters["B"], f"{tag}.b", varied_records(30, 1))
    selection = {"include": [f".*{tag}.*"]}
    config = make_config(
        [{"source": "A", "target": "B", "topics": selection}, {"source": "B", "target": "A", "topics": selection}]
    )
    service = Drkit(config, spark)
    for _ in range(2):  # twice, so each side sees the other's copies
        service.mirror("A->B", once=True)
        service.mirror("B->A", once=True)
    on_a, on_b = topics_on(clusters["A"]), topics_on(clusters["B"])
    assert f"A.{tag}.a" in on_b and f"B.{tag}.b" in on_a
    assert not [t for t in on_a if t.startswith(f"B.A.{tag}")], "A's records came back from B"
    assert not [t for t in on_b if t.startswith(f"A.B.{tag}")], "B's records came back from A"
    assert len(read_all(clusters["B"], f"A.{tag}.a")) == 20
    assert len(read_all(clusters["A"], f"B.{tag}.b")) == 30


def test_target_topic_with_fewer_partitions_is_refused_and_held_until_grown(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    """A target topic drkit did not create, with too few partitions: the mirror does not stop; that topic is
    refused and held (nothing of it copied, status names it) while Spark commits past its records; once the
    target is grown, the next batch copies every held record, in order, exactly."""
    topic = unique("fewer")
    create_topic(clusters["A"], topic, 3)
    create_topic(clusters["B"], f"A.{topic}", 1)
    produce(clusters["A"], topic, varied_records(9, 3))
    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    [first] = Drkit(config, spark).mirror(None, once=True)
    assert first.records == 0 and read_all(clusters["B"], f"A.{topic}") == []
    [flow] = Drkit(config).status("A->B").flows
    [issue] = flow.topic_issues
    assert (issue.kind.value, issue.source, issue.target) == ("target_too_small", topic, f"A.{topic}")
    assert "has 1 partitions and source topic" in issue.detail and "add partitions to it (at least 3)" in issue.detail

    admin = AdminClient({"bootstrap.servers": clusters["B"]})
    admin.create_partitions([NewPartitions(f"A.{topic}", 3)])[f"A.{topic}"].result(10)
    produce(clusters["A"], topic, varied_records(3, 3))  # a batch runs when the source has new records
    [second] = Drkit(config, spark).mirror(None, once=True)
    assert second.records == 12
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert_exact_copy(source, target)
    audit = audit_syncs(syncs(spark, config, "A->B", topic), source, target)
    assert audit.described == len(target) == 12 and audit.orphans == 0
    assert Drkit(config).status("A->B").flows[0].topic_issues == ()
