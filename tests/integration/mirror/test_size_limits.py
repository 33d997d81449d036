"""Records at the size limits (real brokers, Spark, Delta): a record at its topic's max.message.bytes, which
the origin header pushes over it on the copy, and records over librdkafka's 1 MB default on topics that
allow them, are mirrored, counted record by record; a target that cannot hold a record refuses it in one
line and the mirror stops instead of retrying."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from support.kafka_io import create_topic, produce, read_all, unique
from support.mirror_checks import assert_exact_copy, audit_syncs

from drkit.config import DrkitConfig
from drkit.core.origin import origin_overhead
from drkit.errors import MirrorError
from drkit.mirror.failure import looks_like_outage
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable

#: A record batch of one record without key or headers, produced uncompressed: its bytes beyond the value
#: (the batch header, 61, and the record's own fields).
BATCH_OVERHEAD = 72


def limit_of(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return int(entries["max.message.bytes"].value)


def produce_one(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "message.max.bytes": 10_000_000}
    )
    failed: list[Any] = []
    producer.produce(topic, value, on_delivery=lambda err, msg: failed.append(err) if err else None)
    producer.flush(30)
    if failed:
        raise KafkaException(failed[0])


def syncs(spark: Any, config: DrkitConfig, topic: str) -> dict[int, list[Any]]:
    ranges = SyncTable(Drkit(config, spark).layout).ranges("A->B", [topic])
    return {p: rs for (t, p), rs in ranges.items() if t == topic}


def test_a_record_at_the_topics_limit_is_mirrored_though_its_origin_header_pushes_it_over(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    limit = 20_000
    topic = unique("at-limit")
    create_topic(clusters["A"], topic, 1, {"max.message.bytes": str(limit)})
    value = os.urandom(limit - BATCH_OVERHEAD)  # random: compression cannot shrink it back under the limit
    produce_one(clusters["A"], topic, value)
    with pytest.raises(KafkaException, match="MSG_SIZE_TOO_LARGE"):
        produce_one(clusters["A"], topic, value + b"x")  # one byte more: the record is exactly at the limit
    produce(clusters["A"], topic, [{"value": b"after-%d" % i} for i in range(5)])

    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    [job] = Drkit(config, spark).mirror(None, once=True)

    assert limit_of(clusters["B"], f"A.{topic}") == limit + origin_overhead("A")
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert job.records == len(source) == 6
    assert_exact_copy(source, target)
    assert audit_syncs(syncs(spark, config, topic), source, target).described == 6


@pytest.mark.parametrize("driver_copy_max_records", [100, 0], ids=["driver", "tasks"])
def test_records_over_a_megabyte_are_mirrored_where_the_topic_allows_them(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], driver_copy_max_records: int
) -> None:
    """librdkafka's producer refuses records over 1 MB by default: the copy's limit follows the topics'."""
    topic = unique("over-1mb")
    create_topic(clusters["A"], topic, 1, {"max.message.bytes": "4000000"})
    sizes = [10, 1_500_000, 20, 3_000_000, 30]
    for size in sizes:
        produce_one(clusters["A"], topic, os.urandom(size))
    flow = {"source": "A", "target": "B", "topics": {"include": [topic]}}
    config = make_config([{**flow, "mirror": {"driver_copy_max_records": driver_copy_max_records}}])
    [job] = Drkit(config, spark).mirror(None, once=True)

    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert job.records == len(source) == len(sizes)
    assert [len(r.value or b"") for r in target] == sizes
    assert_exact_copy(source, target)
    assert audit_syncs(syncs(spark, config, topic), source, target).described == len(sizes)


def test_a_record_the_target_cannot_hold_stops_a_running_mirror_in_one_line(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    """A target topic drkit did not create, whose limit is below the source's and whose configs are not
    synced: the running mirror (not --once) stops with one line naming the record, never retries for ever."""
    topic = unique("refused")
    create_topic(clusters["A"], topic, 1, {"max.message.bytes": "20000"})
    create_topic(clusters["B"], f"A.{topic}", 1, {"max.message.bytes": "20000"})
    produce(clusters["A"], topic, [{"value": b"small-%d" % i} for i in range(3)])
    produce_one(clusters["A"], topic, os.urandom(20_000 - BATCH_OVERHEAD))
    flow = {"source": "A", "target": "B", "topics": {"include": [topic]}, "topology": {"sync_configs": False}}
    config = make_config([{**flow, "mirror": {"trigger_interval_seconds": 0.5}}])

    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            Drkit(config, spark).mirror(None, once=False)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(180)
    assert not runner.is_alive(), "the mirror kept retrying a record its target cannot hold"
    [error] = outcome
    assert isinstance(error, MirrorError), error
    message = str(error)
    assert "\n" not in message and f"record {topic}/0@3 could not be delivered to A.{topic}/0" in message, message
    assert "MSG_SIZE_TOO_LARGE" in message, message
    # Each small record on the target at least once and at most COPIES_CEILING times, the refused one never,
    # nothing else: counted by identity (the source offset its origin header names, and its contents).
    # The ceiling: the continuous copier produces each offset of its lane once (an idempotent producer; a
    # re-fetched offset below the lane's reach is skipped); its lane failed at record 3, so the batch copies
    # its own range (at-least-once: those copies again), one attempt, since a refused record is no outage
    # (drkit.core.outage: FAIL at once, no quick retry), and the mirror stops. 1 + 1 copies.
    assert not looks_like_outage(message), message
    copies_ceiling = 2
    source = read_all(clusters["A"], topic)
    small, refused = source[:3], source[3]
    assert [r.value for r in small] == [b"small-%d" % i for i in range(3)] and refused.offset == 3
    target = read_all(clusters["B"], f"A.{topic}")
    copies = Counter((r.origin("A"), r.content()) for r in target)
    allowed = {(r.offset, r.content()) for r in small}
    assert not set(copies) - allowed, f"records that are no small record's copy reached the target: {copies}"
    counts = [copies[(r.offset, r.content())] for r in small]
    assert all(1 <= n <= copies_ceiling for n in counts), f"copies of the small records: {counts}"
    print(f"copies of each small record: {counts} (ceiling {copies_ceiling})")
