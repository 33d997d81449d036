"""How soon a standby mirror copies after the active one is SIGKILLed (docs/design/lease.md).

Usage::

    .venv/bin/python -m scripts.bench.takeover                       # ~5 min on 2 cores
    .venv/bin/python -m scripts.bench.takeover --repetitions 5 --lease-seconds 3 5

Prints one JSON document to stdout (``--out FILE`` keeps it). On two local KRaft clusters
(drkit.localdev.clusters.LocalKafka) and moto's S3 server as the shared state root (two mirror processes of one
flow on one machine need a root in an object store: each "host" has its own local folder), all on 127.0.0.1.

Per repetition and lease: a fresh topic, a steady load of ``--rate`` records/s, the active mirror (host-a) and a
standby (host-b), both ``drkit mirror`` processes with ``lease_seconds`` = the lease and ``lease_renew_seconds``
= a third of it. Once host-b stands by and host-a copies, host-a's process group is SIGKILLed. Measured from the
kill: ``lease_seconds_after_kill`` (host-b's log says it holds the lease; polled every 50 ms) and
``copy_seconds_after_kill`` (a consumer of the target, started at the target's ends at the kill, reads the first
copy carrying host-b's epoch in its ``drkit.epoch`` header). The 1-minute load average is recorded before and
after every measurement; the leases alternate, their order reversed on every repetition.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from scripts.bench.lib.clusters import create_topic, local_kafka, start_pair, target_topic
from scripts.bench.lib.drkit_config import flow_config
from scripts.bench.lib.machine import REPO, git_facts, load1, versions
from scripts.bench.lib.output import logger, print_json

log = logger("takeover")
HOLDS = re.compile(r"holds the lease: epoch (\d+)")
BUCKET = "drkit-bench"
PARTITIONS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_moto(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """moto's S3 server on a free loopback port, with the benchmark's bucket."""
    import boto3

    port = free_port()
    out = (workdir / "moto.log").open("wb")
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            client = boto3.client(
                "s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1"
            )
            client.create_bucket(Bucket=BUCKET)
            return proc, endpoint
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class Load:
    """``rate`` records/s to the topic until stopped (acks=all)."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.topic, self.rate = topic, rate
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            began = time.monotonic()
            for _ in range(max(1, self.rate // 20)):
                self.producer.produce(self.topic, b"v%d" % n, partition=n % PARTITIONS)
                n += 1
            self.producer.poll(0)
            self.stop.wait(max(0.0, 0.05 - (time.monotonic() - began)))
        self.producer.flush(30)


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def first_copy_of(bootstrap: str, topic: str, since: dict[int, int], epoch_text: list[str], timeout: float) -> float:
    """time.monotonic() when a copy carrying the epoch in ``epoch_text`` (filled once known) is first read."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}"})
    consumer.assign([TopicPartition(topic, p, o) for p, o in since.items()])
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.05):
                if (
                    msg.error() is None
                    and epoch_text
                    and dict(msg.headers() or []).get("drkit.epoch") == epoch_text[0].encode()
                ):
                    return time.monotonic()
        raise RuntimeError(f"no copy of the new epoch within {timeout:.0f} s")
    finally:
        consumer.close()


def mirror(workdir: Path, host: str, config: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    logfile = workdir / f"{host}.log"
    out = logfile.open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "drkit.cli.app",
            "--verbose",
            "mirror",
            "-c",
            str(config),
            "--metrics-port",
            str(free_port()),
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env={**env, "DRKIT_HOST": host},
        start_new_session=True,
    )
    return proc, logfile


#: The new holder's steps, as its log says them (drkit.mirror.lease, drkit.mirror.job, drkit.mirror.runner).
STEPS = re.compile(
    r"holds the lease|goes on from the checkpoint|started in|query started|batch \d+ (?:mirrored|was recorded)"
)


class Steps:
    """The standby's log lines of its steps, each stamped when it appeared (its log has no time: polled every 20 ms)."""

    def __init__(self, logfile: Path) -> None:
        self.logfile = logfile
        self.seen: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        offset, rest = 0, ""
        while not self.stop.is_set():
            with contextlib.suppress(OSError), self.logfile.open("rb") as f:
                f.seek(offset)
                chunk = f.read()
                offset += len(chunk)
                lines = (rest + chunk.decode(errors="replace")).split("\n")
                rest = lines.pop()
                now = time.monotonic()
                self.seen.extend((now, line) for line in lines if STEPS.search(line))
            time.sleep(0.02)

    def after(self, since: float, steps: int = 8) -> list[str]:
        """The first ``steps`` lines seen after ``since`` (time.monotonic()), with their seconds after it."""
        self.stop.set()
        self.thread.join(5)
        return [f"+{at - since:.2f}s {line[:200]}" for at, line in self.seen if at >= since][:steps]


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:.0f} s")
        time.sleep(0.05)


def one(workdir: Path, source: str, target: str, endpoint: str, lease: float, rate: int) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    topic = f"takeover-{uuid.uuid4().hex[:8]}"
    create_topic(source, topic, PARTITIONS)
    prefix = f"root-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "BENCH_S3_KEY": "k", "BENCH_S3_SECRET": "s"}
    env.pop("DRKIT_LOG", None)
    configs: dict[str, Path] = {}
    for host in ("host-a", "host-b"):
        text = flow_config(
            f"s3a://{BUCKET}/{prefix}",
            source,
            target,
            {
                "topics.include": [topic],
                "mirror.lease_seconds": lease,
                "mirror.lease_renew_seconds": math.floor(lease / 3 * 1000) / 1000,  # at most a third
                "mirror.trigger_interval_seconds": 0.5,
                "heartbeats.interval_seconds": 0,
            },
            spark={"master": "local[1]"},
        )
        text = text.replace(
            "[spark]",
            f'local_dir = "{host}"\n\n[state.storage]\nendpoint = "{endpoint}"\npath_style = true\n'
            'access_key_id = "${env:BENCH_S3_KEY}"\nsecret_access_key = "${env:BENCH_S3_SECRET}"\n\n[spark]',
            1,
        )
        configs[host] = workdir / f"{host}.toml"
        configs[host].write_text(text)
    load = Load(source, topic, rate)
    load.thread.start()
    procs: list[subprocess.Popen[bytes]] = []
    load_before = load1()
    try:
        active, active_log = mirror(workdir, "host-a", configs["host-a"], env)
        procs.append(active)
        try:
            wait_for(
                lambda: HOLDS.search(active_log.read_text(errors="replace")) is not None, 300, "host-a held no lease"
            )
        except RuntimeError:
            log(active_log.read_text(errors="replace")[-3000:])
            raise
        standby, standby_log = mirror(workdir, "host-b", configs["host-b"], env)
        procs.append(standby)
        wait_for(lambda: "standing by" in standby_log.read_text(errors="replace"), 300, "host-b did not stand by")
        steps = Steps(standby_log)
        wait_for(lambda: sum(ends(target, target_topic(topic)).values()) > rate, 120, "host-a copied nothing")
        time.sleep(2 * lease)  # host-b's preparation done, several renewals seen
        since = ends(target, target_topic(topic))
        epoch: list[str] = []
        copied: list[float] = []
        watcher = threading.Thread(
            target=lambda: copied.append(first_copy_of(target, target_topic(topic), since, epoch, 300)), daemon=True
        )
        watcher.start()
        os.killpg(active.pid, signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: HOLDS.search(standby_log.read_text(errors="replace")) is not None, 300, "host-b took no lease")
        held = time.monotonic() - killed
        found = HOLDS.search(standby_log.read_text(errors="replace"))
        assert found is not None
        epoch.append(found.group(1))
        watcher.join(320)
        if not copied:
            raise RuntimeError("the standby's first copy was not seen")
        return {
            "lease_seconds": lease,
            "lease_seconds_after_kill": round(held, 2),
            "copy_seconds_after_kill": round(copied[0] - killed, 2),
            "standby_timeline": steps.after(killed),
            "load_before": load_before,
            "load_after": load1(),
        }
    finally:
        load.stop.set()
        load.thread.join(60)
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--lease-seconds", type=float, nargs="+", default=[3.0, 5.0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--base-port", type=int, default=31092)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-takeover-") as tmp:
        workdir = Path(tmp)
        kafka = local_kafka(workdir / "kafka", args.base_port)
        moto, endpoint = start_moto(workdir)
        try:
            source, target = start_pair(kafka)
            for repetition in range(args.repetitions):
                leases = args.lease_seconds if repetition % 2 == 0 else list(reversed(args.lease_seconds))
                for lease in leases:
                    log(f"repetition {repetition + 1}, lease {lease} s")
                    run = one(workdir / f"r{repetition}-l{lease}", source, target, endpoint, lease, args.rate)
                    run["repetition"] = repetition + 1
                    runs.append(run)
                    log(f"  {run}")
        finally:
            kafka.down()
            os.killpg(moto.pid, signal.SIGKILL)
    summary: dict[str, Any] = {}
    for lease in args.lease_seconds:
        mine = [r for r in runs if r["lease_seconds"] == lease]
        summary[f"lease_{lease:g}_s"] = {
            key: {
                "median_seconds": round(statistics.median(r[key] for r in mine), 2),
                "max_seconds": max(r[key] for r in mine),
            }
            for key in ("lease_seconds_after_kill", "copy_seconds_after_kill")
        }
    print_json(
        {
            "benchmark": "takeover",
            "rate_records_per_s": args.rate,
            "runs": runs,
            "summary": summary,
            "versions": versions(local_brokers=True),
            "git": git_facts(),
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
