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

``--drkit-path DIR`` runs the mirror child with drkit imported from another checkout (first on its PYTHONPATH):
the "before" of a change, same script (scripts/bench/ab.py alternates two checkouts on the same clusters).

Example::

    .venv/bin/python -m scripts.bench.mirror --records 20000 --size 200 --partitions 3
    .venv/bin/python -m scripts.bench.mirror --compare-paths --records 200000 --size 1000 --partitions 12 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.bench.lib.clusters import create_pair, local_kafka, start_pair
from scripts.bench.lib.drkit_child import child_code, phase_sums
from scripts.bench.lib.drkit_config import flow_config
from scripts.bench.lib.machine import versions
from scripts.bench.lib.memory import TreeMemory
from scripts.bench.lib.output import logger, print_json
from scripts.bench.lib.producers import SEQ_BYTES, produce_timed_backlog
from scripts.bench.lib.stats import nearest_rank_summary, rate
from scripts.bench.lib.target import read_target

#: The mirror's per-batch INFO line (batch id, records, ranges, seconds).
BATCH_LINE = re.compile(r"flow \S+: batch (\d+) mirrored (\d+) records in (\d+) ranges \(([\d.]+)s[,)]")

log = logger("bench")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m scripts.bench.mirror",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--records", type=int, default=200_000, help="records to produce and mirror")
    p.add_argument("--size", type=int, default=512, help=f"value size in bytes (>= {SEQ_BYTES})")
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
    p.add_argument(
        "--drkit-path",
        type=Path,
        default=None,
        help="run the mirror child with drkit imported from this checkout (to time an earlier commit)",
    )
    args = p.parse_args(argv)
    if args.size < SEQ_BYTES:
        p.error(f"--size must be at least {SEQ_BYTES} (the sequence number is in the value)")
    if args.records < 1 or args.partitions < 1:
        p.error("--records and --partitions must be positive")
    if bool(args.bootstrap_source) != bool(args.bootstrap_target):
        p.error("give both --bootstrap-source and --bootstrap-target, or neither")
    return args


# -- the mirror child process and its memory ---------------------------------------------------


def write_config(
    path: Path,
    state_root: Path,
    source: str,
    target: str,
    topic: str,
    max_offsets: int | None,
    driver_copy_max_records: int | None = None,
) -> None:
    flow: dict[str, Any] = {"topics.include": [re.escape(topic)]}
    if max_offsets:
        flow["mirror.max_offsets_per_trigger"] = max_offsets
    if driver_copy_max_records is not None:
        flow["mirror.driver_copy_max_records"] = driver_copy_max_records
    path.write_text(flow_config(str(state_root), source, target, flow), encoding="utf-8")
    from drkit.config import parse_config  # validate with drkit's own rules before starting Spark

    parse_config(tomllib.loads(path.read_text(encoding="utf-8")), str(path))


@dataclass
class MirrorRun:
    seconds: float
    started_ms: int
    summary: list[dict[str, Any]]
    batches: list[dict[str, float]]
    phases: dict[str, float]
    memory: dict[str, Any]


def child_env(drkit_path: Path | None) -> dict[str, str]:
    """The mirror child's environment: drkit imported from ``drkit_path`` (first on PYTHONPATH, which Spark's
    Python workers inherit too) if given, else from wherever this interpreter finds it."""
    env = dict(os.environ)
    if drkit_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(drkit_path), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_mirror(
    config: Path, workdir: Path, interval: float, timeout: float, drkit_path: Path | None = None
) -> MirrorRun:
    """``drkit mirror --once --output json`` in a child process (drkit from ``drkit_path`` if given), with its
    tree's memory sampled."""
    out_path, err_path = workdir / "mirror.stdout", workdir / "mirror.stderr"
    code = child_code(progress=False, query_start=False)
    cmd = [sys.executable, "-c", code, "mirror", "-c", str(config), "--once", "--output", "json"]
    started_ms = int(time.time() * 1000)
    started = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        # Own session, so that the whole tree (driver, JVM, Python workers) can be ended on timeout.
        child = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
            env=child_env(drkit_path),
            start_new_session=True,
        )
        memory = TreeMemory(child.pid, interval, pss=True).start()
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
        for m in BATCH_LINE.finditer(stderr)
    ]
    phases = phase_sums(stderr)
    if batches:
        # What is left of the batches' time once their timed steps are taken out: delivery, which
        # includes Spark reading the source partitions and the Python workers producing them.
        steps = sum(phases.get(k, 0.0) for k in ("batch_recorded_check", "plan_batch", "syncs_append"))
        phases["delivery_incl_source_read"] = round(sum(b["seconds"] for b in batches) - steps, 3)
    return MirrorRun(seconds, started_ms, json.loads(stdout), batches, phases, memory.summary())


# -- main -------------------------------------------------------------------------------------


def bench(args: argparse.Namespace, state: Path) -> dict[str, Any]:
    local = args.bootstrap_source is None
    kafka = None
    if local:
        kafka = local_kafka(state / "kafka", args.base_port, args.broker_heap)
        log(f"starting clusters A and B on ports {args.base_port} and {args.base_port + 10}")
        source, target = start_pair(kafka)
    else:
        source, target = args.bootstrap_source, args.bootstrap_target
    try:
        if args.compare_paths:
            return _compare(args, state, source, target, local)
        return measure(args, state, source, target, local)
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
            result = measure(args, state, source, target, local, PATHS[name])
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


def measure(
    args: argparse.Namespace,
    state: Path,
    source: str,
    target: str,
    local: bool,
    driver_copy_max_records: int | None = None,
) -> dict[str, Any]:
    """One backlog of ``args.records`` on a fresh topic, mirrored once by a drkit child (drkit from
    ``args.drkit_path`` if set) and read back; the run's figures."""
    n, size, partitions = args.records, args.size, args.partitions
    topic = f"bench-mirror-{uuid.uuid4().hex[:8]}"
    run_dir = state / "runs" / topic
    run_dir.mkdir(parents=True)
    copy_topic = create_pair(source, target, topic, partitions)

    log(f"producing {n} records of {size} bytes to {topic} ({partitions} partitions) on {source}")
    source_ts, produce_seconds = produce_timed_backlog(source, topic, n, size, partitions)
    log(f"produced in {produce_seconds:.2f}s")

    config = run_dir / "drkit.toml"
    write_config(
        config, run_dir / "drkit-state", source, target, topic, args.max_offsets_per_trigger, driver_copy_max_records
    )
    log(f"running the mirror: drkit mirror -c {config} --once --output json")
    load_before = os.getloadavg()[0]
    drkit_path = getattr(args, "drkit_path", None)
    run = run_mirror(config, run_dir, args.sample_interval, args.timeout, drkit_path)
    load_after = os.getloadavg()[0]
    log(f"mirror finished in {run.seconds:.1f}s; reading {copy_topic} back")

    check = read_target(target, copy_topic, partitions, source_ts, size)
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
        "produce_records_per_s": rate(n, produce_seconds),
        "mirror_seconds": round(run.seconds, 3),
        "mirror_copy_seconds": copy_seconds,
        "mirror_startup_seconds": startup,
        "target_append_span_seconds": span,
        "records_per_s": rate(n, run.seconds),
        "mb_per_s": rate(mb, run.seconds, 3),
        "copy_records_per_s": rate(n, copy_seconds),
        "copy_mb_per_s": rate(mb, copy_seconds, 3),
        "latency_ms": nearest_rank_summary(check.latencies),
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
        "target_topic": copy_topic,
        "clusters": {"source": source, "target": target, "started_by_bench": local},
        "host_cpus": os.cpu_count(),
        "host_load_1m": {"before_mirror": round(load_before, 2), "after_mirror": round(load_after, 2)},
        "drkit_path": str(drkit_path) if drkit_path else None,
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
    print_json(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
