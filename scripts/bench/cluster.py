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
3. Prints one JSON document: every run, and per worker count the median rates; the ratio of the 2-worker
   median to the 1-worker median (wall time and copy time).

Definitions:

* ``mirror_seconds``: wall time of the mirror process (Python and Spark start, the application's
  executors, all batches, shutdown); ``records_per_s`` is over it.
* ``copy_seconds``: the sum of the batch times the mirror logs (planning, the copy job, the syncs' append);
  ``copy_records_per_s`` is over it. It leaves out the start-up, which does not depend on the workers.
* ``later_batches_records_per_s``: the same over the batches after the first: the first also starts each
  executor's Python worker (imports, Kafka clients), a cost paid once per executor, not per record.
* ``executors``: the executor ids the mirror's summary names as copiers (none may be ``driver``).
* ``host_load_1m``: the 1-minute load average before and after each mirror run: on a shared 2-core
  machine the workers, brokers and driver compete for the same cores; compare runs at similar load.

Example::

    .venv/bin/python -m scripts.bench.cluster --records 100000 --size 1000 --rounds 2
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

from drkit.localdev.spark_cluster import LocalSpark
from scripts.bench.lib.clusters import create_pair, local_kafka, start_pair
from scripts.bench.lib.drkit_config import flow_config
from scripts.bench.lib.machine import versions
from scripts.bench.lib.output import logger, print_json
from scripts.bench.lib.producers import produce_timed_backlog
from scripts.bench.lib.stats import median, rate
from scripts.bench.lib.target import read_target

log = logger("bench")

_BATCH = re.compile(r"batch (\d+) mirrored (\d+) records in \d+ ranges \(([\d.]+)s, (?:[a-z]+ [\d.]+s, )*(.*)\)$")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.cluster", description=__doc__.split("\n\n")[0])
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


LATER = "later_batches_records_per_s"


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
                runs.append(one_run(args, state, spark, source, target, workers))
    except Exception as exc:
        log(f"failed: {exc}")
        return 1
    finally:
        spark.down()
        kafka.down()
        if temp:
            shutil.rmtree(state, ignore_errors=True)
    by_workers = {w: [r for r in runs if r["workers"] == w] for w in (1, 2)}
    figures = ("records_per_s", "copy_records_per_s", "copy_mb_per_s", LATER)
    medians = {str(w): {k: median((r[k] for r in rs), 1) for k in figures} for w, rs in by_workers.items()}

    def ratio(key: str) -> float | None:
        one, two = medians["1"][key], medians["2"][key]
        return round(two / one, 2) if one and two else None

    result = {
        "setup": {
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
        "ratio_2_over_1": {k: ratio(k) for k in ("records_per_s", "copy_records_per_s", LATER)},
        "runs": runs,
        "versions": versions(True),
    }
    print_json(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
