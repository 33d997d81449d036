"""Must-show: a worker of the standalone cluster SIGKILLed (with its executor and Python workers: a lost
machine) while a batch is being copied. Spark runs the lost tasks again on the other worker
(``spark.task.maxFailures`` > 1); the mirror ends, nothing is missing, every source record is described by
exactly one sync. At-least-once, the copies of the killed attempt are orphans (duplicates no sync describes);
exactly-once, the retried task's producer (the same transactional id) fences the lost attempt and aborts its
transaction, so a read_committed consumer of the target sees each record once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from support.kafka_io import create_topic, produce, read_all, unique
from support.mirror_checks import audit_syncs

from drkit.config import load_config
from drkit.localdev.spark_cluster import LocalSpark
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable

#: 1 KB records, three batches of 40k: batch 0 is long enough (40 MB) to be caught in the middle.
PARTITIONS, RECORDS, PER_BATCH, SIZE = 12, 120_000, 40_000, 1_000
BATCH_LINE = re.compile(r"batch (\d+) mirrored (\d+) records in \d+ ranges \([^)]*, (copied by .*)\)$")
TASK_SITE = re.compile(r"executor (\S+)@")


def copied(consumer: Consumer, topic: str) -> tuple[int, int]:
    """Records on the target's copy so far, and how many of its partitions hold some (0 until the mirror made it)."""
    try:
        meta = consumer.list_topics(topic, timeout=5).topics[topic]
        if meta.error is not None:
            return 0, 0
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in meta.partitions]
        return sum(ends), sum(1 for end in ends if end)
    except KafkaException:
        return 0, 0


def executors_of(cluster: LocalSpark, worker: str) -> set[str]:
    """Executor ids a worker launched: it runs each in ``work/<application>/<executor id>``."""
    return {p.name for p in Path(cluster.describe(worker).home, "work").glob("app-*/*") if p.is_dir()}


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_a_worker_killed_mid_copy_loses_nothing_and_syncs_stay_exact(
    delivery: str, spark_cluster: LocalSpark, cluster_config: Callable[..., Path], clusters: dict[str, str]
) -> None:
    topic = unique(f"worker-killed-{delivery.replace('_', '-')}")
    create_topic(clusters["A"], topic, partitions=PARTITIONS)
    for start in range(0, RECORDS, 20_000):
        produce(
            clusters["A"],
            topic,
            [
                {"value": f"{i:08d}".encode() * (SIZE // 8), "key": f"k{i}".encode(), "partition": i % PARTITIONS}
                for i in range(start, start + 20_000)
            ],
        )
    path = cluster_config(topic, mirror={"max_offsets_per_trigger": PER_BATCH, "delivery": delivery})
    env = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
    command = [sys.executable, "-m", "drkit.cli.app", "--verbose", "mirror", "-c", str(path), "--once", "-o", "json"]
    logs = path.parent
    with open(logs / "out.txt", "w") as out, open(logs / "err.txt", "w") as err:
        mirror = subprocess.Popen(command, stdout=out, stderr=err, env=env)
    watcher = Consumer({"bootstrap.servers": clusters["B"], "group.id": unique("_watch")})
    killed_at = None
    try:
        deadline = time.monotonic() + 600
        while mirror.poll() is None and time.monotonic() < deadline:
            now, written = copied(watcher, f"A.{topic}")
            # Both workers' running tasks are producing (each holds 3 partitions at least: 12 over at most 4
            # tasks), and the batch is far from done: the kill lands in the middle of a task's copy.
            if written >= 6 and 0 < now < PER_BATCH * 3 // 4:
                spark_cluster.kill_worker(1)  # the worker JVM, its executor and the executor's Python workers
                killed_at = now
                break
            time.sleep(0.05)
        assert killed_at is not None, "the first batch was never seen in the middle of its copy"
        assert spark_cluster.status().alive_workers in (None, 1) or _eventually_one(spark_cluster)
        code = mirror.wait(timeout=900)
    finally:
        watcher.close()
        if mirror.poll() is None:
            mirror.kill()
        survivors = executors_of(spark_cluster, "worker-2")
        lost = executors_of(spark_cluster, "worker-1")
        spark_cluster.up(2)  # worker 1 back for the session's other tests
    stdout, stderr = (logs / "out.txt").read_text(), (logs / "err.txt").read_text()
    assert code == 0, (stdout + stderr)[-4000:]

    # 0 missing, each source record described by exactly one sync; a killed attempt's copies are orphans.
    source = read_all(clusters["A"], topic)
    target = read_all(clusters["B"], f"A.{topic}")
    assert len(source) == RECORDS
    ranges = SyncTable(Drkit(load_config(path)).layout).ranges("A->B", [topic])
    exactly_once = delivery == "exactly_once"
    syncs = {p: rs for (t, p), rs in ranges.items() if t == topic}
    audit = audit_syncs(syncs, source, target, exact=exactly_once)
    assert audit.described == RECORDS
    assert audit.orphans == audit.duplicates == len(target) - RECORDS
    aborted = None
    if exactly_once:  # read_committed: whatever the lost attempt delivered was in its aborted transaction
        assert len(target) == RECORDS and audit.duplicates == 0
        aborted = len(read_all(clusters["B"], f"A.{topic}", "read_uncommitted")) - RECORDS

    # Every batch copied by executors; the batches after the one the kill hit, by the surviving worker's.
    [summary] = json.loads(stdout)
    assert summary["records"] == RECORDS and summary["driver_batches"] == 0
    assert "driver" not in summary["copy_executors"]
    batches = {int(m[1]): m for m in map(BATCH_LINE.search, stderr.splitlines()) if m and int(m[2])}
    assert sum(int(m[2]) for m in batches.values()) == RECORDS, stderr[-4000:]
    assert len(batches) >= 3 and survivors and lost and not survivors & lost
    first = min(batches)
    if exactly_once:  # the lost task ran again, under the same transactional id (fencing the lost attempt)
        assert ", attempt " in batches[first][3], batches[first][0]
    for batch_id, m in batches.items():
        sites = set(TASK_SITE.findall(m[3]))
        assert sites <= survivors | lost, m[0]
        if batch_id > first:
            assert sites <= survivors, f"a batch after the kill was copied by the lost worker: {m[0]}"
    print(
        json.dumps(
            {
                "delivery": delivery,
                "killed_at_records": killed_at,
                "orphans": audit.orphans,
                "aborted": aborted,
                "batches": [m[0] for m in batches.values()],
                "survivors": sorted(survivors),
                "lost": sorted(lost),
            },
            indent=1,
        )
    )


def _eventually_one(cluster: LocalSpark, seconds: float = 120.0) -> bool:
    """The master counts a killed worker ALIVE until its heartbeats are missed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cluster.status().alive_workers == 1:
            return True
        time.sleep(1)
    return False
