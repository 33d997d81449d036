"""The source broker killed under steady load: the RPO drkit reports never understates the loss.

A producer writes to A at a steady rate (acks=all, every acknowledged record counted), the mirror
and the translator run continuously, then A is SIGKILLed. ``drkit failover`` (the CLI, in a
process that cannot start a JVM) must report a lower bound no greater than the records A
acknowledged that never reached B, counted one by one, with the observation's age and an estimate
of what was produced after it, and must apply the failover without the source.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from support.kafka_io import commit, committed_on, create_topic, read_all
from support.ports import SOURCE_KILLED
from support.processes import no_java_env, quietly

from drkit.config import load_config
from drkit.localdev.clusters import LocalKafka
from drkit.mirror.runner import MirrorRunner
from drkit.service import Drkit

TOPIC, GROUP, PARTITIONS, RATE = "payments", "ledger", 3, 150


@pytest.fixture(scope="module")
def kill_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, dict[str, str]]]:
    kafka = LocalKafka(tmp_path_factory.mktemp("kill-kafka"), base_port=SOURCE_KILLED.base, heap="384m")
    try:
        kafka.up(["A", "B"])
        yield kafka, {c.alias: c.bootstrap_servers for c in kafka.status()}
    finally:
        kafka.down()


class SteadyProducer(threading.Thread):
    """Produces RATE records/s round-robin over the partitions; remembers every acknowledged value."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 5000,
                "log_level": 0,
            }
        )
        self.acked: set[bytes] = set()
        self.stop = threading.Event()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.add(msg.value())

    def run(self) -> None:
        n, started = 0, time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * RATE)
            while n < due:
                try:
                    self.producer.produce(
                        TOPIC, value=f"v{n}".encode(), partition=n % PARTITIONS, on_delivery=self._delivered
                    )
                except BufferError:
                    break
                n += 1
            self.producer.poll(0.01)
        self.producer.flush(10)


def test_rpo_with_the_source_killed_under_load(
    kill_clusters: tuple[LocalKafka, dict[str, str]], spark: Any, tmp_path: Path
) -> None:
    kafka, clusters = kill_clusters
    toml = tmp_path / "drkit.toml"
    toml.write_text(
        f"[state]\nroot = {json.dumps(str(tmp_path / 'state'))}\n\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = ["{TOPIC}"] }}\n'
        "mirror = { trigger_interval_seconds = 1 }\ncheckpoint = { interval_seconds = 1, max_age_seconds = 3600 }\n"
    )
    config = load_config(toml)
    service = Drkit(config, spark)
    create_topic(clusters["A"], TOPIC, PARTITIONS)
    producer = SteadyProducer(clusters["A"])
    producer.start()
    time.sleep(2)
    commit(clusters["A"], GROUP, {(TOPIC, p): 10 for p in range(PARTITIONS)})

    runner = MirrorRunner(Drkit(config, spark).mirror_context(), config.flows)
    mirror = threading.Thread(target=lambda: quietly(runner.run, False), daemon=True)
    mirror.start()
    translator = threading.Thread(target=lambda: quietly(service.translate, "A->B", False, 1.0, 25), daemon=True)
    translator.start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and len(read_all(clusters["B"], f"A.{TOPIC}")) < 3 * RATE:
        time.sleep(2)
    time.sleep(5)  # steady state: the mirror copies while the producer writes

    kafka.stop("A", kill=True)
    producer.stop.set()
    producer.join(30)
    for q in spark.streams.active:  # the mirror cannot finish a batch without its source
        with contextlib.suppress(Exception):  # spark.sql.streaming.stopTimeout: the query is abandoned
            q.stop()
    mirror.join(120)
    translator.join(120)

    # The heartbeats (on by default, every second) were copied while A lived: with A dead, status still
    # reads the newest copy on B alone, and its age grows with the clock.
    [first] = service.status("A->B").flows
    assert first.verdict.value == "source unreachable"
    assert first.heartbeat_age_seconds is not None and first.heartbeat_latency_seconds is not None
    time.sleep(2)
    [later] = service.status("A->B").flows
    assert later.heartbeat_age_seconds is not None and later.heartbeat_age_seconds >= first.heartbeat_age_seconds + 1.5
    print(f"with A dead: newest heartbeat {first.heartbeat_age_seconds}s then {later.heartbeat_age_seconds}s old")

    on_target = {r.value for r in read_all(clusters["B"], f"A.{TOPIC}")}
    lost = producer.acked - on_target
    assert on_target <= producer.acked | {None}, "the target holds records the source never acknowledged"

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "drkit.cli.app",
            "failover",
            "-c",
            str(toml),
            "--flow",
            "A->B",
            "--group",
            GROUP,
            "--apply",
            "--yes",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=no_java_env(),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    rpo = out["rpo"]
    assert out["status"] == "applied" and rpo["source_reachable"] is False and rpo["lower_bound"] is True
    assert rpo["source_ends_from"] == "last observation" and rpo["observation_age_seconds"] >= 0
    if rpo["unmirrored_offsets"] is not None:
        assert rpo["unmirrored_offsets"] <= len(lost), (rpo, len(lost))
    assert rpo["estimated_since_observation"] is not None and rpo["produce_rate_per_second"] > 0
    assert committed_on(clusters["B"], GROUP, f"A.{TOPIC}") == {p: 10 for p in range(PARTITIONS)}
    print(
        f"acknowledged {len(producer.acked)}, on target {len(on_target)}, lost {len(lost)}; reported: at least "
        f"{rpo['unmirrored_offsets']} ({rpo['observation_age_seconds']}s old), estimated "
        f"{rpo['estimated_since_observation']} more"
    )
