"""Gaps on the source: compaction, transaction markers and aborted records (read_committed)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from support.kafka_io import create_topic, produce, read_all, unique
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

    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    Drkit(config, spark).mirror(None, once=True)

    source = read_all(clusters["A"], topic)
    target = read_all(clusters["B"], f"A.{topic}")
    # Compaction may continue on the source after the copy; every copied record must exist with
    # the same content, and what is on the source now must be on the target.
    syncs = partition_syncs(spark, config, topic)
    target_by_offset = {r.offset: r for r in target}
    pairs = [pair for rng in syncs[0] for pair in rng.pairs()]
    assert len(pairs) == len(target), "every target record is described by exactly one sync"
    assert len({d for _, d in pairs}) == len(pairs)
    src_contents = {r.offset: r.content() for r in source}
    for u, d in pairs:
        assert d in target_by_offset
        if u in src_contents:
            assert src_contents[u] == target_by_offset[d].content()
    assert set(src_contents) <= {u for u, _ in pairs}, "a record still on the source was not copied"
    assert len(syncs[0]) > 1, "gaps on the source start new ranges"
    # Translation of an offset inside a gap goes to the next copied record, never past it.
    index = SyncIndex(syncs[0])
    for committed in range(0, max(src_contents) + 2):
        expected = [u for u, _ in pairs if u >= committed]
        translated = index.translate(committed).offset
        assert translated is not None
        rest = [r for r in target if r.offset >= translated]
        assert len(rest) == len(expected)


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
    assert [r.value for r in source] == committed
    assert [r.value for r in target] == committed
    assert_exact_copy(source, target)
    syncs = partition_syncs(spark, config, topic)
    audit = audit_syncs(syncs, source, target)
    assert audit.orphans == 0 and audit.described == len(committed)
    # Markers and aborted records are gaps upstream: one range per committed transaction (+ tail).
    # Layout: 0-4 committed, 5 marker, 6-9 aborted, 10 marker, 11-13, 14, 15-16 aborted, 17,
    # 18-23, 24 marker, 25 plain.
    assert [(r.upstream_first, r.upstream_last) for r in sorted(syncs[0])] == [(0, 4), (11, 13), (18, 23), (25, 25)]
