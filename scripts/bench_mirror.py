"""Benchmark of the mirror (``drkit mirror --once``) on a backlog of records. Not a test.

What it does:

1. Starts two local KRaft clusters A and B (drkit.localdev.clusters.LocalKafka, on ``--base-port``)
   unless ``--bootstrap-source``/``--bootstrap-target`` name existing PLAINTEXT clusters.
2. Creates a unique source topic on A with P partitions, and pre-creates its target topic
   ``A.<topic>`` on B with the same P partitions and ``message.timestamp.type=LogAppendTime``
   (the mirror accepts an existing target topic with at least the source's partition count).
3. Produces N records of exactly S bytes of value (no key): the first 8 bytes are the record's
   sequence number (big-endian), the rest fresh random bytes (incompressible). Record ``seq`` goes
   to partition ``seq % P`` with CreateTime = the wall clock at ``produce()``. The produce rate
   (records acknowledged with acks=all / time from first produce() to the end of flush) is reported.
4. Runs the real CLI, ``drkit mirror -c <generated toml> --once --output json`` (Spark trigger
   availableNow, ``local[2]``), in a child process. Two additions there only observe: the
   ``drkit.mirror.job`` logger is raised to INFO so its per-batch timing lines can be read from
   stderr, and a few steps are wrapped in timers (``mirror.phase_seconds``: Spark session start,
   the recorded-batch check, target topic preparation, the offset-syncs append; the rest of the
   batch time is delivery, including Spark reading the source). While it runs, the process tree of
   the child (Python driver, the Spark JVM it launches, the PySpark daemon and workers) is sampled
   from /proc every ``--sample-interval`` seconds.
5. Reads the whole target topic (read_committed) and checks every record against what was produced.

Definitions of the reported numbers:

* ``mirror_seconds``: wall time of the mirror child process (interpreter and Spark start-up, query
  start, all micro-batches, shutdown). ``records_per_s``/``mb_per_s`` are over this time.
* ``mirror_copy_seconds``: sum of the per-batch durations the mirror logs (time inside
  ``foreachBatch``: recorded-batch check, target topic check, delivery with acks=all, Delta append of
  the offset-syncs); excludes Spark start-up and Spark's own per-batch planning/commit.
  ``copy_records_per_s``/``copy_mb_per_s`` are over this time. None if the log lines were not found.
* ``target_append_span_seconds``: last minus first broker append time of the target records.
* ``mirror_startup_seconds``: first target append time minus the start of the mirror process.
* ``latency_ms``: per record, target broker append time (LogAppendTime of the pre-created target
  topic) minus the source record's CreateTime. The whole backlog is produced before the mirror
  starts, so this is *backlog drain* latency: it includes the time records waited for the mirror
  process to start and for earlier records to be copied. It is an upper bound for, and not
  comparable to, the latency of a mirror that is already running and tailing the source.
  Same-host clocks; with remote clusters, clock skew between hosts adds to it.
* ``peak_rss_mb``: the largest sampled sum of VmRSS over the child's process tree (pages shared
  between forked PySpark workers are counted once per process; ``memory.peak_pss_mb`` counts them
  proportionally; ``memory.sum_process_hwm_mb`` sums each process's own VmHWM, an upper bound that
  also counts short-lived children the JVM forks (Hadoop's local file system runs shell commands)
  at the JVM's size, since a child shares its parent's pages until it execs; those show under the
  forking thread's name in ``memory.hwm_mb_by_process_name``). Sampling can miss a spike shorter
  than the interval, or catch such a fork (which inflates RSS, not PSS).
* ``host_load_1m``: the host's 1-minute load average before and after the mirror; on a shared
  2-core machine other work changes the timings a lot, so compare runs only at similar load.
* ``missing``: sequence numbers produced but not found on the target; ``duplicates``: extra copies
  of found ones. ``mb`` is 10**6 bytes of record values.

With ``--compare-paths``, the same backlog is mirrored by each copy path in turn, on the same clusters:
``driver`` (the driver reads and produces every batch itself: ``driver_copy_max_records`` at its default)
and ``executors`` (one Spark job per batch whose copy tasks read and produce whole partitions:
``driver_copy_max_records = 0``), each on a fresh topic, alternating which goes first in every round
(``--rounds``). It prints one JSON document: every run, the median copy rate of each path and the ratio
executors / driver of the copy rates (``copy_records_per_s``: the batches' own time, so Spark's start-up
is not in it) and of the wall-time rates, with the host's load average around every run.

Example::

    .venv/bin/python scripts/bench_mirror.py --records 20000 --size 200 --partitions 3
    .venv/bin/python scripts/bench_mirror.py --compare-paths --records 200000 --size 1000 --partitions 12 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import uuid
from array import array
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SOURCE_ALIAS, TARGET_ALIAS = "A", "B"
_SEQ_BYTES = 8
_BATCH_LINE = re.compile(r"flow \S+: batch (\d+) mirrored (\d+) records in (\d+) ranges \(([\d.]+)s[,)]")
_PHASE_LINE = re.compile(r"DRKIT-BENCH-PHASE (\S+) ([\d.]+)")
#: Runs the CLI as ``python -m drkit.cli.app`` would, with two additions that only observe: the
#: mirror's INFO lines (per-batch timing) go to stderr, and a few steps of the job are timed
#: (session start-up, the recorded-batch check, target topic preparation, the offset-syncs append).
_CHILD_CODE = """\
import functools, logging, sys, time
logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                    format="%(asctime)s %(name)s %(levelname)s %(message)s")
logging.getLogger("drkit.mirror.job").setLevel(logging.INFO)
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
from drkit.cli.app import main
main()
"""


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--records", type=int, default=200_000, help="records to produce and mirror")
    p.add_argument("--size", type=int, default=512, help=f"value size in bytes (>= {_SEQ_BYTES})")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the source topic")
    p.add_argument("--base-port", type=int, default=39092, help="broker port of A; B gets base+10")
    p.add_argument("--bootstrap-source", help="use this existing cluster as A instead of starting one")
    p.add_argument("--bootstrap-target", help="use this existing cluster as B instead of starting one")
    p.add_argument("--keep-clusters", action="store_true", help="leave started clusters and state running")
    p.add_argument("--state", type=Path, help="state folder (clusters, drkit state); default a temp dir")
    p.add_argument("--broker-heap", default="512m", help="heap of each local broker")
    p.add_argument(
        "--max-offsets-per-trigger", type=int, help="flows.mirror.max_offsets_per_trigger (default: drkit's default)"
    )
    p.add_argument("--sample-interval", type=float, default=0.25, help="memory sampling period, seconds")
    p.add_argument("--timeout", type=float, default=1800.0, help="give up on the mirror after this long")
    p.add_argument("--compare-paths", action="store_true", help="driver copy path against executor copy path")
    p.add_argument("--rounds", type=int, default=3, help="rounds of --compare-paths (each path once per round)")
    args = p.parse_args(argv)
    if args.size < _SEQ_BYTES:
        p.error(f"--size must be at least {_SEQ_BYTES} (the sequence number is in the value)")
    if args.records < 1 or args.partitions < 1:
        p.error("--records and --partitions must be positive")
    if bool(args.bootstrap_source) != bool(args.bootstrap_target):
        p.error("give both --bootstrap-source and --bootstrap-target, or neither")
    return args


# -- clusters and topics ----------------------------------------------------------------------


def create_topics(source: str, target: str, topic: str, target_topic: str, partitions: int) -> None:
    """The source topic, and its target topic with broker append time as record timestamps."""
    for bootstrap, name, config in (
        (source, topic, {}),
        (target, target_topic, {"message.timestamp.type": "LogAppendTime"}),
    ):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(name, partitions, config=config)])[name].result(30)


# -- produce ----------------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> tuple[array[int], float]:
    """Produce the records; returns each record's CreateTime (index = seq) and the seconds taken."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    timestamps = array("q", bytes(8 * records))
    failures: list[str] = []
    acked = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is not None:
            failures.append(str(err))
        else:
            acked += 1

    rand_len = size - _SEQ_BYTES
    chunk_records = 1024
    started = time.monotonic()
    for base in range(0, records, chunk_records):
        pool = os.urandom(rand_len * chunk_records)
        for i in range(min(chunk_records, records - base)):
            seq = base + i
            value = seq.to_bytes(_SEQ_BYTES, "big") + pool[i * rand_len : (i + 1) * rand_len]
            ts = int(time.time() * 1000)
            timestamps[seq] = ts
            while True:
                try:
                    producer.produce(
                        topic, value=value, partition=seq % partitions, timestamp=ts, on_delivery=on_delivery
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
        if failures:
            break
    remaining = producer.flush(120)
    seconds = time.monotonic() - started
    if failures or remaining or acked != records:
        raise RuntimeError(
            f"produce failed: acked {acked}/{records}, unflushed {remaining}, "
            f"first error: {failures[0] if failures else None}"
        )
    return timestamps, seconds


# -- the mirror child process and its memory ---------------------------------------------------


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string of ASCII text is a valid TOML basic string


def write_config(
    path: Path,
    state_root: Path,
    source: str,
    target: str,
    topic: str,
    max_offsets: int | None,
    driver_copy_max_records: int | None = None,
) -> None:
    lines = [
        "[state]",
        f"root = {_toml(str(state_root))}",
        "",
        "[spark]",
        'master = "local[2]"',
        "",
        f"[clusters.{SOURCE_ALIAS}]",
        f"bootstrap_servers = {_toml(source)}",
        "",
        f"[clusters.{TARGET_ALIAS}]",
        f"bootstrap_servers = {_toml(target)}",
        "",
        "[[flows]]",
        f'source = "{SOURCE_ALIAS}"',
        f'target = "{TARGET_ALIAS}"',
        f"topics.include = [{_toml(re.escape(topic))}]",
    ]
    if max_offsets:
        lines.append(f"mirror.max_offsets_per_trigger = {max_offsets}")
    if driver_copy_max_records is not None:
        lines.append(f"mirror.driver_copy_max_records = {driver_copy_max_records}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from drkit.config import parse_config  # validate with drkit's own rules before starting Spark

    parse_config(tomllib.loads(path.read_text(encoding="utf-8")), str(path))


def _proc_kb(text: str, key: str) -> int:
    for line in text.splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


@dataclass
class TreeMemory:
    """Samples the memory of a process and all its descendants from /proc."""

    root: int
    interval: float
    peak_rss_kb: int = 0
    peak_pss_kb: int = 0
    hwm_kb: dict[int, int] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
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

    def sample(self) -> None:
        rss = pss = 0
        for pid in self._tree():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            except OSError:
                continue  # exited meanwhile
            rss += _proc_kb(status, "VmRSS:")
            pss += _proc_kb(rollup, "Pss:")
            hwm = _proc_kb(status, "VmHWM:")
            if hwm:
                self.hwm_kb[pid] = max(self.hwm_kb.get(pid, 0), hwm)
                self.names[pid] = _proc_name(status)  # latest: spark-submit (bash) execs java
        self.peak_rss_kb = max(self.peak_rss_kb, rss)
        self.peak_pss_kb = max(self.peak_pss_kb, pss)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def summary(self) -> dict[str, Any]:
        by_name: dict[str, int] = {}
        for pid, kb in self.hwm_kb.items():
            by_name[self.names[pid]] = by_name.get(self.names[pid], 0) + kb
        return {
            "peak_rss_mb": round(self.peak_rss_kb / 1024, 1),
            "peak_pss_mb": round(self.peak_pss_kb / 1024, 1),
            "sum_process_hwm_mb": round(sum(self.hwm_kb.values()) / 1024, 1),
            "hwm_mb_by_process_name": {k: round(v / 1024, 1) for k, v in sorted(by_name.items())},
            "processes_seen": len(self.hwm_kb),
            "samples": self.samples,
            "sample_interval_s": self.interval,
        }


def _proc_name(status: str) -> str:
    for line in status.splitlines():
        if line.startswith("Name:"):
            return line.split(None, 1)[1].strip() if len(line.split()) > 1 else "?"
    return "?"


@dataclass
class MirrorRun:
    seconds: float
    started_ms: int
    summary: list[dict[str, Any]]
    batches: list[dict[str, float]]
    phases: dict[str, float]
    memory: dict[str, Any]


def run_mirror(config: Path, workdir: Path, interval: float, timeout: float) -> MirrorRun:
    """``drkit mirror --once --output json`` in a child process, with its tree's memory sampled."""
    out_path, err_path = workdir / "mirror.stdout", workdir / "mirror.stderr"
    cmd = [sys.executable, "-c", _CHILD_CODE, "mirror", "-c", str(config), "--once", "--output", "json"]
    started_ms = int(time.time() * 1000)
    started = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        # Own session, so that the whole tree (driver, JVM, Python workers) can be ended on timeout.
        child = subprocess.Popen(
            cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=workdir, start_new_session=True
        )
        memory = TreeMemory(child.pid, interval)
        memory.start()
        try:
            child.wait(timeout)
        except BaseException as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise RuntimeError(f"the mirror did not finish within {timeout:g}s; it was killed") from None
            raise
        finally:
            memory.stop()
    seconds = time.monotonic() - started
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    if child.returncode != 0:
        raise RuntimeError(
            f"mirror exited with {child.returncode}: {stdout.strip()[-1000:]}\nstderr tail:\n{stderr[-3000:]}"
        )
    batches = [
        {"batch_id": int(m[1]), "records": int(m[2]), "ranges": int(m[3]), "seconds": float(m[4])}
        for m in _BATCH_LINE.finditer(stderr)
    ]
    phases: dict[str, float] = {}
    for m in _PHASE_LINE.finditer(stderr):
        phases[m[1]] = round(phases.get(m[1], 0.0) + float(m[2]), 3)
    if batches:
        # What is left of the batches' time once their timed steps are taken out: delivery, which
        # includes Spark reading the source partitions and the Python workers producing them.
        steps = sum(phases.get(k, 0.0) for k in ("batch_recorded_check", "plan_batch", "syncs_append"))
        phases["delivery_incl_source_read"] = round(sum(b["seconds"] for b in batches) - steps, 3)
    return MirrorRun(seconds, started_ms, json.loads(stdout), batches, phases, memory.summary())


# -- read back and check ----------------------------------------------------------------------


@dataclass
class TargetCheck:
    records: int = 0
    missing: int = 0
    duplicates: int = 0
    unexpected: int = 0  # sequence numbers out of range, or values of the wrong size
    wrong_partition: int = 0
    timestamp_types: dict[str, int] = field(default_factory=dict)
    latencies: array[int] = field(default_factory=lambda: array("q"))
    first_append_ms: int | None = None
    last_append_ms: int | None = None


_TS_TYPES = {0: "not_available", 1: "create_time", 2: "log_append_time"}


def read_target(
    bootstrap: str, topic: str, partitions: int, source_ts: array[int], size: int, idle_timeout: float = 60.0
) -> TargetCheck:
    """Read every record of ``topic`` and compare it with what was produced."""
    records = len(source_ts)
    seen = bytearray(records)  # copies per sequence number, saturating at 255
    check = TargetCheck()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"_drkit-bench-read-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pending = {p for p, end in ends.items() if end > 0}
        last_progress = time.monotonic()
        while pending:
            if time.monotonic() - last_progress > idle_timeout:
                raise TimeoutError(f"could not read {topic} partitions {sorted(pending)} to their end")
            for msg in consumer.consume(2000, 1.0):
                if msg.error():
                    raise KafkaException(msg.error())
                last_progress = time.monotonic()
                partition, value = msg.partition(), msg.value() or b""
                if msg.offset() >= ends[partition] - 1:
                    pending.discard(partition)
                check.records += 1
                ts_type, ts = msg.timestamp()
                name = _TS_TYPES.get(ts_type, str(ts_type))
                check.timestamp_types[name] = check.timestamp_types.get(name, 0) + 1
                seq = int.from_bytes(value[:_SEQ_BYTES], "big")
                if len(value) != size or seq >= records:
                    check.unexpected += 1
                    continue
                if partition != seq % partitions:
                    check.wrong_partition += 1
                if seen[seq]:
                    check.duplicates += 1
                elif ts_type == 2:  # broker append time: only then is there a latency
                    check.latencies.append(ts - source_ts[seq])
                    first, last = check.first_append_ms, check.last_append_ms
                    check.first_append_ms = ts if first is None else min(first, ts)
                    check.last_append_ms = ts if last is None else max(last, ts)
                seen[seq] = min(255, seen[seq] + 1)
    finally:
        consumer.close()
    check.missing = seen.count(0)
    return check


def percentiles(values: array[int]) -> dict[str, int] | None:
    """Nearest-rank percentiles."""
    if not values:
        return None
    ordered = sorted(values)

    def rank(q: float) -> int:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "max": ordered[-1]}


def versions(local_brokers: bool) -> dict[str, str | None]:
    import confluent_kafka

    import drkit
    from drkit import versions as jvm

    def dist(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "drkit": drkit.__version__,
        "spark": dist("pyspark"),
        "delta_spark": dist("delta-spark"),
        "confluent_kafka": dist("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka_broker": jvm.KAFKA_VERSION if local_brokers else None,
        "python": sys.version.split()[0],
    }


# -- main -------------------------------------------------------------------------------------


def _rate(amount: float, seconds: float | None, digits: int = 1) -> float | None:
    return round(amount / seconds, digits) if seconds else None


def bench(args: argparse.Namespace, state: Path) -> dict[str, Any]:
    local = args.bootstrap_source is None
    kafka = None
    if local:
        from drkit.localdev.clusters import LocalKafka

        kafka = LocalKafka(state / "kafka", base_port=args.base_port, heap=args.broker_heap)
        log(f"starting clusters A and B on ports {args.base_port} and {args.base_port + 10}")
        clusters = {c.alias: c.bootstrap_servers for c in kafka.up([SOURCE_ALIAS, TARGET_ALIAS])}
        source, target = clusters[SOURCE_ALIAS], clusters[TARGET_ALIAS]
    else:
        source, target = args.bootstrap_source, args.bootstrap_target
    try:
        if args.compare_paths:
            return _compare(args, state, source, target, local)
        return _measure(args, state, source, target, local)
    finally:
        if kafka is not None and not args.keep_clusters:
            log("stopping clusters")
            kafka.down()


#: The copy paths --compare-paths alternates: ``driver_copy_max_records`` for each (None: drkit's default).
PATHS: dict[str, int | None] = {"driver": None, "executors": 0}


def _compare(args: argparse.Namespace, state: Path, source: str, target: str, local: bool) -> dict[str, Any]:
    """Each path once per round on its own fresh topic, the first path alternating; ratios from medians."""
    runs: list[dict[str, Any]] = []
    names = list(PATHS)
    for round_ in range(args.rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            log(f"round {round_ + 1}/{args.rounds}: the {name} path")
            result = _measure(args, state, source, target, local, PATHS[name])
            if result["missing"] or result["unexpected"] or result["wrong_partition"]:
                raise RuntimeError(f"the {name} path's copy is not exact: {result['missing']} missing")
            runs.append({"path": name, "round": round_ + 1, **result})

    def median(name: str, key: str) -> float | None:
        values = [r[key] for r in runs if r["path"] == name and r[key] is not None]
        return statistics.median(values) if values else None

    figures = {
        name: {
            key: median(name, key)
            for key in ("copy_records_per_s", "copy_mb_per_s", "records_per_s", "mirror_copy_seconds", "peak_rss_mb")
        }
        for name in names
    }

    def ratio(key: str) -> float | None:
        driver, executors = figures["driver"][key], figures["executors"][key]
        return round(executors / driver, 3) if driver and executors else None

    per_round = [
        round(e["copy_records_per_s"] / d["copy_records_per_s"], 3)
        for d, e in (
            (
                next(r for r in runs if r["round"] == n and r["path"] == "driver"),
                next(r for r in runs if r["round"] == n and r["path"] == "executors"),
            )
            for n in range(1, args.rounds + 1)
        )
        if d["copy_records_per_s"] and e["copy_records_per_s"]
    ]
    return {
        "comparison": "executor copy path against driver copy path, drkit mirror --once on local[2]",
        "records": args.records,
        "record_size": args.size,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "median": figures,
        "ratio_executors_to_driver": {
            "copy_records_per_s": ratio("copy_records_per_s"),
            "records_per_s": ratio("records_per_s"),
            "copy_records_per_s_per_round": per_round,
        },
        "host_cpus": os.cpu_count(),
        "runs": [{k: v for k, v in r.items() if k not in ("memory", "definitions", "versions")} for r in runs],
        "versions": versions(local),
    }


def _measure(
    args: argparse.Namespace,
    state: Path,
    source: str,
    target: str,
    local: bool,
    driver_copy_max_records: int | None = None,
) -> dict[str, Any]:
    n, size, partitions = args.records, args.size, args.partitions
    topic = f"bench-mirror-{uuid.uuid4().hex[:8]}"
    target_topic = f"{SOURCE_ALIAS}.{topic}"  # the default prefix replication policy
    run_dir = state / "runs" / topic
    run_dir.mkdir(parents=True)
    create_topics(source, target, topic, target_topic, partitions)

    log(f"producing {n} records of {size} bytes to {topic} ({partitions} partitions) on {source}")
    source_ts, produce_seconds = produce(source, topic, n, size, partitions)
    log(f"produced in {produce_seconds:.2f}s")

    config = run_dir / "drkit.toml"
    write_config(
        config, run_dir / "drkit-state", source, target, topic, args.max_offsets_per_trigger, driver_copy_max_records
    )
    log(f"running the mirror: drkit mirror -c {config} --once --output json")
    load_before = os.getloadavg()[0]
    run = run_mirror(config, run_dir, args.sample_interval, args.timeout)
    load_after = os.getloadavg()[0]
    log(f"mirror finished in {run.seconds:.1f}s; reading {target_topic} back")

    check = read_target(target, target_topic, partitions, source_ts, size)
    flow = run.summary[0] if run.summary else {}
    copy_seconds = round(sum(b["seconds"] for b in run.batches), 3) if run.batches else None
    mb = n * size / 1e6
    span = startup = None
    if check.first_append_ms is not None and check.last_append_ms is not None:
        span = (check.last_append_ms - check.first_append_ms) / 1000
        startup = (check.first_append_ms - run.started_ms) / 1000
    return {
        "records": n,
        "bytes": n * size,
        "partitions": partitions,
        "record_size": size,
        "produce_seconds": round(produce_seconds, 3),
        "produce_records_per_s": _rate(n, produce_seconds),
        "mirror_seconds": round(run.seconds, 3),
        "mirror_copy_seconds": copy_seconds,
        "mirror_startup_seconds": startup,
        "target_append_span_seconds": span,
        "records_per_s": _rate(n, run.seconds),
        "mb_per_s": _rate(mb, run.seconds, 3),
        "copy_records_per_s": _rate(n, copy_seconds),
        "copy_mb_per_s": _rate(mb, copy_seconds, 3),
        "latency_ms": percentiles(check.latencies),
        "peak_rss_mb": run.memory["peak_rss_mb"],
        "memory": run.memory,
        "target_records": check.records,
        "missing": check.missing,
        "duplicates": check.duplicates,
        "unexpected": check.unexpected,
        "wrong_partition": check.wrong_partition,
        "target_timestamp_types": check.timestamp_types,
        "mirror": {
            "batches": run.batches,
            "phase_seconds": run.phases,
            "summary_records": flow.get("records"),
            "summary_bytes": flow.get("bytes"),
            "sync_ranges": flow.get("sync_ranges"),
            "skipped_batches": flow.get("skipped_batches"),
            "created_topics": flow.get("created_topics"),
            "max_offsets_per_trigger": args.max_offsets_per_trigger or "drkit default",
            "driver_copy_max_records": "drkit default" if driver_copy_max_records is None else driver_copy_max_records,
            "copy_executors": flow.get("copy_executors"),
            "driver_batches": flow.get("driver_batches"),
            "spark_master": "local[2]",
        },
        "topic": topic,
        "target_topic": target_topic,
        "clusters": {"source": source, "target": target, "started_by_bench": local},
        "host_cpus": os.cpu_count(),
        "host_load_1m": {"before_mirror": round(load_before, 2), "after_mirror": round(load_after, 2)},
        "versions": versions(local),
        "definitions": {
            "latency_ms": "target broker LogAppendTime minus source CreateTime, per record (first copy); "
            "the backlog is produced before the mirror starts, so this includes the wait for "
            "mirror start-up and earlier records (backlog drain, not live-tail latency)",
            "mirror_seconds": "wall time of the `drkit mirror --once` process, start-up included",
            "mirror_copy_seconds": "sum of the per-batch times the mirror logs (inside foreachBatch)",
            "peak_rss_mb": "max sampled sum of VmRSS over the mirror's process tree (see also peak_pss_mb)",
            "mb": "10**6 bytes of record values",
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    temp = args.state is None
    state = Path(tempfile.mkdtemp(prefix="drkit-bench-")) if temp else args.state.resolve()
    state.mkdir(parents=True, exist_ok=True)
    try:
        result = bench(args, state)
    except Exception as exc:
        log(f"failed: {exc}")
        return 1
    finally:
        if temp and not args.keep_clusters:
            shutil.rmtree(state, ignore_errors=True)
        elif args.keep_clusters:
            log(f"state kept in {state}")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
