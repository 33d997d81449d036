"""The continuous copy on the standalone cluster: long-lived copy tasks on the executors copy records as they
arrive (drkit.mirror.copier_tasks), each batch records exactly what they acknowledged in its ranges; a worker
SIGKILLed under load (its task lost: its partitions go to the other task) and the driver SIGKILLed under load
and started again (as systemd or a Deployment restarts it) lose nothing. Counted record by record; syncs
audited against the target."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from support.kafka_io import Rec, create_topic, produce, read_all, unique
from support.mirror_checks import audit_syncs

from drkit.config import load_config
from drkit.localdev.spark_cluster import LocalSpark
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable

PARTITIONS = 4
BATCH_LINE = re.compile(r"batch (\d+) mirrored (\d+) records in \d+ ranges \(.*, (copied .*|nothing to copy)\)$")
CONNECTED = re.compile(r"copy task (\d+) connected \(executor (\S+) on")
GONE = re.compile(r"copy task (\d+) \(executor (\S+) on \S+\) is gone")
#: Records per batch at most, small: the copies in flight at a kill (the ceiling below) stay well under what is
#: produced. The copy tasks may run up to twice that ahead of the batches (drkit.mirror.lanes).
PER_TRIGGER = 1_000
#: The most records one read of a copier takes (drkit.mirror.reader.CHUNK), as README's "Known limits" states it.
COPIER_READ = 5_000


class Mirror:
    """``drkit mirror`` on the cluster in its own process group, its log in a file."""

    def __init__(self, path: Path, log: Path) -> None:
        self.log = log
        self._out: IO[str] = log.open("a")
        env = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "drkit.cli.app", "--verbose", "mirror", "-c", str(path)],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.since = len(log.read_text())

    def text(self) -> str:
        return self.log.read_text()[self.since :]

    def wait_for(self, pattern: re.Pattern[str], count: int, seconds: float) -> list[re.Match[str]]:
        deadline = time.monotonic() + seconds
        while True:
            found = list(pattern.finditer(self.text()))
            if len(found) >= count:
                return found
            assert self.proc.poll() is None, f"the mirror exited {self.proc.returncode}:\n{self.text()[-4000:]}"
            assert time.monotonic() < deadline, (
                f"{count} x {pattern.pattern!r} not in the mirror's log after {seconds:g}s:\n{self.text()[-4000:]}"
            )
            time.sleep(0.2)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 180) -> int:
        os.killpg(self.proc.pid, sig)
        code = self.proc.wait(timeout)
        self._out.close()
        return code


class Load:
    """``total`` records produced over about ``seconds`` (acknowledged by A), in 30 steps."""

    def __init__(self, bootstrap: str, topic: str, start: int, total: int, seconds: float) -> None:
        self.args = bootstrap, topic, start, total, seconds
        self.done = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        bootstrap, topic, start, total, seconds = self.args
        steps = 30
        per = total // steps
        for step in range(steps):
            base = start + step * per
            produce(
                bootstrap,
                topic,
                [
                    {"partition": i % PARTITIONS, "key": b"k%d" % i, "value": b"v%d" % i * 16}
                    for i in range(base, base + per)
                ],
            )
            self.done = (step + 1) * per
            time.sleep(seconds / steps)


def synced(path: Path, topic: str) -> int:
    """Source records the flow's syncs describe (a batch's syncs are durable before Spark commits it)."""
    ranges = SyncTable(Drkit(load_config(path)).layout).ranges("A->B", [topic])
    return sum(r.upstream_last - r.upstream_first + 1 for rs in ranges.values() for r in rs)


def wait_synced(path: Path, topic: str, wanted: int, seconds: float, mirror: Mirror) -> None:
    deadline = time.monotonic() + seconds
    while (found := synced(path, topic)) < wanted:
        assert mirror.proc.poll() is None, f"the mirror exited {mirror.proc.returncode}:\n{mirror.text()[-4000:]}"
        assert time.monotonic() < deadline, f"{found} of {wanted} records synced after {seconds:g}s"
        time.sleep(0.5)


def counted(source: list[Rec], target: list[Rec]) -> tuple[int, int]:
    """(missing, duplicated), record by record."""
    copies = Counter(r.content() for r in target)
    missing = sum(1 for r in source if not copies[r.content()])
    return missing, sum(n - 1 for n in copies.values() if n > 1)


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_a_worker_and_then_the_driver_killed_under_load_lose_nothing(
    delivery: str,
    spark_cluster: LocalSpark,
    cluster_config: Callable[..., Path],
    clusters: dict[str, str],
    tmp_path: Path,
) -> None:
    """At-least-once: the executors' long-lived copy tasks copy as records arrive (each record once before any
    failure); exactly-once: each batch's copy tasks write the slots' transactions. A worker SIGKILLed under load,
    then the driver, which a supervisor starts again."""
    continuous = delivery == "at_least_once"
    topic = unique(f"copy-tasks-killed-{delivery.replace('_', '-')}")
    create_topic(clusters["A"], topic, partitions=PARTITIONS)
    path = cluster_config(topic, mirror={"max_offsets_per_trigger": PER_TRIGGER, "delivery": delivery})
    log = tmp_path / "mirror.log"
    first = Mirror(path, log)
    produced = 0
    try:
        tasks = first.wait_for(
            CONNECTED if continuous else re.compile(r"copy mode per_batch"), 2 if continuous else 1, 240
        )
        if continuous:
            # Before any failure: copied as the records arrive by the two workers' tasks, each record once.
            assert len({m[2] for m in tasks}) == 2 and "driver" not in {m[2] for m in tasks}, [m[0] for m in tasks]
            load = Load(clusters["A"], topic, produced, 6_000, 3.0)
            load.thread.join(120)
            produced += 6_000
            wait_synced(path, topic, produced, 120, first)
            copied = [m for m in map(BATCH_LINE.search, first.text().splitlines()) if m and int(m[2])]
            assert copied and all(m[3].startswith("copied as the records arrived by 2 task(s)") for m in copied), [
                m[0] for m in copied
            ]
            missing, duplicated = counted(read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}"))
            assert (missing, duplicated) == (0, 0)
        load = Load(clusters["A"], topic, produced, 24_000, 12.0)
        while load.done < 8_000:
            time.sleep(0.1)
        spark_cluster.kill_worker(1)  # a lost machine: the worker, its executor and whatever that executor ran
        if continuous:
            first.wait_for(GONE, 1, 120)
        load.thread.join(120)
        produced += 24_000
        wait_synced(path, topic, produced, 180, first)
        if continuous:  # the lost task's partitions went to the task still running: it copies them all now
            after = first.text().split(GONE.search(first.text())[0], 1)[1]  # type: ignore[index]
            survivor = [m for m in map(BATCH_LINE.search, after.splitlines()) if m and int(m[2])]
            assert any(m[3].startswith("copied as the records arrived by 1 task(s)") for m in survivor), after[-3000:]
        # The driver SIGKILLed under load: a supervisor (systemd, a Deployment) starts it again.
        load = Load(clusters["A"], topic, produced, 12_000, 6.0)
        while load.done < 4_000:
            time.sleep(0.1)
        os.killpg(first.proc.pid, signal.SIGKILL)
        first.proc.wait(30)
    finally:
        if first.proc.poll() is None:
            os.killpg(first.proc.pid, signal.SIGKILL)
        spark_cluster.up(2)  # worker 1 back for the session's other tests (and the restarted mirror)
    second = Mirror(path, log)
    try:
        load.thread.join(120)
        produced += 12_000
        wait_synced(path, topic, produced, 300, second)
    finally:
        code = second.stop()
    assert code == 0, second.text()[-4000:]

    # read_committed (librdkafka's default): an exactly-once target shows its committed copies only.
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert len(source) == produced
    missing, duplicated = counted(source, target)
    assert missing == 0, f"{missing} of {produced} acknowledged records never reached the target"
    ranges = SyncTable(Drkit(load_config(path)).layout).ranges("A->B", [topic])
    audit = audit_syncs({p: rs for (t, p), rs in ranges.items() if t == topic}, source, target, exact=not continuous)
    if continuous:
        # What a failure can leave twice: the copies a task held when it was lost (at most twice a trigger ahead,
        # plus one read past that limit), and after the driver's SIGKILL what both tasks held and the batch in
        # flight. Each record is described by exactly one sync; the duplicates are exactly the copies none does.
        ahead = 2 * PER_TRIGGER + COPIER_READ
        ceiling = ahead + 2 * ahead + PER_TRIGGER
        assert duplicated <= ceiling, f"{duplicated} duplicates, more than the {ceiling} in flight at the kills"
        assert audit.described == produced and audit.orphans == duplicated, audit
    else:
        assert duplicated == 0, f"{duplicated} records seen twice by a read_committed consumer"
        assert (audit.described, audit.orphans) == (produced, 0), audit
    print(
        json.dumps(
            {
                "delivery": delivery,
                "produced": produced,
                "missing": missing,
                "duplicated": duplicated,
                "orphans": audit.orphans,
                "gone": [m[0] for m in GONE.finditer(log.read_text())],
                "fallbacks": [line for line in log.read_text().splitlines() if "copies its own records" in line][:5],
            },
            indent=1,
        )
    )
