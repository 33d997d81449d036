"""The flow's heartbeats: written on the source every ``[flows.heartbeats] interval_seconds`` and measured
on the target (drkit.core.heartbeat), in a thread of the mirror process.

Writing never holds the mirror back: the producer is asynchronous, and a source that does not answer is
logged once per outage (its heartbeats simply stop, which is what the target-side age shows). The gauges
``drkit_heartbeat_latency_seconds`` and ``drkit_heartbeat_age_seconds`` are set from the newest copy on the
target, read at most every ``MEASURE_SECONDS``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from drkit import metrics
from drkit.config import ClusterConfig, FlowConfig
from drkit.core.heartbeat import (
    HEARTBEAT_SOURCE_CONFIGS,
    HEARTBEAT_TOPIC,
    encode,
    heartbeat_key,
    reading,
)
from drkit.core.topology import TopicCreate
from drkit.errors import DrkitError
from drkit.kafka import clients, topics
from drkit.kafka.admin import KafkaAdmin

log = logging.getLogger(__name__)

#: The target is read for the gauges at most this often (a consumer round trip each time).
MEASURE_SECONDS = 5.0


class HeartbeatWriter:
    def __init__(self, flow: FlowConfig, source: ClusterConfig, source_admin: KafkaAdmin, target: KafkaAdmin) -> None:
        self.flow = flow
        self.interval = flow.heartbeats.interval_seconds
        self._source = source
        self._source_admin = source_admin
        self._target = target
        self._key = heartbeat_key(flow.source, flow.target)
        self._target_topic = flow.policy().target_topic(flow.source, HEARTBEAT_TOPIC)
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Any = None
        self._topic_ready = False
        self._failing = False
        self.written = 0

    def start(self) -> None:
        if self.interval > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"drkit-heartbeat-{self.flow.name}", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._closed.set()
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(1.0)

    def _loop(self) -> None:
        measured = 0.0
        while not self._closed.wait(self.interval):
            self.beat()
            if time.monotonic() - measured >= MEASURE_SECONDS:
                measured = time.monotonic()
                self.measure()

    def beat(self) -> None:
        """Write one heartbeat (creating the source topic first if needed); errors are logged once per outage."""
        try:
            if not self._topic_ready:
                create = TopicCreate(HEARTBEAT_TOPIC, HEARTBEAT_TOPIC, 1, HEARTBEAT_SOURCE_CONFIGS)
                if HEARTBEAT_TOPIC not in self._source_admin.partition_counts():
                    topics.create_topics(self._source_admin.client, self.flow.source, [create], -1)
                self._topic_ready = True
            if self._producer is None:
                self._producer = clients.producer(
                    self._source, self.flow.source, **{"acks": "all", "linger.ms": 0, "log_level": 0}
                )
            self._producer.produce(HEARTBEAT_TOPIC, encode(int(time.time() * 1000)), self._key)
            self._producer.poll(0)
            self.written += 1
            if self._failing:
                log.info("flow %s: heartbeats written on %s again", self.flow.name, self.flow.source)
            self._failing = False
        except (DrkitError, Exception) as exc:  # heartbeats must never stop the mirror
            if not self._failing:
                log.warning("flow %s: heartbeat not written on %s: %s", self.flow.name, self.flow.source, exc)
            self._failing = True

    def measure(self) -> None:
        """Set the gauges from the newest copy on the target (left as they are when the target does not answer)."""
        try:
            newest = self._target.newest_heartbeat(self._target_topic, self._key)
        except DrkitError:
            return
        now = reading(newest, time.time() * 1000)
        if now.latency_seconds is not None:
            metrics.HEARTBEAT_LATENCY.labels(self.flow.name).set(now.latency_seconds)
        if now.age_seconds is not None:
            metrics.HEARTBEAT_AGE.labels(self.flow.name).set(now.age_seconds)
