"""Heartbeats on real brokers: written on the source, copied by the mirror, measured on the target alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource
from prometheus_client import REGISTRY
from support.kafka_io import create_topic, unique

from drkit.config import DrkitConfig
from drkit.mirror.runner import MirrorRunner
from drkit.service import Drkit


def test_heartbeat_latency_and_age_appear_in_status_and_the_metrics(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic = unique("hb")
    create_topic(clusters["A"], topic, 1)
    config = make_config(
        [{"source": "A", "target": "B", "topics": {"include": [topic]}, "heartbeats": {"interval_seconds": 0.5}}]
    )
    runner = MirrorRunner(Drkit(config, spark).mirror_context(), config.flows)
    thread = threading.Thread(target=lambda: runner.run(False), daemon=True)
    thread.start()
    service = Drkit(config)
    try:
        deadline = time.monotonic() + 120
        flow = service.status("A->B").flows[0]
        # As for the gauges below: an earlier test's heartbeat on B may be the newest until this mirror copies.
        while (flow.heartbeat_age_seconds is None or flow.heartbeat_age_seconds >= 30) and time.monotonic() < deadline:
            time.sleep(1)
            flow = service.status("A->B").flows[0]
        as_json = service.status("A->B").as_dict()["flows"][0]  # what `drkit status -o json` prints
        assert as_json["heartbeat_latency_seconds"] is not None, as_json
        assert 0 <= as_json["heartbeat_latency_seconds"] < 30 and 0 <= as_json["heartbeat_age_seconds"] < 30
        # The gauges are process-wide and this session's clusters are shared: until this mirror's first copy,
        # the newest heartbeat on B (and so the gauge) may be an earlier test's, honestly minutes old.
        labels = {"flow": "A->B"}

        def gauges() -> tuple[float | None, float | None]:
            return (
                REGISTRY.get_sample_value("drkit_heartbeat_latency_seconds", labels),
                REGISTRY.get_sample_value("drkit_heartbeat_age_seconds", labels),
            )

        latency, age = gauges()
        while (age is None or age >= 30) and time.monotonic() < deadline:
            time.sleep(1)
            latency, age = gauges()
        assert latency is not None and age is not None and 0 <= latency < 30 and 0 <= age < 30, (latency, age)
        # The copy on B keeps B's append time (how the latency is measured there alone).
        admin = AdminClient({"bootstrap.servers": clusters["B"]})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "A.drkit-heartbeats")
        configs = admin.describe_configs([resource])[resource].result(10)
        assert configs["message.timestamp.type"].value == "LogAppendTime"
    finally:
        runner.stop()
        thread.join(120)
