"""Reading a backlog's copy back from the target and checking it record by record against what was produced
(producers.produce_timed_backlog): every sequence number once, on its source partition, at the right size; and
the latency of each first copy (the target's LogAppendTime minus the source record's CreateTime)."""

from __future__ import annotations

import time
import uuid
from array import array
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, TopicPartition

from scripts.bench.lib.producers import SEQ_BYTES


@dataclass
class TargetCheck:
    records: int = 0
    missing: int = 0
    duplicates: int = 0
    unexpected: int = 0  # sequence numbers out of range, or values of the wrong size
    wrong_partition: int = 0
    timestamp_types: dict[str, int] = field(default_factory=dict)
    latencies: array[int] = field(default_factory=lambda: array("q"))
    first_append_ms: int | None = None
    last_append_ms: int | None = None


_TS_TYPES = {0: "not_available", 1: "create_time", 2: "log_append_time"}


def read_target(
    bootstrap: str, topic: str, partitions: int, source_ts: array[int], size: int, idle_timeout: float = 60.0
) -> TargetCheck:
    """Read every record of ``topic`` (read_committed) and compare it with what was produced."""
    records = len(source_ts)
    seen = bytearray(records)  # copies per sequence number, saturating at 255
    check = TargetCheck()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"_drkit-bench-read-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pending = {p for p, end in ends.items() if end > 0}
        last_progress = time.monotonic()
        while pending:
            if time.monotonic() - last_progress > idle_timeout:
                raise TimeoutError(f"could not read {topic} partitions {sorted(pending)} to their end")
            for msg in consumer.consume(2000, 1.0):
                if msg.error():
                    raise KafkaException(msg.error())
                last_progress = time.monotonic()
                partition, value = msg.partition(), msg.value() or b""
                if msg.offset() >= ends[partition] - 1:
                    pending.discard(partition)
                check.records += 1
                ts_type, ts = msg.timestamp()
                name = _TS_TYPES.get(ts_type, str(ts_type))
                check.timestamp_types[name] = check.timestamp_types.get(name, 0) + 1
                seq = int.from_bytes(value[:SEQ_BYTES], "big")
                if len(value) != size or seq >= records:
                    check.unexpected += 1
                    continue
                if partition != seq % partitions:
                    check.wrong_partition += 1
                if seen[seq]:
                    check.duplicates += 1
                elif ts_type == 2:  # broker append time: only then is there a latency
                    check.latencies.append(ts - source_ts[seq])
                    first, last = check.first_append_ms, check.last_append_ms
                    check.first_append_ms = ts if first is None else min(first, ts)
                    check.last_append_ms = ts if last is None else max(last, ts)
                seen[seq] = min(255, seen[seq] + 1)
    finally:
        consumer.close()
    check.missing = seen.count(0)
    return check
