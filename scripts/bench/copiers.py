"""The three copiers of the benchmark, each a child process with its own session (so its whole tree can be
measured and stopped): drkit's mirror (the real CLI), Apache Kafka's MirrorMaker 2 in dedicated mode,
and the plain confluent-kafka loop (plain_copy.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

#: Runs ``drkit mirror`` as the CLI would, timing a few steps (printed to stderr): the Spark session, the
#: offset_syncs table check, the recorded-batch check, the target topics, the syncs append, the query start.
DRKIT_CHILD = """\
import functools, logging, sys, time
logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                    format="%(asctime)s %(name)s %(levelname)s %(message)s")
logging.getLogger("drkit.mirror.job").setLevel(logging.INFO)
logging.getLogger("drkit.mirror.progress").setLevel(logging.DEBUG)
import drkit.runtime.spark
from drkit.mirror.job import MirrorJob
from drkit.store.offset_syncs import SyncTable

def timed(owner, name, phase):
    original = getattr(owner, name)
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            print(f"DRKIT-BENCH-PHASE {phase} {time.monotonic() - started:.3f}", file=sys.stderr, flush=True)
    setattr(owner, name, wrapper)

timed(drkit.runtime.spark, "build_session", "spark_session")
timed(SyncTable, "ensure", "syncs_table_ensure")
timed(SyncTable, "batch_written", "batch_recorded_check")
timed(MirrorJob, "_plan", "plan_batch")
timed(SyncTable, "write", "syncs_append")
timed(MirrorJob, "start", "query_start")
from drkit.cli.app import main
main()
"""

MM2_LOG4J = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
"""


def _proc_kb(text: str, key: str) -> int:
    for line in text.splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


@dataclass
class TreeMemory:
    """Peak RSS of a process and all its descendants, sampled from /proc."""

    root: int
    interval: float = 0.5
    peak_rss_kb: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    stat = Path(f"/proc/{entry.name}/stat").read_text()
                except OSError:
                    continue
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
        tree, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, []))
        return tree

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = 0
            for pid in self._tree():
                with contextlib.suppress(OSError):
                    rss += _proc_kb(Path(f"/proc/{pid}/status").read_text(), "VmRSS:")
            self.peak_rss_kb = max(self.peak_rss_kb, rss)
            self._stop.wait(self.interval)

    def start(self) -> TreeMemory:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> float:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return round(self.peak_rss_kb / 1024, 1)


@dataclass
class Running:
    name: str
    proc: subprocess.Popen[bytes]
    started: float
    memory: TreeMemory
    log: Path

    def stop(self, timeout: float = 120.0) -> dict[str, Any]:
        """SIGINT (what an operator does), then wait; SIGKILL the tree after ``timeout``."""
        began = time.monotonic()
        killed = False
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT) if self.name != "mm2" else self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers of the tree (Spark's JVM, workers)
        self.proc.wait()
        return {
            "stop_seconds": round(time.monotonic() - began, 2),
            "killed": killed,
            "peak_rss_mb": self.memory.stop(),
            "exit_code": self.proc.returncode,
        }


def _spawn(name: str, cmd: list[str], workdir: Path, env: dict[str, str] | None = None) -> Running:
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{name}.log"
    out = log.open("wb")
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=workdir,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    out.close()
    return Running(name, proc, started, TreeMemory(proc.pid).start(), log)


def start_drkit(
    workdir: Path, source: str, target: str, topic: str, mirror: dict[str, Any], topology: dict[str, Any] | None = None
) -> Running:
    toml = workdir / "drkit.toml"
    workdir.mkdir(parents=True, exist_ok=True)
    lines = [
        "[state]",
        f"root = {json.dumps(str(workdir / 'state'))}",
        "",
        "[spark]",
        'master = "local[2]"',
        "",
        "[clusters.A]",
        f"bootstrap_servers = {json.dumps(source)}",
        "",
        "[clusters.B]",
        f"bootstrap_servers = {json.dumps(target)}",
        "",
        "[[flows]]",
        'source = "A"',
        'target = "B"',
        f"topics.include = [{json.dumps(topic)}]",
    ]
    for key, value in mirror.items():
        lines.append(f"mirror.{key} = {json.dumps(value)}")
    for key, value in (topology or {}).items():
        lines.append(f"topology.{key} = {json.dumps(value)}")
    toml.write_text("\n".join(lines) + "\n")
    return _spawn(
        "drkit", [sys.executable, "-c", DRKIT_CHILD, "mirror", "-c", str(toml)], workdir, {"PYTHONPATH": str(ROOT)}
    )


def start_mm2(workdir: Path, source: str, target: str, topic: str, compression: str) -> Running:
    from drkit.runtime.artifacts import mirror_maker_libs

    libs = mirror_maker_libs()
    workdir.mkdir(parents=True, exist_ok=True)
    props = workdir / "mm2.properties"
    props.write_text(
        "\n".join(
            [
                "clusters = A, B",
                f"A.bootstrap.servers = {source}",
                f"B.bootstrap.servers = {target}",
                "A->B.enabled = true",
                f"A->B.topics = {topic}",
                "A->B.groups = bench-nothing",
                "B->A.enabled = false",
                "tasks.max = 2",
                "replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "offset.storage.replication.factor = 1",
                "status.storage.replication.factor = 1",
                "config.storage.replication.factor = 1",
                "sync.topic.configs.enabled = false",
                "sync.topic.acls.enabled = false",
                "emit.checkpoints.enabled = true",
                "sync.group.offsets.enabled = false",
                "refresh.topics.interval.seconds = 10",
                "B.producer.acks = all",
                f"B.producer.compression.type = {compression}",
                "B.producer.linger.ms = 5",
                "A.consumer.isolation.level = read_committed",
                "",
            ]
        )
    )
    log4j = workdir / "log4j2.yaml"
    log4j.write_text(MM2_LOG4J)
    cmd = [
        "java",
        "-Xms256m",
        "-Xmx2g",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{libs}/*",
        "org.apache.kafka.connect.mirror.MirrorMaker",
        str(props),
        "--clusters",
        "B",
    ]
    return _spawn("mm2", cmd, workdir)


def start_plain(
    workdir: Path, source: str, target: str, topic: str, target_topic: str, compression: str, records: int = 0
) -> Running:
    cmd = [
        sys.executable,
        str(HERE / "plain_copy.py"),
        "--source",
        source,
        "--target",
        target,
        "--topic",
        topic,
        "--target-topic",
        target_topic,
        "--compression",
        compression,
        "--records",
        str(records),
    ]
    return _spawn("plain", cmd, workdir)


#: The mirror's batch log line: "batch 7 mirrored 2000 records in 12 ranges (0.31s, plan 0.01s, copy 0.2s, ...)".
_BATCH_LINE = re.compile(r"batch \d+ mirrored \d+ records in \d+ ranges \((\d+(?:\.\d+)?)s, (.*)\)$")
_BATCH_PHASE = re.compile(r"([a-z]+) (\d+(?:\.\d+)?)s")
#: Spark's share of a batch (drkit.mirror.progress): "batch 7 in Spark: 60 ms outside ... (latestOffset 25, ...)".
_SPARK_LINE = re.compile(r"batch \d+ in Spark: (\d+) ms outside drkit's callback \((.*) ms\)$")
_SPARK_PHASE = re.compile(r"([A-Za-z]+) (\d+)")


def _p50(values: list[float]) -> float | None:
    return round(sorted(values)[len(values) // 2], 3) if values else None


def drkit_phases(log: Path) -> dict[str, Any]:
    """The drkit child's timed steps: first occurrence of each, and the sum over the run."""
    first: dict[str, float] = {}
    total: dict[str, float] = {}
    batches: list[float] = []
    drkit_parts: dict[str, list[float]] = {}
    spark_parts: dict[str, list[float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if "DRKIT-BENCH-PHASE " in line:
            phase, seconds = line.split("DRKIT-BENCH-PHASE ", 1)[1].split()
            first.setdefault(phase, float(seconds))
            total[phase] = round(total.get(phase, 0.0) + float(seconds), 3)
        elif match := _BATCH_LINE.search(line):
            batches.append(float(match.group(1)))
            for name, seconds in _BATCH_PHASE.findall(match.group(2)):
                drkit_parts.setdefault(name, []).append(float(seconds) * 1000)
        elif match := _SPARK_LINE.search(line):
            spark_parts.setdefault("outside_callback", []).append(float(match.group(1)))
            for name, ms in _SPARK_PHASE.findall(match.group(2)):
                spark_parts.setdefault(name, []).append(float(ms))
    return {
        "first": first,
        "total": total,
        "batches": len(batches),
        "batch_seconds_total": round(sum(batches), 3),
        "batch_seconds_p50": _p50(batches),
        # Where a batch's time goes, medians over the run's batches (milliseconds): drkit's callback
        # (plan, copy, syncs) and Spark's own phases around it.
        "batch_ms_p50": {name: _p50(values) for name, values in sorted(drkit_parts.items())},
        "spark_ms_p50": {name: _p50(values) for name, values in sorted(spark_parts.items())},
    }
