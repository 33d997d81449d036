"""The three copiers the copy benchmarks compare, each a child process in its own session (so its whole tree
can be measured and stopped): drkit's mirror (the real CLI, see drkit_child.py), Apache Kafka's MirrorMaker 2
in dedicated mode, and the plain confluent-kafka loop (plain_copy.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.bench.lib.drkit_child import child_code
from scripts.bench.lib.drkit_config import flow_config
from scripts.bench.lib.machine import REPO
from scripts.bench.lib.memory import TreeMemory

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


#: MirrorMaker 2's internal topics on single-broker clusters: replication factor 1 (every benchmark's MM2).
MM2_SINGLE_BROKER = [
    "replication.factor = 1",
    "checkpoints.topic.replication.factor = 1",
    "heartbeats.topic.replication.factor = 1",
    "offset-syncs.topic.replication.factor = 1",
    "offset.storage.replication.factor = 1",
    "status.storage.replication.factor = 1",
    "config.storage.replication.factor = 1",
]


@dataclass
class Running:
    name: str
    proc: subprocess.Popen[bytes]
    started: float
    memory: TreeMemory
    log: Path

    def stop(self, timeout: float = 120.0) -> dict[str, Any]:
        """SIGINT (what an operator does; SIGTERM for MM2), then wait; SIGKILL the tree after ``timeout``."""
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
        self.memory.stop()
        return {
            "stop_seconds": round(time.monotonic() - began, 2),
            "killed": killed,
            "peak_rss_mb": self.memory.peak_rss_mb(),
            "exit_code": self.proc.returncode,
        }


def spawn(name: str, cmd: list[str], workdir: Path, env: dict[str, str] | None = None) -> Running:
    """``cmd`` in ``workdir``, its output in ``workdir/<name>.log``, its tree's memory sampled every 0.5 s."""
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
    workdir: Path,
    source: str,
    target: str,
    topic: str,
    mirror: dict[str, Any],
    topology: dict[str, Any] | None = None,
    spark: dict[str, Any] | None = None,
) -> Running:
    """``drkit mirror`` of ``topic`` with these ``[flows.mirror]`` and ``[flows.topology]`` settings, and this
    ``[spark]`` section (default: ``local[2]``, see drkit_config.flow_config)."""
    toml = workdir / "drkit.toml"
    workdir.mkdir(parents=True, exist_ok=True)
    flow: dict[str, Any] = {"topics.include": [topic]}
    flow.update({f"mirror.{key}": value for key, value in mirror.items()})
    flow.update({f"topology.{key}": value for key, value in (topology or {}).items()})
    toml.write_text(flow_config(str(workdir / "state"), source, target, flow, spark))
    code = child_code(progress=True, query_start=True)
    return spawn("drkit", [sys.executable, "-c", code, "mirror", "-c", str(toml)], workdir, {"PYTHONPATH": str(REPO)})


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
                *MM2_SINGLE_BROKER,
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
    return spawn("mm2", cmd, workdir)


def start_plain(
    workdir: Path, source: str, target: str, topic: str, target_topic: str, compression: str, records: int = 0
) -> Running:
    cmd = [
        sys.executable,
        str(Path(__file__).with_name("plain_copy.py")),
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
    return spawn("plain", cmd, workdir)
