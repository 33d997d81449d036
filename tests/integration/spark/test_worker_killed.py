"""Must-show: a worker of the standalone cluster SIGKILLed (with its executor and Python workers: a lost
machine) while a batch is being copied. Spark runs the lost tasks again on the other worker
(``spark.task.maxFailures`` > 1); the mirror ends, nothing is missing, every source record is described by
exactly one sync. At-least-once, the copies of the killed attempt are orphans (duplicates no sync describes),
never more than the batch in flight holds; exactly-once, the retried task's producer (the same transactional
id) fences the lost attempt and aborts its transaction, so a read_committed consumer of the target sees each
record once and the syncs describe exactly the target.

Both cases run on the session's one cluster, one after the other: the workers' folders keep the executors of
every application the session ran, and the executor ids restart at 0 in each, so the executors of this run
are those under its own application's folder (:func:`executors_of`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from support.kafka_io import Rec, create_topic, produce, read_all, unique
from support.mirror_checks import audit_syncs

from drkit.config import load_config
from drkit.localdev.spark_cluster import LocalSpark
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable

#: 1 KB records, three batches of 40k: batch 0 is long enough (40 MB) to be caught in the middle.
PARTITIONS, RECORDS, PER_BATCH, SIZE = 12, 120_000, 40_000, 1_000
#: Workers killed in one run.
KILLS = 1
#: The most duplicates an at-least-once run may leave. A copy task's attempt copies records of its own batch
#: only, and a batch is planned before it is copied (at most max_offsets_per_trigger records, one batch at a
#: time with ``--once``). A kill loses the attempts the killed worker was running: their copies stay on the
#: target as orphans and Spark copies their ranges again. Tasks that had ended are not run again (the copy is
#: a result stage: their results are at the driver already), and the batches after the kill are copied by the
#: survivor alone (asserted below), as is nothing by the driver (``driver_batches == 0``, so no fallback copies
#: a batch a second time). So each kill can duplicate at most the records of the one batch in flight:
#: PER_BATCH per kill.
DUPLICATE_CEILING = PER_BATCH * KILLS
#: How long the master may count the killed worker ALIVE: it drops a worker when its connection closes, at
#: the latest when its heartbeats stop for ``spark.worker.timeout`` (60 s).
WORKER_GONE_SECONDS = 120.0
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


def applications(cluster: LocalSpark) -> set[str]:
    """The ids of every application the master knows, running or ended."""
    state = cluster.master_state()
    assert state is not None, f"the Spark master did not answer on {cluster.webui_url()}/json/"
    return {str(app["id"]) for key in ("activeapps", "completedapps") for app in state.get(key, [])}


def launched(cluster: LocalSpark, worker: str) -> dict[str, set[str]]:
    """The executor ids a worker launched, by application: it runs each in ``work/<application>/<executor id>``."""
    found: dict[str, set[str]] = {}
    for p in Path(cluster.describe(worker).home, "work").glob("app-*/*"):
        if p.is_dir():
            found.setdefault(p.parent.name, set()).add(p.name)
    return found


def executors_of(by_application: dict[str, set[str]], application: str) -> set[str]:
    """The executors of one application: ids are numbered from 0 in each, so another application's executor 0
    is not this one's."""
    return by_application.get(application, set())


def wait_for_alive_workers(cluster: LocalSpark, wanted: int, seconds: float = WORKER_GONE_SECONDS) -> None:
    """Wait until the master lists ``wanted`` workers ALIVE; fail when it does not by the deadline, or when its
    state cannot be read then."""
    deadline = time.monotonic() + seconds
    while True:
        alive = cluster.status().alive_workers
        if alive == wanted:
            return
        if time.monotonic() > deadline:
            seen = "its state could not be read (no answer on /json/)" if alive is None else f"it lists {alive}"
            pytest.fail(f"the Spark master should list {wanted} worker(s) ALIVE within {seconds:g}s; {seen}")
        time.sleep(1)


def counted(source: list[Rec], target: list[Rec]) -> tuple[int, int]:
    """(missing, duplicated), record by record: source records with no copy, and copies beyond one per record."""
    copies = Counter(r.content() for r in target)
    missing = sum(1 for r in source if not copies[r.content()])
    return missing, sum(n - 1 for n in copies.values() if n > 1)


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
    # The first job waits for both workers' executors: on a loaded machine one may register seconds after the
    # other, and a batch the first runs alone is never hit by the kill of the other's worker (the exactly-once
    # case then sees no retried attempt: a CI run did).
    path = cluster_config(
        topic,
        mirror={"max_offsets_per_trigger": PER_BATCH, "delivery": delivery},
        spark_conf={
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s",
        },
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
    command = [sys.executable, "-m", "drkit.cli.app", "--verbose", "mirror", "-c", str(path), "--once", "-o", "json"]
    logs = path.parent
    before = applications(spark_cluster)
    with open(logs / "out.txt", "w") as out, open(logs / "err.txt", "w") as err:
        mirror = subprocess.Popen(command, stdout=out, stderr=err, env=env)
    # read_uncommitted: its end offsets are the high watermarks, which grow with every copy acknowledged. A
    # read_committed watcher's are the last stable offsets, which an exactly-once copy moves only when a task
    # commits its transaction: its whole share at once, so the middle of a copy may never be seen.
    watcher = Consumer(
        {"bootstrap.servers": clusters["B"], "group.id": unique("_watch"), "isolation.level": "read_uncommitted"}
    )
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
        wait_for_alive_workers(spark_cluster, 1)
        code = mirror.wait(timeout=900)
    finally:
        watcher.close()
        if mirror.poll() is None:
            mirror.kill()
        # Read before worker 1 comes back (it could be given an executor of an application still ending).
        on_survivor = launched(spark_cluster, "worker-2")
        on_lost = launched(spark_cluster, "worker-1")
        spark_cluster.up(2)  # worker 1 back for the session's other tests
    stdout, stderr = (logs / "out.txt").read_text(), (logs / "err.txt").read_text()
    assert code == 0, (stdout + stderr)[-4000:]
    [application] = applications(spark_cluster) - before  # this mirror's, and only it ran meanwhile
    survivors, lost = executors_of(on_survivor, application), executors_of(on_lost, application)

    # 0 missing, each source record described by exactly one sync, counted record by record.
    source = read_all(clusters["A"], topic)  # read_committed, as every read_all
    target = read_all(clusters["B"], f"A.{topic}")
    assert len(source) == RECORDS
    exactly_once = delivery == "exactly_once"
    ranges = SyncTable(Drkit(load_config(path)).layout).ranges("A->B", [topic])
    syncs = {p: rs for (t, p), rs in ranges.items() if t == topic}
    audit = audit_syncs(syncs, source, target, exact=exactly_once)
    missing, duplicated = counted(source, target)
    assert missing == 0, f"{missing} source records have no copy on the target"
    assert audit.described == RECORDS
    aborted = None
    if exactly_once:
        # The lost attempt's copies were in its transaction, aborted when its retry fenced it: invisible here.
        assert duplicated == 0 and len(target) == RECORDS, f"{duplicated} duplicates for a read_committed reader"
        aborted = len(read_all(clusters["B"], f"A.{topic}", "read_uncommitted")) - RECORDS
    else:
        # The killed attempt's copies are orphans: the only duplicates, and no more than the batch in flight.
        assert audit.orphans == duplicated == len(target) - RECORDS
        assert duplicated <= DUPLICATE_CEILING, (
            f"{duplicated} duplicates after {KILLS} kill(s): more than the {DUPLICATE_CEILING} records in flight"
        )

    # Every batch copied by executors; the batches after the one the kill hit, by the surviving worker's.
    [summary] = json.loads(stdout)
    assert summary["records"] == RECORDS and summary["driver_batches"] == 0
    assert "driver" not in summary["copy_executors"]
    batches = {int(m[1]): m for m in map(BATCH_LINE.search, stderr.splitlines()) if m and int(m[2])}
    assert sum(int(m[2]) for m in batches.values()) == RECORDS, stderr[-4000:]
    assert len(batches) >= 3 and survivors and lost, (application, on_survivor, on_lost)
    assert not survivors & lost, f"{application}: executors {sorted(survivors & lost)} on both workers"
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
                "application": application,
                "killed_at_records": killed_at,
                "duplicated": duplicated,
                "ceiling": DUPLICATE_CEILING if not exactly_once else 0,
                "orphans": audit.orphans,
                "aborted": aborted,
                "batches": [m[0] for m in batches.values()],
                "survivors": sorted(survivors),
                "lost": sorted(lost),
            },
            indent=1,
        )
    )
