"""The source broker killed after a steady load the mirror fell behind on: the RPO drkit reports is exact.

A producer writes to A at a steady rate (acks=all, every acknowledged record counted), the mirror and the
translator run continuously and copy while it writes; the mirror is stopped under that load, the producer goes
on for a few seconds' worth of records (which the mirror never copies), the translator stops while it writes,
the producer stops, one more translation observes A's end offsets, then A is SIGKILLed. ``drkit failover``
(the CLI, in a process that cannot start a JVM) must apply the failover without the source and report as not
mirrored exactly the records A acknowledged that are not on B, counted one by one by this test, per partition
and in total, with the observation's age and an estimate of what was produced after it (none was: the estimate
is labelled, not checked). Every job runs in a thread whose error fails the test; every wait has a deadline
that fails with a message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kafka_io import Rec, commit, committed_on, create_topic, read_all
from support.load import Job, SteadyProducer
from support.ports import SOURCE_KILLED
from support.processes import no_java_env
from support.waiting import wait_until

from drkit.config import load_config
from drkit.localdev.clusters import LocalKafka
from drkit.mirror.runner import MirrorRunner
from drkit.service import Drkit
from drkit.translator.job import TranslatorRunner

TOPIC, GROUP, PARTITIONS, RATE = "payments", "ledger", 3, 150
#: The group's committed offset on A in every partition, before the disaster.
PROCESSED = 10
#: How long the producer writes after the mirror stopped (at RATE, counted in acknowledged records): these
#: records are never mirrored.
UNMIRRORED_SECONDS = 3


@pytest.fixture(scope="module")
def kill_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, dict[str, str]]]:
    kafka = LocalKafka(tmp_path_factory.mktemp("kill-kafka"), base_port=SOURCE_KILLED.base, heap="384m")
    try:
        kafka.up(["A", "B"])
        yield kafka, {c.alias: c.bootstrap_servers for c in kafka.status()}
    finally:
        kafka.down()


def per_partition(records: list[Rec]) -> Counter[int]:
    return Counter(r.partition for r in records)


def test_rpo_with_the_source_killed_after_load(
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
    producer = SteadyProducer(clusters["A"], TOPIC, PARTITIONS, RATE)
    producer.start()
    wait_until(lambda: sum(producer.acked_on.values()) >= 2 * RATE, 60, "the producer's first records acknowledged")
    commit(clusters["A"], GROUP, {(TOPIC, p): PROCESSED for p in range(PARTITIONS)})

    runner = MirrorRunner(service.mirror_context(), config.flows)
    mirror = Job("the mirror", lambda: runner.run(False))
    translating = TranslatorRunner(service.translator_context(), config.flows)
    translator = Job("the translator", lambda: translating.run(False, 1.0))
    mirror.start()
    translator.start()

    def copied() -> int:
        assert mirror.is_alive(), f"the mirror ended: {mirror.error}"
        return len(read_all(clusters["B"], f"A.{TOPIC}"))

    wait_until(lambda: copied() >= 3 * RATE, 180, f"{3 * RATE} records copied to B", interval=1.0)
    before = copied()
    # Progress under load: the mirror keeps copying while the producer writes.
    wait_until(lambda: copied() >= before + 2 * RATE, 60, f"{2 * RATE} more records copied to B", interval=1.0)

    runner.stop()
    summaries = mirror.finish(180)
    assert [(s.flow, s.records > 0) for s in summaries] == [("A->B", True)], summaries
    # The producer goes on: records the mirror never copies. Waited for by count, not by time, so that a
    # loaded machine cannot leave this window empty.
    acked = sum(producer.acked_on.values())
    wait_until(
        lambda: sum(producer.acked_on.values()) >= acked + RATE * UNMIRRORED_SECONDS,
        60,
        "records acknowledged after the mirror stopped",
    )
    # The translator's last observation of A's ends is made while the producer still writes, and more is
    # acknowledged after it: the rate between it and the final observation below is that of a live source
    # (were the translator stopped after the producer, its last two observations could be equal: rate 0).
    translating.stopped.set()
    runs = translator.finish(60)
    assert runs, "the translator never ran"
    acked = sum(producer.acked_on.values())
    # A second's worth: more than the few records in flight (their acknowledgements may come late).
    wait_until(
        lambda: sum(producer.acked_on.values()) >= acked + RATE, 60, "records acknowledged after the translator stopped"
    )
    producer.stop.set()
    producer.join(60)
    assert not producer.is_alive() and producer.failed == [], producer.failed[:5]
    service.translate("A->B", once=True)  # observes A's end offsets after the last acknowledged record
    kafka.stop("A", kill=True)

    # The heartbeats (on by default, every second) were copied while the mirror ran: with A dead, status
    # still reads the newest copy on B alone, and its age grows with the clock.
    [first] = service.status("A->B").flows
    assert first.verdict.value == "source unreachable"
    assert first.heartbeat_age_seconds is not None and first.heartbeat_latency_seconds is not None
    time.sleep(2)
    [later] = service.status("A->B").flows
    assert later.heartbeat_age_seconds is not None and later.heartbeat_age_seconds >= first.heartbeat_age_seconds + 1.5
    print(f"with A dead: newest heartbeat {first.heartbeat_age_seconds}s then {later.heartbeat_age_seconds}s old")

    # Counted one by one: every value was produced once (acknowledged once), copied at most once.
    target = read_all(clusters["B"], f"A.{TOPIC}")
    on_target = Counter(r.value for r in target)
    assert max(producer.acked.values()) == 1, "a value acknowledged twice"
    assert on_target - producer.acked == Counter(), "the target holds records the source never acknowledged"
    assert max(on_target.values()) == 1, f"duplicates on the target: {+(on_target - producer.acked)}"
    lost = producer.acked - on_target
    lost_on = Counter(int(v.decode()[1:]) % PARTITIONS for v in lost.elements() if v is not None)
    assert sum(lost.values()) > 0, "the mirror copied everything: the RPO is not put to the test"
    assert sum(on_target.values()) + sum(lost.values()) == sum(producer.acked.values())

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
    # Exact, both ways: the records A acknowledged and B does not hold, in total and per partition; A's ends
    # are the acknowledged counts (offsets 0.. with no gaps) and the mirrored ends what B holds.
    assert rpo["unmirrored_offsets"] == sum(lost.values()), (rpo, sum(lost.values()))
    rows = {r["partition"]: r for r in rpo["partitions"] if r["topic"] == TOPIC}
    assert {p: r["unmirrored_offsets"] for p, r in rows.items()} == {p: lost_on[p] for p in range(PARTITIONS)}
    assert {p: r["source_end"] for p, r in rows.items()} == {p: producer.acked_on[p] for p in range(PARTITIONS)}
    held = per_partition(target)
    assert {p: r["mirrored_up_to"] for p, r in rows.items()} == {p: held[p] for p in range(PARTITIONS)}
    assert rpo["estimated_since_observation"] is not None and rpo["produce_rate_per_second"] > 0

    # The group on B: at the copy of the record it would have read next on A, found by its origin header.
    expected = {r.partition: r.offset for r in target if r.origin("A") == PROCESSED}
    assert sorted(expected) == list(range(PARTITIONS)), "a partition has no copy of the group's next record"
    assert committed_on(clusters["B"], GROUP, f"A.{TOPIC}") == expected
    print(
        f"acknowledged {sum(producer.acked.values())}, on target {sum(on_target.values())}, lost "
        f"{sum(lost.values())} ({dict(sorted(lost_on.items()))}); reported {rpo['unmirrored_offsets']} "
        f"({rpo['observation_age_seconds']}s old), estimated {rpo['estimated_since_observation']} more"
    )
