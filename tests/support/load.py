"""A steady load on a source and drkit's jobs in threads, for the integration tests that kill a cluster under
load (operate/test_source_killed, translator/test_follow_source_killed)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer


class SteadyProducer(threading.Thread):
    """Produces ``rate`` records/s round-robin over ``partitions`` partitions of ``topic`` (values ``v<n>``);
    counts every acknowledged value and every delivery that failed (a failed one may still be on the cluster)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 30000,
                "log_level": 0,
            }
        )
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.acked: Counter[bytes] = Counter()
        self.acked_on: Counter[int] = Counter()  # per partition
        self.failed: list[str] = []
        self.stop = threading.Event()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.value()] += 1
            self.acked_on[msg.partition()] += 1
        else:
            self.failed.append(str(err))

    def run(self) -> None:
        n, started = 0, time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while n < due:
                try:
                    self.producer.produce(
                        self.topic, value=f"v{n}".encode(), partition=n % self.partitions, on_delivery=self._delivered
                    )
                except BufferError:
                    break
                n += 1
            self.producer.poll(0.01)
        left = self.producer.flush(30)
        if left:
            self.failed.append(f"{left} records still unacknowledged after the final flush")


class Job(threading.Thread):
    """A drkit job in a thread: its error is kept and raised by ``finish``, never swallowed."""

    def __init__(self, name: str, body: Callable[[], object]) -> None:
        super().__init__(name=name, daemon=True)
        self.body = body
        self.result: object = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.body()
        except BaseException as exc:
            self.error = exc

    def finish(self, seconds: float) -> Any:
        self.join(seconds)
        assert not self.is_alive(), f"{self.name} still running {seconds:.0f}s after it was asked to stop"
        if self.error is not None:
            raise AssertionError(f"{self.name} failed: {self.error}") from self.error
        return self.result
