"""Heartbeats on real brokers: written on the source, copied by the mirror, measured on the target alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource
from prometheus_client import REGISTRY
from support.kafka_io import create_topic, unique

from drkit import metrics
from drkit.config import DrkitConfig
from drkit.mirror.heartbeat import MEASURE_SECONDS
from drkit.mirror.runner import MirrorRunner
from drkit.service import Drkit

#: Seconds a batch that copies its own records takes at most here (its plan, copy and Delta append on a busy
#: two-core machine): the margin of the bounds below.
BATCH_SECONDS = 5.0


def test_heartbeat_latency_and_age_appear_in_status_and_the_metrics(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic = unique("hb")
    create_topic(clusters["A"], topic, 1)
    config = make_config(
        [{"source": "A", "target": "B", "topics": {"include": [topic]}, "heartbeats": {"interval_seconds": 0.5}}]
    )
    flow_config = config.flows[0]
    interval, trigger = flow_config.heartbeats.interval_seconds, flow_config.mirror.trigger_interval_seconds
    # The bounds, derived from the config. A heartbeat's trip: the continuous copier copies it within tens of
    # milliseconds; at worst (the copier cannot give a batch its ranges) it waits for the next trigger and is
    # copied by that batch: latency <= trigger + BATCH_SECONDS. The newest copy on the target was created at
    # most one interval (the writer's pace) plus its own trip before it was read: age <= interval + latency
    # bound. A heartbeat that stopped, or a wrong timestamp (seconds for milliseconds, another clock), breaks
    # them by orders of magnitude; the earlier bound, 30 s, let a writer stalled for 29 s pass.
    latency_bound = trigger + BATCH_SECONDS
    age_bound = interval + latency_bound
    # Gauges are process-wide: drop an earlier test's values, so that every value read below is this mirror's.
    labels = {"flow": "A->B"}
    metrics.HEARTBEAT_LATENCY.remove("A->B")
    metrics.HEARTBEAT_AGE.remove("A->B")
    started = time.time()
    runner = MirrorRunner(Drkit(config, spark).mirror_context(), config.flows)
    thread = threading.Thread(target=lambda: runner.run(False), daemon=True)
    thread.start()
    service = Drkit(config)

    def status() -> dict[str, Any]:
        return service.status("A->B").as_dict()["flows"][0]  # what `drkit status -o json` prints

    def gauges() -> tuple[float | None, float | None]:
        return (
            REGISTRY.get_sample_value("drkit_heartbeat_latency_seconds", labels),
            REGISTRY.get_sample_value("drkit_heartbeat_age_seconds", labels),
        )

    def this_runs(age: float | None) -> bool:
        # This session's clusters are shared: the newest heartbeat on B may be an earlier test's until this
        # mirror copies its own. One created after this test started is younger than the time since then.
        return age is not None and age < time.time() - started

    def check(where: str, latency: float | None, age: float | None) -> None:
        assert latency is not None and age is not None, (where, latency, age)
        # > 0: the trip from the source's producer through both brokers takes milliseconds, never none.
        assert 0 < latency <= latency_bound, f"{where}: latency {latency} s, bound {latency_bound} s"
        assert age <= age_bound, f"{where}: age {age} s, bound {age_bound} s"
        # Read after the copy's append: the age (0.1 s steps) is at least the latency.
        assert age + 0.05 >= latency, f"{where}: age {age} s below latency {latency} s"

    try:
        deadline = time.monotonic() + 120
        while not (this_runs(status()["heartbeat_age_seconds"]) and this_runs(gauges()[1])):
            assert time.monotonic() < deadline, f"no heartbeat of this mirror on B in 120 s: {status()}, {gauges()}"
            time.sleep(0.5)
        # Then for longer than the age bound plus a measuring period: a writer that stopped would age past it.
        readings = []
        until = time.monotonic() + age_bound + MEASURE_SECONDS
        while time.monotonic() < until:
            now = status()
            readings.append((now["heartbeat_latency_seconds"], now["heartbeat_age_seconds"], *gauges()))
            check("status", now["heartbeat_latency_seconds"], now["heartbeat_age_seconds"])
            check("gauges", *gauges())
            time.sleep(1)
        print(f"heartbeat (latency, age) of status then gauges, bounds {latency_bound} s, {age_bound} s: {readings}")
        # The copy on B keeps B's append time (how the latency is measured there alone).
        admin = AdminClient({"bootstrap.servers": clusters["B"]})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "A.drkit-heartbeats")
        configs = admin.describe_configs([resource])[resource].result(10)
        assert configs["message.timestamp.type"].value == "LogAppendTime"
    finally:
        runner.stop()
        thread.join(120)
