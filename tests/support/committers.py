"""Consumer groups committing on a schedule, as busy applications do, with what each had acknowledged.

The must-shows of issue 38 bound the records a group re-reads after a failover or a failback by the commits
it had in flight: the test needs, per group, the last offset it sent and the last the cluster acknowledged.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient


class Committers(threading.Thread):
    """Every ``every`` s, each group commits every one of ``partitions`` (topic, partition) ``step`` records
    further, from ``step`` on (AlterConsumerGroupOffsets, the groups' requests in flight together), up to
    ``limit`` (then it stops). Keeps per group the last offset sent and the last acknowledged (the same on
    every partition); stops at the first failure (a cluster killed: the request times out)."""

    def __init__(
        self,
        bootstrap: str,
        groups: Sequence[str],
        partitions: Sequence[tuple[str, int]],
        step: int,
        every: float = 0.1,
        limit: int | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        self.groups = list(groups)
        self.partitions = list(partitions)
        self.step, self.every, self.limit = step, every, limit
        self.sent: dict[str, int] = {}
        self.acked: dict[str, int] = {}
        self.failure: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        offset = 0
        while not self.stop.is_set():
            started = time.monotonic()
            offset += self.step
            if self.limit is not None and offset > self.limit:
                return
            parts = [TopicPartition(t, p, offset) for t, p in self.partitions]
            futures = {}
            for group in self.groups:
                self.sent[group] = offset
                [(_, futures[group])] = self.admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group, parts)], request_timeout=5
                ).items()
            for group, future in futures.items():
                try:
                    future.result()
                except KafkaException as exc:
                    self.failure = str(exc)
                else:
                    self.acked[group] = offset
            if self.failure is not None:
                return
            self.stop.wait(max(0.0, self.every - (time.monotonic() - started)))


def distribution(rereads: dict[str, int]) -> dict[str, Any]:
    """Per-group re-read counts summed up: how many groups, the greatest, the median, how many read none."""
    values = sorted(rereads.values())
    return {
        "groups": len(values),
        "max": values[-1],
        "p50": values[len(values) // 2],
        "zero": sum(1 for v in values if v == 0),
        "counts": dict(sorted(Counter(values).items())),
    }
