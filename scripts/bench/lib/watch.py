"""Watching a copier's target topic from outside: how many records it holds, when they were appended (B's
LogAppendTime, see clusters.py), and each paced record's latency (append time minus the send time its value
starts with, see producers.Pacer)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaException, TopicPartition

from scripts.bench.lib.copiers import Running
from scripts.bench.lib.output import logger

log = logger("bench")


def ends(consumer: Consumer, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """(low, high) watermark of each partition."""
    for attempt in range(50):  # a topic created a moment ago may not have its leaders known yet
        try:
            return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
        except KafkaException:
            if attempt == 49:
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def total(consumer: Consumer, topic: str, partitions: int) -> int:
    return sum(hi for _, hi in ends(consumer, topic, partitions).values())


def append_span(bootstrap: str, topic: str, partitions: int) -> tuple[int, int]:
    """(first, last) LogAppendTime in ms over the topic's partitions."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    first, last = None, None
    try:
        for p, (lo, hi) in ends(consumer, topic, partitions).items():
            if hi <= lo:
                continue
            for offset in (lo, hi - 1):
                consumer.assign([TopicPartition(topic, p, offset)])
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    msg = consumer.poll(1.0)
                    if msg is not None and not msg.error():
                        ts = msg.timestamp()[1]
                        first = ts if first is None else min(first, ts)
                        last = ts if last is None else max(last, ts)
                        break
    finally:
        consumer.close()
    if first is None or last is None:
        raise RuntimeError(f"nothing on {topic}")
    return first, last


def wait_for(
    consumer: Consumer, topic: str, partitions: int, records: int, timeout: float, proc: Running | None = None
) -> float | None:
    """Monotonic time when the topic held ``records`` records, or None at the timeout (or if the copier died)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if total(consumer, topic, partitions) >= records:
            return time.monotonic()
        if proc is not None and proc.proc.poll() is not None:
            log(f"{proc.name} exited with {proc.proc.returncode}: see {proc.log}")
            return None
        time.sleep(0.2)
    return None


def latencies(bootstrap: str, topic: str, since: dict[int, int], until: dict[int, int]) -> list[float]:
    """B's append time minus the send time in the value, in ms, for the records in [since, until)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
        }
    )
    out: list[float] = []
    try:
        consumer.assign([TopicPartition(topic, p, since[p]) for p in since if until[p] > since[p]])
        remaining = sum(until[p] - since[p] for p in since)
        deadline = time.monotonic() + 60
        while remaining > 0 and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                partition, offset, value = msg.partition(), msg.offset(), msg.value()
                if msg.error() or partition is None or offset is None or value is None or offset >= until[partition]:
                    continue
                sent_us = int.from_bytes(value[:8], "big")
                out.append(msg.timestamp()[1] - sent_us / 1000)
                remaining -= 1
    finally:
        consumer.close()
    return out
