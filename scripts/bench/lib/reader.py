"""A read_committed consumer of a copier's target topic, recording when each record arrived: what a consumer of
the target waits for, transactions included (the target's append time counts a record before its transaction
commits; this reader sees it only once it is committed).

Each value starts with 8 big-endian bytes (producers.py): a backlog record's sequence number, or a paced record's
send time in microseconds; the reader keeps those bytes, its receive time and the record's append time on the
target, so a latency is ``received - sent`` and a backlog's span runs from its first append to its last receipt.
"""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from scripts.bench.lib.copiers import Running
from scripts.bench.lib.output import logger
from scripts.bench.lib.producers import SEQ_BYTES

log = logger("bench")

#: A record as the reader saw it: (the value's first 8 bytes, wall time received in s, append time on the target in s).
Arrival = tuple[int, float, float]


class Reader(threading.Thread):
    """A read_committed consumer of ``partitions`` partitions of ``topic``, from ``start`` (partition -> offset;
    default: every partition from 0), recording each record's arrival."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, start: dict[int, int] | None = None) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-eos-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 5,
                "fetch.max.bytes": 52_428_800,
            }
        )
        # The connection and the topic's metadata before the clock matters: the first records of a step are
        # not late because the consumer was still connecting.
        self.consumer.list_topics(topic, timeout=10)
        offsets = start or {}
        self.consumer.assign([TopicPartition(topic, p, offsets.get(p, 0)) for p in range(partitions)])
        self.arrived: list[Arrival] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for msg in self.consumer.consume(500, 0.005):  # returns at 500 records or 5 ms: at most 5 ms added
                    value = msg.value()
                    if msg.error() or value is None:
                        continue
                    appended = msg.timestamp()[1] / 1000
                    self.arrived.append((int.from_bytes(value[:SEQ_BYTES], "big"), time.time(), appended))
        finally:
            self.consumer.close()

    def seen(self) -> int:
        return len(self.arrived)

    def wait_for(self, records: int, timeout: float, copier: Running | None = None) -> float | None:
        """Monotonic time when the reader had received ``records`` records, or None at the timeout (or if the
        copier died)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.seen() >= records:
                return time.monotonic()
            if copier is not None and copier.proc.poll() is not None:
                log(f"{copier.name} exited with {copier.proc.returncode}: see {copier.log}")
                return None
            time.sleep(0.05)
        return None

    def finish(self, timeout: float = 30.0) -> list[Arrival]:
        """Stops the reader; what it received."""
        self.stop.set()
        self.join(timeout)
        return self.arrived


def latencies_ms(arrived: list[Arrival]) -> list[float]:
    """Receive time minus the send time each paced value starts with, in ms."""
    return [(wall - sent / 1e6) * 1000 for sent, wall, _ in arrived]
