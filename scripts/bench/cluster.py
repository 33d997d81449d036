"""Benchmark of the mirror on a Spark standalone cluster: 1 worker against 2 workers. Not a test.

What it does:

1. Starts two local KRaft clusters A and B (``--base-port``) and a local Spark standalone cluster
   (drkit.localdev.spark_cluster, ``--spark-base-port``): a master and two workers on 127.0.0.1, each
   worker offering ``--worker-cores`` cores and ``--worker-memory`` to one executor.
2. For each round, for each worker count (1, 2; the order alternates from one round to the next, so a
   drift of the machine's load does not favour one), with worker 2 stopped for the 1-worker runs:
   produces a fresh backlog of N records of S bytes (sequence number + random bytes, incompressible) to a
   new topic of P partitions, runs ``drkit --verbose mirror --once --output json`` in a child process with
   ``[spark] master`` the cluster's, and reads the whole target topic back, checking every record.
   With ``--running`` the mirror runs as in production instead: ``drkit --verbose mirror`` without
   ``--once`` (its long-lived copy tasks on the executors copy as records arrive, drkit.mirror.copier_tasks),
   started once the backlog is on A; the target (pre-created with ``LogAppendTime``) is watched until it
   holds the N records, the mirror is then stopped with SIGINT, and the target read back and checked.
3. Prints one JSON document: every run, and per worker count the median rates; the ratio of the 2-worker
   median to the 1-worker median (wall time and copy time; with ``--running``, the append-span rate and the
   rate until copied).

Definitions:

* ``mirror_seconds``: wall time of the mirror process (Python and Spark start, the application's
  executors, all batches, shutdown); ``records_per_s`` is over it.
* ``copy_seconds``: the sum of the batch times the mirror logs (planning, the copy job, the syncs' append);
  ``copy_records_per_s`` is over it. It leaves out the start-up, which does not depend on the workers.
* ``later_batches_records_per_s``: the same over the batches after the first: the first also starts each
  executor's Python worker (imports, Kafka clients), a cost paid once per executor, not per record.
* ``executors``: the executor ids the mirror's summary names as copiers (none may be ``driver``).

With ``--running`` (``setup.mode`` = ``running``; the figures above do not apply):

* ``records_per_s``, ``mb_per_s``: N over the target's append span (last LogAppendTime minus the first,
  over its partitions), as scripts.bench.against_mm2's backlog copy: start-up is not in it.
* ``startup_seconds``: the first append on the target minus the mirror process's start (Python, Spark, the
  application's executors, the copy tasks).
* ``until_copied_seconds``, ``wall_records_per_s``: from the mirror process's start until the target held N
  records (polled every 0.2 s), and N over it.
* ``stop_seconds``, ``exit_code``, ``killed``: the SIGINT stop (SIGKILL of the tree after 120 s).
* ``copy_tasks``, ``copy_tasks_connected``, ``copy_tasks_restarted``: from the mirror's log: the tasks it
  started (one per executor core), each one's executor as it connected, and how often the job of copy tasks
  was started again; ``batches``, ``batch_records``, ``where``: the micro-batches logged meanwhile (the
  batch line's last part: who copied).
* ``host_load_1m``: the 1-minute load average before and after each mirror run: on a shared 2-core
  machine the workers, brokers and driver compete for the same cores; compare runs at similar load.

Example::

    .venv/bin/python -m scripts.bench.cluster --records 100000 --size 1000 --rounds 2
    .venv/bin/python -m scripts.bench.cluster --running --records 100000 --size 1000 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from drkit.localdev.spark_cluster import LocalSpark
from scripts.bench.lib.clusters import create_pair, local_kafka, start_pair
from scripts.bench.lib.copiers import spawn
from scripts.bench.lib.drkit_config import flow_config
from scripts.bench.lib.machine import REPO, versions
from scripts.bench.lib.output import logger, print_json
from scripts.bench.lib.producers import produce_timed_backlog
from scripts.bench.lib.stats import median, rate
from scripts.bench.lib.target import read_target
from scripts.bench.lib.watch import append_span, total, wait_for

log = logger("bench")

_BATCH = re.compile(r"batch (\d+) mirrored (\d+) records in \d+ ranges \(([\d.]+)s, (?:[a-z]+ [\d.]+s, )*(.*)\)$")
#: The running mirror's copy tasks (drkit.mirror.copier_tasks): how many, and each one's executor.
_TASKS = re.compile(r"copying as records arrive in (\d+) copy task\(s\)")
_CONNECTED = re.compile(r"copy task (\d+) connected \(executor (\S+) on (\S+), attempt (\d+)\)")
_TASKS_RESTARTED = re.compile(r"the copy tasks ended|the job of copy tasks failed")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.cluster", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--running",
        action="store_true",
        help="run the mirror continuously (no --once): its copy tasks on the executors copy the backlog",
    )
    p.add_argument("--records", type=int, default=100_000, help="records of each backlog")
    p.add_argument("--size", type=int, default=1000, help="value size in bytes")
    p.add_argument("--partitions", type=int, default=12, help="partitions of each source topic")
    p.add_argument("--max-offsets-per-trigger", type=int, default=50_000, help="the mirror's batch size")
    p.add_argument("--rounds", type=int, default=2, help="rounds of (1 worker, 2 workers), order alternating")
    p.add_argument("--base-port", type=int, default=39392, help="broker port of A; B gets base+10")
    p.add_argument("--spark-base-port", type=int, default=39492, help="Spark master port; workers +10, +20")
    p.add_argument("--worker-cores", type=int, default=1)
    p.add_argument("--worker-memory", default="1g")
    p.add_argument("--executor-memory", default="768m")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--state", type=Path, help="state folder; default a temporary one, removed at the end")
    return p.parse_args(argv)


def write_config(path: Path, root: Path, cluster: LocalSpark, source: str, target: str, topic: str, args: Any) -> None:
    spark = {
        "master": cluster.master_url(),
        "auth_secret_file": str(cluster.secret_file()),  # the cluster authenticates (drkit.core.spark_security)
        "driver_host": "127.0.0.1",
        "driver_bind_address": "127.0.0.1",
        "conf": {"spark.executor.memory": args.executor_memory, "spark.driver.memory": "1g"},
    }
    flow = {
        "topics.include": [re.escape(topic)],
        "heartbeats.interval_seconds": 0,
        "mirror.max_offsets_per_trigger": args.max_offsets_per_trigger,
    }
    path.write_text(flow_config(str(root), source, target, flow, spark))


def set_workers(spark: LocalSpark, workers: int) -> None:
    """Leave exactly ``workers`` workers running, and wait until the master counts exactly those."""
    if workers == 1:
        spark.stop("worker-2")
    spark.up(workers)
    deadline = time.monotonic() + 120
    while spark.status().alive_workers != workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the master does not count {workers} alive workers")
        time.sleep(0.5)


def one_run(args: Any, state: Path, spark: LocalSpark, source: str, target: str, workers: int) -> dict[str, Any]:
    set_workers(spark, workers)
    topic = f"bench-cluster-{uuid.uuid4().hex[:8]}"
    run_dir = state / "runs" / topic
    run_dir.mkdir(parents=True)
    target_topic = create_pair(source, target, topic, args.partitions)
    log(f"{workers} worker(s): producing {args.records} records of {args.size} bytes to {topic}")
    source_ts, _ = produce_timed_backlog(source, topic, args.records, args.size, args.partitions)
    config = run_dir / "drkit.toml"
    write_config(config, run_dir / "state", spark, source, target, topic, args)
    command = [sys.executable, "-m", "drkit.cli.app", "--verbose", "mirror", "-c", str(config), "--once", "-o", "json"]
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, cwd=run_dir)
    seconds = time.monotonic() - started
    load_after = os.getloadavg()[0]
    (run_dir / "mirror.stderr").write_text(done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"mirror exited with {done.returncode}: {done.stderr[-2000:]}")
    [summary] = json.loads(done.stdout)
    batches = [m for m in map(_BATCH.search, done.stderr.splitlines()) if m]
    copy_seconds = round(sum(float(m[3]) for m in batches), 3) or None
    # The first batch also starts each executor's Python worker (imports, clients): apart from the rest.
    later = [m for m in batches if int(m[1]) > min(int(b[1]) for b in batches)]
    later_seconds = round(sum(float(m[3]) for m in later), 3) or None
    later_records = sum(int(m[2]) for m in later)
    check = read_target(target, target_topic, args.partitions, source_ts, args.size)
    log(f"{workers} worker(s): {seconds:.1f}s wall, copy {copy_seconds}s, missing {check.missing}")
    return {
        "workers": workers,
        "topic": topic,
        "mirror_seconds": round(seconds, 3),
        "copy_seconds": copy_seconds,
        "records_per_s": rate(args.records, seconds),
        "copy_records_per_s": rate(args.records, copy_seconds),
        "copy_mb_per_s": rate(args.records * args.size / 1e6, copy_seconds, 3),
        "later_batches_seconds": later_seconds,
        "later_batches_records_per_s": rate(later_records, later_seconds),
        "batches": [
            {"batch_id": int(m[1]), "records": int(m[2]), "seconds": float(m[3]), "where": m[4]} for m in batches
        ],
        "executors": summary.get("copy_executors"),
        "driver_batches": summary.get("driver_batches"),
        "target_records": check.records,
        "missing": check.missing,
        "duplicates": check.duplicates,
        "host_load_1m": {"before": round(load_before, 2), "after": round(load_after, 2)},
    }


def one_running(args: Any, state: Path, spark: LocalSpark, source: str, target: str, workers: int) -> dict[str, Any]:
    """``--running``: ``drkit mirror`` without ``--once`` copies the backlog; stopped with SIGINT once the target
    holds it; the copy rate from the target's append span."""
    set_workers(spark, workers)
    topic = f"bench-cluster-{uuid.uuid4().hex[:8]}"
    run_dir = state / "runs" / topic
    run_dir.mkdir(parents=True)
    target_topic = create_pair(source, target, topic, args.partitions)
    log(f"{workers} worker(s): producing {args.records} records of {args.size} bytes to {topic}")
    source_ts, _ = produce_timed_backlog(source, topic, args.records, args.size, args.partitions)
    config = run_dir / "drkit.toml"
    write_config(config, run_dir / "state", spark, source, target, topic, args)
    command = [sys.executable, "-m", "drkit.cli.app", "--verbose", "mirror", "-c", str(config)]
    watcher = Consumer({"bootstrap.servers": target, "group.id": "bench-watch", "enable.auto.commit": False})
    load_before = os.getloadavg()[0]
    began_wall = time.time()
    running = spawn("mirror", command, run_dir, {"PYTHONPATH": str(REPO)})
    try:
        done = wait_for(watcher, target_topic, args.partitions, args.records, args.timeout, running)
        seconds = time.monotonic() - running.started
        load_after = os.getloadavg()[0]
        on_target = total(watcher, target_topic, args.partitions)
    finally:
        stopped = running.stop()
        watcher.close()
    text = running.log.read_text(errors="replace")
    lines = text.splitlines()
    tasks = [int(m[1]) for m in map(_TASKS.search, lines) if m]
    connected = [
        {"task": int(m[1]), "executor": m[2], "host": m[3], "attempt": int(m[4])}
        for m in map(_CONNECTED.search, lines)
        if m
    ]
    batches = [m for m in map(_BATCH.search, lines) if m]
    result: dict[str, Any] = {
        "workers": workers,
        "topic": topic,
        "copy_tasks": tasks[0] if tasks else None,
        "copy_tasks_connected": connected,
        "copy_tasks_restarted": sum(1 for line in lines if _TASKS_RESTARTED.search(line)),
        "batches": len(batches),
        "batch_records": sum(int(m[2]) for m in batches),
        "where": sorted({m[4] for m in batches}),
        "host_load_1m": {"before": round(load_before, 2), "after": round(load_after, 2)},
        **stopped,
    }
    if done is None:
        result["error"] = f"not copied within {args.timeout:g}s ({on_target} of {args.records}); see {running.log}"
        log(f"{workers} worker(s): {result['error']}")
        return result
    first, last = append_span(target, target_topic, args.partitions)
    span = max((last - first) / 1000, 0.001)
    check = read_target(target, target_topic, args.partitions, source_ts, args.size)
    result.update(
        {
            "startup_seconds": round(first / 1000 - began_wall, 2),
            "until_copied_seconds": round(seconds, 3),
            "copy_seconds": round(span, 3),
            "records_per_s": rate(args.records, span),
            "mb_per_s": rate(args.records * args.size / 1e6, span, 3),
            "wall_records_per_s": rate(args.records, seconds),
            "target_records": check.records,
            "missing": check.missing,
            "duplicates": check.duplicates,
        }
    )
    log(
        f"{workers} worker(s): {result['records_per_s']} records/s over the append span ({span:.1f}s), "
        f"start-up {result['startup_seconds']}s, {len(connected)} task(s) connected, missing {check.missing}, "
        f"stopped in {stopped['stop_seconds']}s"
    )
    return result


LATER = "later_batches_records_per_s"
#: The figures of each mode: medians per worker count, ratios of 2 workers over 1.
FIGURES = {
    "once": (
        ("records_per_s", "copy_records_per_s", "copy_mb_per_s", LATER),
        ("records_per_s", "copy_records_per_s", LATER),
    ),
    "running": (
        ("records_per_s", "mb_per_s", "wall_records_per_s", "startup_seconds"),
        ("records_per_s", "wall_records_per_s"),
    ),
}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    temp = args.state is None
    state = Path(tempfile.mkdtemp(prefix="drkit-bench-cluster-")) if temp else args.state.resolve()
    kafka = local_kafka(state / "kafka", args.base_port, "512m")
    spark = LocalSpark(state / "spark", args.spark_base_port, args.worker_cores, args.worker_memory)
    runs: list[dict[str, Any]] = []
    try:
        log("starting clusters A, B and the Spark standalone cluster")
        source, target = start_pair(kafka)
        spark.up(2)
        for round_number in range(args.rounds):
            order = (1, 2) if round_number % 2 == 0 else (2, 1)
            for workers in order:
                run = one_running if args.running else one_run
                runs.append(run(args, state, spark, source, target, workers))
    except Exception as exc:
        log(f"failed: {exc}")
        return 1
    finally:
        spark.down()
        kafka.down()
        if temp:
            shutil.rmtree(state, ignore_errors=True)
    mode = "running" if args.running else "once"
    figures, ratios = FIGURES[mode]
    by_workers = {w: [r for r in runs if r["workers"] == w and "error" not in r] for w in (1, 2)}
    medians = {str(w): {k: median((r[k] for r in rs), 1) for k in figures} for w, rs in by_workers.items()}

    def ratio(key: str) -> float | None:
        one, two = medians["1"][key], medians["2"][key]
        return round(two / one, 2) if one and two else None

    result = {
        "setup": {
            "mode": mode,
            "records": args.records,
            "record_size": args.size,
            "partitions": args.partitions,
            "max_offsets_per_trigger": args.max_offsets_per_trigger,
            "worker_cores": args.worker_cores,
            "worker_memory": args.worker_memory,
            "executor_memory": args.executor_memory,
            "rounds": args.rounds,
            "host_cpus": os.cpu_count(),
        },
        "median": medians,
        "ratio_2_over_1": {k: ratio(k) for k in ratios},
        "failed_runs": sum(1 for r in runs if "error" in r),
        "runs": runs,
        "versions": versions(True),
    }
    print_json(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
