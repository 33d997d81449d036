"""Mirror benchmark: drkit, Apache Kafka's MirrorMaker 2 and a plain client loop on the same two clusters.

Usage::

    .venv/bin/python -m scripts.bench.against_mm2 --quick   # a few minutes: one repetition, small backlogs
    .venv/bin/python -m scripts.bench.against_mm2           # the full suite (~20-30 min on 2 cores)

    # drkit also on a local Spark standalone cluster (2 workers x 1 core), steady state only:
    .venv/bin/python -m scripts.bench.against_mm2 --copiers drkit,drkit-cluster,mm2 --no-backlog

    # drkit at-least-once, drkit exactly-once and MM2; steady steps at 100 B and 1 KB:
    .venv/bin/python -m scripts.bench.against_mm2 --copiers drkit,drkit-eos,mm2 --sizes 100,1000 \
        --rates 2000,10000,20000 --steady-sizes 100,1000

Prints one JSON document to stdout and a Markdown table to stderr (and to ``--markdown FILE``).

The copiers (``--copiers``, default ``drkit,mm2,plain``): ``drkit`` is ``drkit mirror`` with its default
``[spark] master = "local[2]"`` (the driver copies continuously, at least once); ``drkit-eos`` the same with
``[flows.mirror] delivery = "exactly_once"`` (with the local master: the continuous exactly-once copy, its
transactions committed as records flow; ``--drkit-mirror`` applies to both); ``drkit-cluster`` is the same command and
settings with ``[spark]`` naming a local Spark standalone cluster (drkit.localdev.spark_cluster.LocalSpark,
state under ``--state``/spark, master on ``--spark-base-port``, worker i on +10*i): ``--spark-workers``
workers (default 2) of ``--worker-cores`` cores (1) and ``--worker-memory`` (1g), executors of
``--executor-memory`` (512m), its secret as ``auth_secret_file``, the driver on 127.0.0.1; the records are
then copied by the long-lived copy tasks on the executors (drkit.mirror.copier_tasks). The cluster is started
once, before the first measurement, and stopped at the end; its workers and cores are in the JSON
(``spark_cluster``). It runs on the same machine as everything else: its executors share the cores with the
brokers and the driver. ``mm2`` is MirrorMaker 2, ``plain`` the plain client loop.

What it does, on two local KRaft clusters A and B (drkit.localdev.clusters.LocalKafka on
``--base-port`` and +10, state under ``--state``), with the same settings for every copier (acks=all,
idempotent where the copier allows, ``--compression`` (lz4, drkit's default), linger 5 ms, MM2
``tasks.max=2``, every replication factor 1):

* **Backlog copy.** For each record size (100 B, 1 KB, 100 KB; incompressible values), N records are
  produced to a fresh 12-partition topic on A *before* the copier starts. The copier is started, and
  the target topic (pre-created ``A.<topic>`` with 12 partitions and ``LogAppendTime``) is watched until
  it holds N records. Start-up = first record appended on B minus the copier's process start; the copy
  rate = N / (last append - first append) on B, so start-up is not in it. For ``drkit-eos`` an append
  counts before its transaction commits: a ``read_committed`` consumer of B (scripts/bench/lib/reader.py)
  reads the copy from its start, the copier is done when it received N records, and the rate's span ends
  when it received the last one (``backlog_measured_at`` in the JSON, per copier and per run; the received
  and duplicated counts too). The copier is then stopped with SIGINT (SIGTERM for MM2) and the stop time
  is reported. ``--records`` sets N for every size.
* **Steady state.** One copier process tails a fresh topic, started while a trickle is produced (start-up
  to the first mirrored record with an idle copier). A warm-up follows, not measured: the first rate for
  ``--warmup-seconds`` (a long-running copier's first seconds of load, JIT and connections, are not its
  steady state), until the copier caught up. Then for each record size of ``--steady-sizes`` (default
  1 KB), in order, and each rate (records/s), in order, the load is produced for ``--step-seconds``, all
  in the same copier process; every record carries its send time. End-to-end latency, over all records
  of the step (``--latency-at``, in the JSON as ``latency_at``): ``append``, B's append time minus send
  time; or ``consumer``, when a ``read_committed`` consumer of B, started before the step and assigned
  to every partition at the step's start offsets, received the record minus its send time (what a
  reader of B waits, transactions included). The default is ``consumer`` when ``drkit-eos`` is among
  the copiers (every copier of a run is measured the same way), else ``append``. A rate is *sustained*
  when the copier caught up within 30 s of the step's end, p99 < 2 s and 99 % of the step's records were
  measured (scripts/bench/lib/paced.py); the highest sustained rate per size is reported, and a size's
  higher rates are skipped after its first that is not. ``--no-steady`` skips this part, ``--no-backlog``
  the backlog copy. The copiers' steady runs follow each other in ``--copiers`` order.
* **Memory.** Peak RSS of the copier's whole process tree (drkit: Python driver, Spark JVM, Python
  workers; MM2: its JVM; plain: one Python process), sampled every 0.5 s. For ``drkit-cluster`` that tree
  is the driver's only; the Spark workers' trees (worker JVM, executor, its Python workers) are sampled
  apart, each, while the copier runs (``workers_peak_rss_mb``).
* **Load.** The 1-minute load average before and after every measurement. The copiers are alternated
  (order reversed on every repetition) so that each ratio comes from one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from scripts.bench.lib.against_mm2_report import (
    COPIERS,
    DEFAULT_COPIERS,
    DRKIT,
    EXACTLY_ONCE,
    TRANSACTIONAL,
    backlog_at,
    default_latency_at,
    markdown,
    reference_size,
    summarize,
)
from scripts.bench.lib.clusters import create_pair, local_kafka, start_pair
from scripts.bench.lib.copiers import Running, start_drkit, start_mm2, start_plain
from scripts.bench.lib.drkit_child import drkit_phases
from scripts.bench.lib.machine import load1
from scripts.bench.lib.memory import TreeMemory
from scripts.bench.lib.output import finish_report, logger
from scripts.bench.lib.paced import LatencyAt, Target
from scripts.bench.lib.producers import SEQ_BYTES, Pacer, produce_backlog
from scripts.bench.lib.reader import Reader
from scripts.bench.lib.watch import append_span, total, wait_for

PARTITIONS = 12

log = logger("bench")
load = load1

#: Copiers started and not yet stopped: stopped on the way out whatever happens.
LIVE: list[Running] = []


def drkit_mirror_settings(pairs: list[str], option: str = "--drkit-mirror") -> dict[str, Any]:
    """``--drkit-mirror KEY=VALUE`` options as [flows.mirror] settings (values parsed as TOML)."""
    import tomllib

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"{option} wants KEY=VALUE, got {pair!r}")
        out[key.strip()] = tomllib.loads(f"v = {value}")["v"]
    return out


def start(
    copier: str,
    workdir: Path,
    a: str,
    b: str,
    topic: str,
    target_topic: str,
    args: argparse.Namespace,
    records: int = 0,
) -> Running:
    if copier in DRKIT:
        spark = None
        if copier == "drkit-cluster":
            spark = getattr(args, "spark_section", None)
            if spark is None:
                raise RuntimeError("drkit-cluster needs the Spark cluster (started by main)")
        mirror = drkit_mirror_settings(args.drkit_mirror)
        if copier in TRANSACTIONAL:
            mirror.update(EXACTLY_ONCE)
        running = start_drkit(
            workdir,
            a,
            b,
            topic,
            mirror,
            drkit_mirror_settings(getattr(args, "drkit_topology", []), "--drkit-topology"),
            spark,
        )
    elif copier == "mm2":
        running = start_mm2(workdir, a, b, topic, args.compression)
    else:
        running = start_plain(workdir, a, b, topic, target_topic, args.compression, records)
    LIVE.append(running)
    return running


def spark_section(cluster: Any, executor_memory: str) -> dict[str, Any]:
    """The ``[spark]`` section of a drkit config running on the standalone ``cluster`` (a LocalSpark): its
    master, its secret (the cluster authenticates), the driver on loopback like the cluster."""
    return {
        "master": cluster.master_url(),
        "auth_secret_file": str(cluster.secret_file()),
        "driver_host": "127.0.0.1",
        "driver_bind_address": "127.0.0.1",
        "conf": {"spark.executor.memory": executor_memory},
    }


def worker_memory(copier: str, args: argparse.Namespace) -> list[TreeMemory]:
    """For drkit-cluster: the Spark workers' process trees (worker JVM, its executor, the executor's Python
    workers) sampled while the copier runs; the copier's own tree is only the driver's. Nothing otherwise."""
    if copier != "drkit-cluster":
        return []
    return [TreeMemory(pid).start() for pid in getattr(args, "worker_pids", [])]


def worker_peaks(memories: list[TreeMemory]) -> dict[str, Any]:
    for memory in memories:
        memory.stop()
    if not memories:
        return {}
    return {"workers_peak_rss_mb": [m.peak_rss_mb() for m in memories]}


# -- measurements ---------------------------------------------------------------------------------------


def backlog(
    copier: str, size: int, records: int, a: str, b: str, work: Path, args: argparse.Namespace, watcher: Consumer
) -> dict[str, Any]:
    """One backlog copy. Its span starts at B's first append; it ends at B's last append, or for a copier writing in
    transactions when a read_committed consumer of B received the last record (an append counts before its
    commit)."""
    topic = f"bl-{copier}-{size}-{uuid.uuid4().hex[:6]}"
    target_topic = create_pair(a, b, topic, PARTITIONS)
    produce_backlog(a, topic, records, size, PARTITIONS)
    measured_at = backlog_at(copier)
    reader = Reader(b, target_topic, PARTITIONS) if copier in TRANSACTIONAL else None
    if reader is not None:
        reader.start()
    load_before = load()
    began_wall = time.time()
    running = start(copier, work / topic, a, b, topic, target_topic, args, records)
    workers = worker_memory(copier, args)
    if reader is None:
        done = wait_for(watcher, target_topic, PARTITIONS, records, args.timeout, running)
    else:
        done = reader.wait_for(records, args.timeout, running)
        time.sleep(1.0)  # a duplicate arriving late is counted too
    arrived = reader.finish() if reader is not None else []
    load_after = load()
    stopped = {**running.stop(), **worker_peaks(workers)}
    result: dict[str, Any] = {
        "copier": copier,
        "size": size,
        "records": records,
        "backlog_measured_at": str(measured_at),
        "load_before": load_before,
        "load_after": load_after,
        **stopped,
    }
    if reader is not None:
        seqs = [seq for seq, _, _ in arrived]
        result.update({"received": len(seqs), "duplicated": len(seqs) - len(set(seqs))})
    if done is None:
        copied = len(arrived) if reader is not None else total(watcher, target_topic, PARTITIONS)
        result["error"] = f"not copied within {args.timeout:g}s ({copied} of {records})"
        return result
    if reader is None:
        first_ms, last_ms = append_span(b, target_topic, PARTITIONS)
        first, last, on_target = first_ms / 1000, last_ms / 1000, total(watcher, target_topic, PARTITIONS)
    else:
        first = min(appended for _, _, appended in arrived)
        last = max(received for _, received, _ in arrived)
        on_target = len(arrived)
    span = max(last - first, 0.001)
    result.update(
        {
            "startup_seconds": round(first - began_wall, 2),
            "copy_seconds": round(span, 3),
            "records_per_s": round(records / span),
            "mb_per_s": round(records * size / span / 1e6, 2),
            "on_target": on_target,
        }
    )
    if copier in DRKIT:
        result["phases"] = drkit_phases(running.log)
    return result


def steady(copier: str, a: str, b: str, work: Path, args: argparse.Namespace, watcher: Consumer) -> dict[str, Any]:
    """One copier process through every steady step: the sizes in order, the rates in order within each; a rate
    the copier does not sustain ends that size's rates."""
    topic = f"ss-{copier}-{uuid.uuid4().hex[:6]}"
    target_topic = create_pair(a, b, topic, PARTITIONS)
    began_wall = time.time()
    load_before = load()
    running = start(copier, work / topic, a, b, topic, target_topic, args)
    workers = worker_memory(copier, args)
    # Start-up with an idle copier: a trickle of 20 records/s until the first one arrives on B.
    trickle = Pacer(a, topic, 20, args.timeout, PARTITIONS)
    trickle.start()
    first = wait_for(watcher, target_topic, PARTITIONS, 1, args.timeout, running)
    trickle.seconds = 0  # ends the trickle
    trickle.join()
    result: dict[str, Any] = {"copier": copier, "load_before_start": load_before, "steps": []}
    if first is None:
        result["error"] = "no record mirrored"
        result.update(running.stop())
        result.update(worker_peaks(workers))
        return result
    first_append_ms = append_span(b, target_topic, PARTITIONS)[0]
    result["startup_to_first_record_seconds"] = round(first_append_ms / 1000 - began_wall, 2)
    wait_for(watcher, target_topic, PARTITIONS, trickle.sent, 60, running)
    target = Target(a, b, topic, target_topic, PARTITIONS, watcher, running, LatencyAt(args.latency_at))
    if args.warmup_seconds > 0 and args.rates:
        warmup = target.load(args.rates[0], args.warmup_seconds, args.steady_sizes[0], 60)
        result["warmup_caught_up"] = warmup.caught is not None
    highest: dict[str, int] = {}
    for size in args.steady_sizes:
        highest[str(size)] = 0
        for rate in args.rates:
            step = target.step(rate, size, args.step_seconds)
            result["steps"].append(step)
            log(
                f"{copier} {size} B at {rate}/s: p50 {step['p50_ms']} ms, p99 {step['p99_ms']} ms, "
                f"sustained {step['sustained']} (load {step['load_before']})"
            )
            if not step["sustained"]:
                break
            highest[str(size)] = rate
    result["highest_sustained_rate"] = highest[str(reference_size(args.steady_sizes))]
    result["highest_sustained_rate_by_size"] = highest
    result.update(running.stop())
    result.update(worker_peaks(workers))
    if copier in DRKIT:
        result["phases"] = drkit_phases(running.log)
    return result


def parse_sizes(parser: argparse.ArgumentParser, option: str, text: str) -> list[int]:
    """Comma-separated record sizes: at least the 8 bytes a value starts with (producers.SEQ_BYTES)."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        parser.error(f"{option} wants comma-separated integers, got {text!r}")
    if not sizes or min(sizes) < SEQ_BYTES:
        parser.error(f"{option} wants record sizes of at least {SEQ_BYTES} bytes, got {text!r}")
    return sizes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, with their defaults resolved: lists of sizes, rates and copiers, the latency method, the
    backlog's record counts per size (``records``)."""
    p = argparse.ArgumentParser(
        prog="python -m scripts.bench.against_mm2",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="one repetition, small backlogs, two rates")
    p.add_argument("--base-port", type=int, default=49192, help="broker port of A; B gets base+10")
    p.add_argument("--state", type=Path, help="clusters and copiers' state (default: a temp dir, removed)")
    p.add_argument(
        "--copiers",
        default=",".join(DEFAULT_COPIERS),
        help=f"comma-separated subset of {','.join(COPIERS)} (default {','.join(DEFAULT_COPIERS)})",
    )
    p.add_argument("--sizes", help="comma-separated record sizes (default 100,1000,100000)")
    p.add_argument(
        "--records",
        type=int,
        help="records of every backlog size (default 300,000 of 100 B, 100,000 of 1 KB, 2,000 of 100 KB, "
        "100 MB of others; quick 0.3x)",
    )
    p.add_argument("--repetitions", type=int, help="backlog repetitions (default 2, quick 1)")
    p.add_argument("--rates", help="comma-separated steady rates (default 2000,5000,10000,20000; quick 2000,5000)")
    p.add_argument(
        "--steady-sizes",
        default="1000",
        help="comma-separated steady record sizes, each through every rate, in one copier process (default 1000)",
    )
    p.add_argument(
        "--latency-at",
        choices=[str(a) for a in LatencyAt],
        help="steady latency ends at B's append time (append) or at a read_committed consumer of B (consumer); "
        "default: consumer if drkit-eos is among the copiers, else append",
    )
    p.add_argument("--step-seconds", type=float, help="seconds per steady rate (default 20, quick 10)")
    p.add_argument("--warmup-seconds", type=float, default=30.0, help="unmeasured load at the first rate (default 30)")
    p.add_argument("--no-steady", action="store_true", help="skip the steady-state part")
    p.add_argument("--no-backlog", action="store_true", help="skip the backlog part")
    p.add_argument("--spark-workers", type=int, default=2, help="drkit-cluster: workers of the Spark cluster")
    p.add_argument(
        "--spark-base-port", type=int, default=49592, help="drkit-cluster: Spark master port; worker i gets +10*i"
    )
    p.add_argument("--worker-cores", type=int, default=1, help="drkit-cluster: cores each worker offers")
    p.add_argument("--worker-memory", default="1g", help="drkit-cluster: memory each worker offers")
    p.add_argument("--executor-memory", default="512m", help="drkit-cluster: spark.executor.memory")
    p.add_argument("--compression", default="lz4")
    p.add_argument(
        "--drkit-mirror",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [flows.mirror] setting for drkit (a TOML value), e.g. driver_copy_max_records=0; repeatable",
    )
    p.add_argument(
        "--drkit-topology",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [flows.topology] setting for drkit (a TOML value), e.g. refresh_interval_seconds=0; repeatable",
    )
    p.add_argument("--timeout", type=float, default=300.0, help="give up on one copy after this long")
    p.add_argument("--markdown", type=Path, help="also write the Markdown table here")
    args = p.parse_args(argv)
    args.sizes = parse_sizes(p, "--sizes", args.sizes or "100,1000,100000")
    args.repetitions = args.repetitions or (1 if args.quick else 2)
    args.rates = [int(x) for x in (args.rates or ("2000,5000" if args.quick else "2000,5000,10000,20000")).split(",")]
    args.step_seconds = args.step_seconds or (10.0 if args.quick else 20.0)
    args.steady_sizes = parse_sizes(p, "--steady-sizes", args.steady_sizes)
    copiers = [c for c in args.copiers.split(",") if c]
    unknown = sorted(set(copiers) - set(COPIERS))
    if unknown:
        p.error(f"unknown copier(s) {', '.join(unknown)}; known: {', '.join(COPIERS)}")
    if args.records is not None and args.records < 1:
        p.error(f"--records wants a positive count, got {args.records}")
    args.copiers = copiers
    args.latency_at = LatencyAt(args.latency_at) if args.latency_at else default_latency_at(copiers)
    scale = 0.3 if args.quick else 1.0
    counts = {100: int(300_000 * scale), 1000: int(100_000 * scale), 100_000: int(2_000 * scale)}
    args.records = {str(k): args.records or counts.get(k, int(100_000_000 * scale / k)) for k in args.sizes}
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    copiers: list[str] = args.copiers

    tmp = None
    if args.state is None:
        tmp = tempfile.TemporaryDirectory(prefix="drkit-bench-")
        args.state = Path(tmp.name)
    kafka = local_kafka(args.state / "kafka", args.base_port, "512m")
    spark = None
    if "drkit-cluster" in copiers:
        from drkit.localdev.spark_cluster import LocalSpark

        spark = LocalSpark(args.state / "spark", args.spark_base_port, args.worker_cores, args.worker_memory)
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "quick": args.quick,
        "repetitions": args.repetitions,
        "sizes": args.sizes,
        "rates": args.rates,
        "compression": args.compression,
        "copiers": copiers,
        "steady_sizes": args.steady_sizes,
        "latency_at": str(args.latency_at),
        "backlog_measured_at": {c: str(backlog_at(c)) for c in copiers},
        "backlog_skipped": args.no_backlog,
        "drkit_mirror": drkit_mirror_settings(args.drkit_mirror),
        "records": args.records,
        "load_start": load(),
        "backlog": [],
        "steady": [],
    }
    try:
        log(f"starting clusters A, B on {args.base_port}/{args.base_port + 10}")
        a, b = start_pair(kafka)
        watcher = Consumer({"bootstrap.servers": b, "group.id": "bench-watch", "enable.auto.commit": False})
        work = args.state / "runs"
        if spark is not None:
            log(f"starting the Spark standalone cluster: {args.spark_workers} worker(s) on {args.spark_base_port}")
            status = spark.up(args.spark_workers)
            args.spark_section = spark_section(spark, args.executor_memory)
            args.worker_pids = [d.pid for d in status.daemons if d.name != "master" and d.pid is not None]
            results["spark_cluster"] = {
                "master": spark.master_url(),
                "workers": args.spark_workers,
                "alive_workers": status.alive_workers,
                "worker_cores": args.worker_cores,
                "cores": args.spark_workers * args.worker_cores,
                "worker_memory": args.worker_memory,
                "executor_memory": args.executor_memory,
            }
        for rep in range(args.repetitions if not args.no_backlog else 0):
            order = copiers if rep % 2 == 0 else list(reversed(copiers))
            for size in args.sizes:
                for copier in order:
                    n = results["records"][str(size)]
                    log(f"backlog rep {rep}: {copier}, {n} x {size} B (load {load()})")
                    r = backlog(copier, size, n, a, b, work, args, watcher)
                    r["rep"] = rep
                    log(f"  -> {json.dumps({k: v for k, v in r.items() if k != 'phases'})}")
                    results["backlog"].append(r)
        if not args.no_steady:
            for copier in copiers:
                log(f"steady: {copier} (load {load()})")
                results["steady"].append(steady(copier, a, b, work, args, watcher))
        watcher.close()
    finally:
        for running in LIVE:
            if running.proc.poll() is None:
                with contextlib.suppress(Exception):
                    running.stop(30)
        results["load_end"] = load()
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.down()
        with contextlib.suppress(Exception):
            kafka.down()
        if tmp is not None:
            tmp.cleanup()
    finish_report(results, summarize, markdown, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
