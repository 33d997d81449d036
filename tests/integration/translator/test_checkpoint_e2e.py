"""The translator end to end: a group resumes on the target exactly where it stopped on the source."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from support.clocks import ShiftedClock
from support.kafka_io import commit, consume_as_group, create_topic, produce, read_all, unique
from support.mirror_checks import by_partition
from support.waiting import wait_until

from drkit.config import DrkitConfig
from drkit.core.checkpoints import FindingKind
from drkit.core.translate import Position
from drkit.service import Drkit
from drkit.store.checkpoints import CheckpointTable


def latest(spark: Any, config: DrkitConfig, group: str, **kw: Any) -> dict[tuple[str, int], Any]:
    store = CheckpointTable(Drkit(config, spark).layout)
    return {
        (r.checkpoint.source_topic, r.checkpoint.partition): r.checkpoint for r in store.latest("A->B", [group], **kw)
    }


def assert_resumes_exactly(
    clusters: dict[str, str], topic: str, committed: dict[int, int], translated: dict[int, int | None]
) -> int:
    """On B, from the translated offsets, a consumer reads exactly the source records at or after the
    committed offsets: compared record by record, partition by partition. Returns the count."""
    source = by_partition(read_all(clusters["A"], topic))
    target_from = {p: o for p, o in translated.items() if o is not None}
    target = by_partition(read_all(clusters["B"], f"A.{topic}", start=target_from))
    checked = 0
    for p, records in source.items():
        expected = [r.content() for r in records if r.offset >= committed.get(p, 0)]
        got = [r.content() for r in target.get(p, [])]
        assert got == expected, (
            f"partition {p}: {len(got)} records from the translated offset, expected {len(expected)}"
        )
        checked += len(got)
    return checked


def test_group_resumes_on_target_exactly(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic, group = unique("orders"), unique("app")
    create_topic(clusters["A"], topic, 3)
    now = int(time.time() * 1000)
    produce(
        clusters["A"],
        topic,
        [
            {
                "partition": i % 3,
                "key": None if i % 5 == 0 else f"k{i}".encode(),
                "value": None if i % 13 == 0 else f"v{i}".encode(),
                "timestamp": now + i,
                "headers": [("h", str(i).encode())],
            }
            for i in range(900)
        ],
    )
    # A real consumer of the group processes part of the topic and commits.
    consumed = consume_as_group(clusters["A"], group, topic, 400)
    assert len(consumed) == 400
    config = make_config(
        [{"source": "A", "target": "B", "topics": {"include": [topic]}, "groups": {"include": [group]}}]
    )
    service = Drkit(config, spark)
    service.mirror(None, once=True)
    runs = service.translate(None, once=True)
    assert runs[0].groups == 1 and runs[0].appended == len(by_partition(consumed))

    checkpoints = latest(spark, config, group)
    committed = {p: c.upstream_offset for (_, p), c in checkpoints.items()}
    # The committed offsets are what the consumer really committed: one past its last record.
    for p, recs in by_partition(consumed).items():
        assert committed[p] == recs[-1].offset + 1
    translated = {p: c.downstream_offset for (_, p), c in checkpoints.items()}
    assert all(c.position in (Position.MIRRORED, Position.PAST_END) for c in checkpoints.values())
    unread = assert_resumes_exactly(clusters, topic, committed, translated)
    assert unread == 900 - 400

    # Nothing changed: the next run appends nothing.
    assert service.translate(None, once=True)[0].appended == 0


def test_compacted_and_transactional_topics(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    tag = unique("gaps")
    txn_topic = f"{tag}.txn"
    create_topic(clusters["A"], txn_topic, 1)
    producer = Producer({"bootstrap.servers": clusters["A"], "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for n, (keep, size) in enumerate([(True, 5), (False, 4), (True, 3), (False, 2), (True, 6)]):
        producer.begin_transaction()
        for i in range(size):
            producer.produce(txn_topic, key=f"t{n}-{i}".encode(), value=f"{keep}".encode())
        if keep:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    # Layout: 0-4 committed, 5 marker, 6-9 aborted, 10 marker, 11-13, 14, 15-16 aborted, 17, 18-23, 24.

    compacted = f"{tag}.compacted"
    create_topic(
        clusters["A"],
        compacted,
        1,
        {
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.001",
            "delete.retention.ms": "100",
            "min.compaction.lag.ms": "0",
        },
    )
    for wave in range(6):
        produce(
            clusters["A"],
            compacted,
            [
                {"key": (f"u{wave}-{i}" if i % 2 == 0 else "hot").encode(), "value": f"w{wave}-{i}".encode()}
                for i in range(20)
            ],
        )
        time.sleep(0.3)  # pacing: the waves land in segments of their own (segment.ms), for the cleaner

    def compacted_now() -> bool:
        if len(read_all(clusters["A"], compacted)) < 100:
            return True
        produce(clusters["A"], compacted, [{"key": b"roll", "value": b"x"}])  # rolls the active segment
        return False

    wait_until(compacted_now, 60, f"{compacted} compacted by the log cleaner", interval=1)
    offsets = [r.offset for r in read_all(clusters["A"], compacted)]
    holes = sorted(set(range(offsets[0], offsets[-1])) - set(offsets))
    assert holes, "the log was not compacted"

    config = make_config([{"source": "A", "target": "B", "topics": {"include": [f"{tag}\\..*"]}}])
    service = Drkit(config, spark)
    service.mirror(None, once=True)
    # Commit points: on a record, on a marker, inside aborted records, past the end; a compacted hole.
    cases = {txn_topic: [0, 3, 5, 7, 10, 14, 16, 24, 25], compacted: [0, holes[0], holes[-1], offsets[-1] + 1]}
    for topic, points in cases.items():
        for committed_offset in points:
            group = unique("g")
            commit(clusters["A"], group, {(topic, 0): committed_offset})
            config_g = make_config(
                [{"source": "A", "target": "B", "topics": {"include": [f"{tag}\\..*"]}, "groups": {"include": [group]}}]
            )
            Drkit(config_g, spark).translate(None, once=True)
            cp = latest(spark, config_g, group)[(topic, 0)]
            assert cp.upstream_offset == committed_offset
            assert_resumes_exactly(clusters, topic, {0: committed_offset}, {0: cp.downstream_offset})


def test_time_travel_and_findings(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic, other, group = unique("tt"), unique("notmirrored"), unique("grp")
    create_topic(clusters["A"], topic, 2)
    create_topic(clusters["A"], other, 1)
    produce(clusters["A"], topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(50)])
    produce(clusters["A"], other, [{"value": b"x"}])
    config = make_config(
        [{"source": "A", "target": "B", "topics": {"include": [topic]}, "groups": {"include": [group]}}]
    )
    clock = ShiftedClock()  # the checkpoint rows' time: moved on below instead of sleeping
    service = Drkit(config, spark, clock=clock)
    service.mirror(None, once=True)
    # A record on partition 1 the mirror has not copied: nothing of it is mirrored, and there is
    # something to mirror (an empty partition would translate to the target's start).
    produce(clusters["A"], topic, [{"partition": 1, "value": b"late"}])

    # Partition 1 has nothing mirrored; the other topic is not mirrored at all.
    commit(clusters["A"], group, {(topic, 0): 10, (topic, 1): 0, (other, 0): 1})
    run1 = service.translate(None, once=True)[0]
    kinds = {(f.kind, f.topic, f.partition) for f in run1.findings}
    assert (FindingKind.PARTITION_NOT_MIRRORED, topic, 1) in kinds
    assert (FindingKind.TOPIC_NOT_MIRRORED, other, None) in kinds
    first = latest(spark, config, group)
    assert first[(topic, 0)].downstream_offset == 10
    assert first[(topic, 1)].downstream_offset is None and first[(topic, 1)].position is Position.UNMIRRORED
    assert (other, 0) not in first
    clock.advance(1)
    between = clock()
    clock.advance(1)

    commit(clusters["A"], group, {(topic, 0): 40})
    service.translate(None, once=True)
    assert latest(spark, config, group)[(topic, 0)].downstream_offset == 40
    # As of a time between the two runs: the offsets the group had then.
    assert latest(spark, config, group, as_of=between)[(topic, 0)].downstream_offset == 10
    # Delta time travel to the first version that held checkpoints gives the same answer.
    from delta.tables import DeltaTable

    path = str(Drkit(config, spark).layout.checkpoints)
    versions = sorted(
        r["version"] for r in DeltaTable.forPath(spark, path).history().collect() if r["operation"] == "WRITE"
    )
    assert latest(spark, config, group, version=versions[0])[(topic, 0)].downstream_offset == 10

    # Reset backwards on the source: recorded, and reported.
    commit(clusters["A"], group, {(topic, 0): 5})
    run3 = service.translate(None, once=True)[0]
    assert any(f.kind is FindingKind.MOVED_BACKWARDS and f.partition == 0 for f in run3.findings)
    assert latest(spark, config, group)[(topic, 0)].downstream_offset == 5

    # A deleted group is reported; its last checkpoint stays.
    admin = AdminClient({"bootstrap.servers": clusters["A"]})  # kept alive until the future resolves
    admin.delete_consumer_groups([group])[group].result(30)
    run4 = service.translate(None, once=True)[0]
    assert any(f.kind is FindingKind.GROUP_DELETED and f.group == group for f in run4.findings)
    assert latest(spark, config, group)[(topic, 0)].upstream_offset == 5


def test_continuous_group_offset_sync(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic, group = unique("sync"), unique("syncgrp")
    create_topic(clusters["A"], topic, 1)
    produce(clusters["A"], topic, [{"value": f"v{i}".encode()} for i in range(30)])
    config = make_config(
        [
            {
                "source": "A",
                "target": "B",
                "topics": {"include": [topic]},
                "groups": {"include": [group]},
                "checkpoint": {"sync_group_offsets": True},
            }
        ]
    )
    service = Drkit(config, spark)
    service.mirror(None, once=True)
    commit(clusters["A"], group, {(topic, 0): 20})
    assert list(service.translate(None, once=True)[0].synced_groups) == [group]
    from support.kafka_io import committed_on

    assert committed_on(clusters["B"], group, f"A.{topic}") == {0: 20}
    # A reset backwards on the source never moves the target group back.
    commit(clusters["A"], group, {(topic, 0): 7})
    assert list(service.translate(None, once=True)[0].synced_groups) == []
    assert committed_on(clusters["B"], group, f"A.{topic}") == {0: 20}
