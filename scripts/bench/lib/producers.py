"""Producing the benchmarks' load: backlogs written before a copier starts, and paced load while it runs.

Every value that a benchmark checks on the target starts with 8 big-endian bytes: a backlog record's sequence
number, or a paced record's send time in microseconds. The rest is random (incompressible).
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from typing import Any

from confluent_kafka import Producer

SEQ_BYTES = 8

#: The copy benchmarks' load producer: acks=all, idempotent, linger 5 ms (as every copier is configured).
LOAD_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
}


def send(producer: Producer, topic: str, value: bytes, partition: int, **kwargs: Any) -> None:
    """produce(), waiting for room in the producer's queue as long as it is full."""
    while True:
        try:
            producer.produce(topic, value, partition=partition, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)


def load_producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, **LOAD_SETTINGS})


def produce_backlog(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> float:
    """``records`` values of ``size`` bytes (sequence number first), record ``seq`` to partition
    ``seq % partitions``; the seconds until all were acknowledged."""
    producer = load_producer(bootstrap)
    started = time.monotonic()
    pool = os.urandom(size * 64)
    for seq in range(records):
        start = (seq * 7919) % (len(pool) - size)
        send(producer, topic, seq.to_bytes(SEQ_BYTES, "big") + pool[start : start + size - SEQ_BYTES], seq % partitions)
        if seq % 1000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("backlog not acknowledged")
    return time.monotonic() - started


def produce_timed_backlog(
    bootstrap: str, topic: str, records: int, size: int, partitions: int
) -> tuple[array[int], float]:
    """A backlog of fresh random values (sequence number first), each with CreateTime = the wall clock at
    ``produce()``; acks=all, linger 50 ms. Each record's CreateTime (index = seq) and the seconds taken."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    timestamps = array("q", bytes(8 * records))
    failures: list[str] = []
    acked = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is not None:
            failures.append(str(err))
        else:
            acked += 1

    rand_len = size - SEQ_BYTES
    chunk_records = 1024
    started = time.monotonic()
    for base in range(0, records, chunk_records):
        pool = os.urandom(rand_len * chunk_records)
        for i in range(min(chunk_records, records - base)):
            seq = base + i
            value = seq.to_bytes(SEQ_BYTES, "big") + pool[i * rand_len : (i + 1) * rand_len]
            ts = int(time.time() * 1000)
            timestamps[seq] = ts
            send(producer, topic, value, seq % partitions, timestamp=ts, on_delivery=on_delivery)
        producer.poll(0)
        if failures:
            break
    remaining = producer.flush(120)
    seconds = time.monotonic() - started
    if failures or remaining or acked != records:
        raise RuntimeError(
            f"produce failed: acked {acked}/{records}, unflushed {remaining}, "
            f"first error: {failures[0] if failures else None}"
        )
    return timestamps, seconds


def produce_filler(bootstrap: str, topic: str, per_partition: int, partitions: int) -> float:
    """``per_partition`` one-byte records on every partition (acks=1, not idempotent: only their offsets
    matter); the seconds taken."""
    started = time.monotonic()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "enable.idempotence": False,
            "acks": 1,
        }
    )
    for p in range(partitions):
        for _ in range(per_partition):
            send(producer, topic, b"x", p)
        producer.poll(0)
    if producer.flush(300):
        raise SystemExit(f"records for {topic} were not all acknowledged")
    return time.monotonic() - started


def produce_random(bootstrap: str, topic: str, records: int, partitions: int, size: int = 1000) -> None:
    """``records`` random values of ``size`` bytes, round-robin over the partitions."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    for i in range(records):
        send(producer, topic, os.urandom(size), i % partitions)
    producer.flush(120)


class Pacer(threading.Thread):
    """Produces ``rate`` records/s of ``size`` bytes for ``seconds`` over ``partitions``; each value starts with
    its send time (us), taken when it is handed to the producer."""

    def __init__(
        self, bootstrap: str, topic: str, rate: int, seconds: float, partitions: int, size: int = 1000
    ) -> None:
        super().__init__(daemon=True)
        self.producer = load_producer(bootstrap)
        self.topic, self.rate, self.seconds, self.size = topic, rate, seconds, size
        self.partitions = partitions
        self.sent = 0
        self.elapsed = 0.0

    def run(self) -> None:
        pad = os.urandom(self.size - SEQ_BYTES)
        started = time.monotonic()
        tick = 0.01
        while True:
            now = time.monotonic()
            elapsed = now - started
            if elapsed >= self.seconds:
                break
            due = int(elapsed * self.rate)
            while self.sent < due:
                value = int(time.time() * 1e6).to_bytes(SEQ_BYTES, "big") + pad
                try:
                    self.producer.produce(self.topic, value, None, self.sent % self.partitions)
                except BufferError:
                    self.producer.poll(0.01)
                    continue  # a fresh send time once there is room
                self.sent += 1
            self.producer.poll(0)
            time.sleep(max(0.0, tick - (time.monotonic() - now)))
        self.producer.flush(60)
        self.elapsed = time.monotonic() - started
