"""Gaps on the source: compaction, transaction markers and aborted records (read_committed)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from support.kafka_io import Rec, create_topic, produce, read_all, unique
from support.mirror_checks import assert_exact_copy, audit_syncs, partition_syncs

from drkit.config import DrkitConfig
from drkit.core.translate import SyncIndex
from drkit.service import Drkit


def test_compacted_topic_with_gaps(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic = unique("compacted")
    create_topic(
        clusters["A"],
        topic,
        1,
        {
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.001",
            "delete.retention.ms": "100",
            "min.compaction.lag.ms": "0",
        },
    )
    # Unique keys interleaved with updates of one hot key, with pauses so segments roll: the cleaner
    # keeps the unique keys and removes the superseded hot records, leaving holes inside the log.
    for wave in range(6):
        produce(
            clusters["A"],
            topic,
            [
                {"key": (f"u{wave}-{i}" if i % 2 == 0 else "hot").encode(), "value": f"w{wave}-{i}".encode()}
                for i in range(20)
            ],
        )
        time.sleep(0.3)
    deadline = time.monotonic() + 60
    source = read_all(clusters["A"], topic)
    while len(source) >= 100 and time.monotonic() < deadline:
        time.sleep(1)
        produce(clusters["A"], topic, [{"key": b"roll", "value": b"x"}])  # roll the active segment
        source = read_all(clusters["A"], topic)
    offsets = [r.offset for r in source]
    assert offsets != list(range(offsets[0], offsets[0] + len(offsets))), "the log was not compacted"
    # Freeze the log before the copy (no record is a day old, so the cleaner takes none), so that what is on
    # the source after the copy is what was there during it, and the copy is compared with it exactly.
    admin = AdminClient({"bootstrap.servers": clusters["A"]})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("min.compaction.lag.ms", str(24 * 3600 * 1000), incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    source = _settled(clusters["A"], topic)

    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    Drkit(config, spark).mirror(None, once=True)

    after = read_all(clusters["A"], topic)
    assert after == source, "the source changed during the copy: compaction was not frozen"
    target = read_all(clusters["B"], f"A.{topic}")
    # Record by record, both ways: each source record (offset, key, value, headers, timestamp) once on the target,
    # its copy naming its offset in the origin header; nothing else on the target.
    assert_exact_copy(source, target)
    syncs = partition_syncs(spark, config, topic)
    # Each sync pair points at a source record and its copy; each record on either side described exactly once.
    audit = audit_syncs(syncs, source, target, exact=True)
    assert audit.described == len(source) == len(target) and audit.duplicates == 0
    pairs = sorted(pair for rng in syncs[0] for pair in rng.pairs())
    assert [u for u, _ in pairs] == [r.offset for r in source] and [d for _, d in pairs] == [r.offset for r in target]
    assert len(syncs[0]) > 1, "gaps on the source start new ranges"
    # Translation of an offset inside a gap goes to the next copied record, never past it: a group placed at the
    # translation reads exactly the copies of the source's records from the committed offset on.
    index = SyncIndex(syncs[0])
    for committed in range(0, source[-1].offset + 2):
        expected = [r.offset for r in source if r.offset >= committed]
        translated = index.translate(committed).offset
        assert translated is not None
        rest = [r.origin("A") for r in target if r.offset >= translated]
        assert rest == expected, f"a group at {committed} reads the copies of {rest[:5]}..., not of {expected[:5]}..."


def _settled(bootstrap: str, topic: str) -> list[Rec]:
    """The topic's records once two reads a second apart agree (a cleaner pass under way has ended)."""
    deadline = time.monotonic() + 60
    before = read_all(bootstrap, topic)
    while time.monotonic() < deadline:
        time.sleep(1)
        now = read_all(bootstrap, topic)
        if now == before:
            return now
        before = now
    raise AssertionError(f"{topic}: the log still changed after 60 s with compaction frozen")


def _transactional(bootstrap: str, topic: str, batches: list[tuple[bool, int]]) -> list[bytes]:
    """Write transactions (commit?, size); return the values of committed records in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    committed: list[bytes] = []
    for n, (commit, size) in enumerate(batches):
        producer.begin_transaction()
        values = [f"t{n}-{i}".encode() for i in range(size)]
        for v in values:
            producer.produce(topic, key=v, value=v, partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
            committed += values
        else:
            producer.abort_transaction(30)
    return committed


#: The offsets of the committed records the transactions below leave on a fresh partition.
COMMITTED_OFFSETS = [*range(0, 5), *range(11, 14), *range(18, 24), 25]


def test_transactions_only_committed_records_are_mirrored(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic = unique("txn")
    create_topic(clusters["A"], topic, 1)
    committed = _transactional(clusters["A"], topic, [(True, 5), (False, 4), (True, 3), (False, 2), (True, 6)])
    produce(clusters["A"], topic, [{"key": b"plain", "value": b"plain"}])  # a non-transactional tail
    committed.append(b"plain")

    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    Drkit(config, spark).mirror(None, once=True)

    source = read_all(clusters["A"], topic)  # read_committed: aborted records and markers skipped
    target = read_all(clusters["B"], f"A.{topic}")
    # Markers and aborted records are gaps upstream: one range per committed transaction (+ tail).
    # Layout: 0-4 committed, 5 marker, 6-9 aborted, 10 marker, 11-13, 14, 15-16 aborted, 17,
    # 18-23, 24 marker, 25 plain.
    assert [(r.offset, r.value) for r in source] == list(zip(COMMITTED_OFFSETS, committed, strict=True))
    # Record by record, both ways: each committed source record once on the target, naming its source offset.
    assert_exact_copy(source, target)
    assert [(r.origin("A"), r.value) for r in target] == list(zip(COMMITTED_OFFSETS, committed, strict=True))
    syncs = partition_syncs(spark, config, topic)
    audit = audit_syncs(syncs, source, target)
    assert audit.orphans == 0 and audit.described == len(committed)
    assert [(r.upstream_first, r.upstream_last) for r in sorted(syncs[0])] == [(0, 4), (11, 13), (18, 23), (25, 25)]
