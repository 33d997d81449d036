"""Mirror benchmark: drkit, Apache Kafka's MirrorMaker 2 and a plain client loop on the same two clusters.

Usage::

    .venv/bin/python -m scripts.bench.against_mm2 --quick   # a few minutes: one repetition, small backlogs
    .venv/bin/python -m scripts.bench.against_mm2           # the full suite (~20-30 min on 2 cores)

    # drkit also on a local Spark standalone cluster (2 workers x 1 core), steady state only:
    .venv/bin/python -m scripts.bench.against_mm2 --copiers drkit,drkit-cluster,mm2 --no-backlog

Prints one JSON document to stdout and a Markdown table to stderr (and to ``--markdown FILE``).

The copiers (``--copiers``, default ``drkit,mm2,plain``): ``drkit`` is ``drkit mirror`` with its default
``[spark] master = "local[2]"`` (the driver copies continuously); ``drkit-cluster`` is the same command and
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
  rate = N / (last append - first append) on B, so start-up is not in it. The copier is then stopped
  with SIGINT (SIGTERM for MM2) and the stop time is reported.
* **Steady state.** One copier process tails a fresh topic, started while a trickle is produced (start-up
  to the first mirrored record with an idle copier). A warm-up follows, not measured: the first rate for
  ``--warmup-seconds`` (a long-running copier's first seconds of load, JIT and connections, are not its
  steady state), until the copier caught up. Then for each rate (records/s of 1 KB) the load is
  produced for ``--step-seconds``; every record carries its send time; end-to-end latency = B's append
  time minus send time, over all records of the step. A rate is *sustained* when the copier caught up
  within 30 s of the step's end and p99 < 2 s; the highest sustained rate is reported, and higher rates are
  skipped after the first that is not. ``--no-steady`` skips this part, ``--no-backlog`` the backlog copy.
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
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from scripts.bench.lib.clusters import create_pair, local_kafka, start_pair
from scripts.bench.lib.copiers import Running, start_drkit, start_mm2, start_plain
from scripts.bench.lib.drkit_child import drkit_phases
from scripts.bench.lib.machine import load1
from scripts.bench.lib.memory import TreeMemory
from scripts.bench.lib.output import finish_report, logger
from scripts.bench.lib.producers import Pacer, produce_backlog
from scripts.bench.lib.stats import index_rank, median
from scripts.bench.lib.watch import append_span, ends, latencies, total, wait_for

PARTITIONS = 12
#: Every copier ``--copiers`` accepts, in table order; the default runs the first comparison's three.
COPIERS = ("drkit", "drkit-cluster", "mm2", "plain")
DEFAULT_COPIERS = ("drkit", "mm2", "plain")
#: drkit's mirror: with its default ``local[2]`` master, and on the Spark standalone cluster (--spark-workers).
DRKIT = ("drkit", "drkit-cluster")
LABELS = {"drkit": "drkit", "drkit-cluster": "drkit, Spark cluster", "mm2": "MirrorMaker 2", "plain": "plain loop"}
#: Ratios formed per repetition when both copiers ran (numerator, denominator).
RATIOS = (("drkit", "mm2"), ("drkit", "plain"), ("drkit-cluster", "drkit"), ("drkit-cluster", "mm2"))

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
        running = start_drkit(
            workdir,
            a,
            b,
            topic,
            drkit_mirror_settings(args.drkit_mirror),
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
    topic = f"bl-{copier}-{size}-{uuid.uuid4().hex[:6]}"
    target_topic = create_pair(a, b, topic, PARTITIONS)
    produce_backlog(a, topic, records, size, PARTITIONS)
    load_before = load()
    began_wall = time.time()
    running = start(copier, work / topic, a, b, topic, target_topic, args, records)
    workers = worker_memory(copier, args)
    done = wait_for(watcher, target_topic, PARTITIONS, records, args.timeout, running)
    load_after = load()
    stopped = {**running.stop(), **worker_peaks(workers)}
    result: dict[str, Any] = {
        "copier": copier,
        "size": size,
        "records": records,
        "load_before": load_before,
        "load_after": load_after,
        **stopped,
    }
    if done is None:
        copied = total(watcher, target_topic, PARTITIONS)
        result["error"] = f"not copied within {args.timeout:g}s ({copied} of {records})"
        return result
    first, last = append_span(b, target_topic, PARTITIONS)
    span = max((last - first) / 1000, 0.001)
    result.update(
        {
            "startup_seconds": round(first / 1000 - began_wall, 2),
            "copy_seconds": round(span, 3),
            "records_per_s": round(records / span),
            "mb_per_s": round(records * size / span / 1e6, 2),
            "on_target": total(watcher, target_topic, PARTITIONS),
        }
    )
    if copier in DRKIT:
        result["phases"] = drkit_phases(running.log)
    return result


def steady(copier: str, a: str, b: str, work: Path, args: argparse.Namespace, watcher: Consumer) -> dict[str, Any]:
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
    if args.warmup_seconds > 0 and args.rates:
        before = total(watcher, target_topic, PARTITIONS)
        warmup = Pacer(a, topic, args.rates[0], args.warmup_seconds, PARTITIONS)
        warmup.start()
        warmup.join()
        caught_up = wait_for(watcher, target_topic, PARTITIONS, before + warmup.sent, 60, running)
        result["warmup_caught_up"] = caught_up is not None
    sustained = 0
    for rate in args.rates:
        since = {p: hi for p, (_, hi) in ends(watcher, target_topic, PARTITIONS).items()}
        before = total(watcher, target_topic, PARTITIONS)
        step_load = load()
        pacer = Pacer(a, topic, rate, args.step_seconds, PARTITIONS)
        pacer.start()
        pacer.join()
        caught = wait_for(watcher, target_topic, PARTITIONS, before + pacer.sent, 30, running)
        until = {p: hi for p, (_, hi) in ends(watcher, target_topic, PARTITIONS).items()}
        lat = latencies(b, target_topic, since, until)
        p99 = index_rank(lat, 0.99)
        ok = caught is not None and p99 is not None and p99 < 2000 and len(lat) >= pacer.sent * 0.99
        step = {
            "rate": rate,
            "achieved_rate": round(pacer.sent / max(pacer.elapsed, 0.001)),
            "records": pacer.sent,
            "measured": len(lat),
            "p50_ms": index_rank(lat, 0.5),
            "p99_ms": p99,
            "max_ms": index_rank(lat, 1.0),
            "caught_up": caught is not None,
            "sustained": ok,
            "load_before": step_load,
            "load_after": load(),
        }
        result["steps"].append(step)
        log(f"{copier} {rate}/s: p50 {step['p50_ms']} ms, p99 {p99} ms, sustained {ok} (load {step_load})")
        if not ok:
            break
        sustained = rate
    result["highest_sustained_rate"] = sustained
    result.update(running.stop())
    result.update(worker_peaks(workers))
    if copier in DRKIT:
        result["phases"] = drkit_phases(running.log)
    return result


# -- report -----------------------------------------------------------------------------------------------


def run_copiers(results: dict[str, Any]) -> list[str]:
    """The copiers of this run, in table order (reports before ``copiers`` was recorded: the default three)."""
    ran = results.get("copiers") or DEFAULT_COPIERS
    return [c for c in COPIERS if c in ran]


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    copiers = run_copiers(results)
    out: dict[str, Any] = {"backlog": {}, "steady": {}, "memory_mb": {}}
    for size in results["sizes"] if results["backlog"] else []:
        row: dict[str, Any] = {}
        for copier in copiers:
            runs = [r for r in results["backlog"] if r["copier"] == copier and r["size"] == size and "error" not in r]
            row[copier] = {
                "records_per_s": median([r["records_per_s"] for r in runs]),
                "mb_per_s": median([r["mb_per_s"] for r in runs]),
                "startup_seconds": median([r["startup_seconds"] for r in runs]),
                "stop_seconds": median([r["stop_seconds"] for r in runs]),
                "load": median([r["load_before"] for r in runs]),
            }
        ratios: dict[str, list[float]] = {f"{n}/{d}": [] for n, d in RATIOS if n in copiers and d in copiers}
        for rep in range(results["repetitions"]):
            by = {
                r["copier"]: r
                for r in results["backlog"]
                if r["size"] == size and r.get("rep") == rep and "error" not in r
            }
            for n, d in RATIOS:
                if n in by and d in by:
                    ratios[f"{n}/{d}"].append(by[n]["records_per_s"] / by[d]["records_per_s"])
        row["ratios"] = {k: median(v) for k, v in ratios.items()}
        out["backlog"][str(size)] = row
    for r in results["steady"]:
        out["steady"][r["copier"]] = {
            "startup_to_first_record_seconds": r.get("startup_to_first_record_seconds"),
            "highest_sustained_rate": r.get("highest_sustained_rate"),
            "steps": {s["rate"]: (s["p50_ms"], s["p99_ms"], s["sustained"]) for s in r["steps"]},
        }
    for copier in copiers:
        peaks = [r.get("peak_rss_mb", 0) for r in results["backlog"] + results["steady"] if r["copier"] == copier]
        out["memory_mb"][copier] = max(peaks) if peaks else None
    workers = [
        sum(r["workers_peak_rss_mb"])
        for r in results["backlog"] + results["steady"]
        if r["copier"] == "drkit-cluster" and r.get("workers_peak_rss_mb")
    ]
    if workers:
        out["spark_workers_memory_mb"] = max(workers)
    return out


def row_line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown(results: dict[str, Any]) -> str:
    s = results["summary"]
    copiers = run_copiers(results)
    labels = [LABELS[c] for c in copiers]
    cluster = results.get("spark_cluster")
    reps = f"{results['repetitions']} repetition(s)"
    parts = "steady state only (--no-backlog)" if results.get("backlog_skipped") else reps
    lines = [
        f"Run {results['started']} ({'quick' if results['quick'] else 'full'}), {parts}, "
        f"{os.cpu_count()} cores, compression {results['compression']}; "
        f"1-min load average {results['load_start']} at start, {results['load_end']} at end."
    ]
    if cluster:
        lines.append(
            f"drkit, Spark cluster: a local standalone cluster of {cluster['workers']} worker(s) x "
            f"{cluster['worker_cores']} core(s), executors of {cluster['executor_memory']}, on the same machine."
        )
    if s["backlog"]:
        ratio_names = list(next(iter(s["backlog"].values()))["ratios"])
        lines += [
            "",
            row_line(["backlog copy (12 partitions)", *labels, *ratio_names]),
            "|---|" + "---|" * (len(copiers) + len(ratio_names)),
        ]
        blank = [""] * len(ratio_names)
        for size, row in s["backlog"].items():
            label = {100: "100 B", 1000: "1 KB", 100_000: "100 KB"}.get(int(size), f"{size} B")
            cells = [
                f"{row[c]['records_per_s']:,.0f} rec/s, {row[c]['mb_per_s']} MB/s (load {row[c]['load']})"
                if row[c]["records_per_s"]
                else "failed"
                for c in copiers
            ]
            ratios = [f"{v:.2f}x" if v else "-" for v in row["ratios"].values()]
            n = results["records"][str(size)]
            lines.append(row_line([f"{label} x {n:,}", *cells, *ratios]))
        ref = s["backlog"].get("1000") or next(iter(s["backlog"].values()), None)
        if ref is not None:
            startup = [f"{ref[c]['startup_seconds']} s" for c in copiers]
            stop = [f"{ref[c]['stop_seconds']} s" for c in copiers]
            lines.append(row_line(["start-up to first record (backlog)", *startup, *blank]))
            lines.append(row_line(["stop (SIGINT; MM2 SIGTERM)", *stop, *blank]))
    lines += ["", f"| steady state, 1 KB records | {' | '.join(labels)} |", "|---|" + "---|" * len(copiers)]
    lines.append(
        "| start-up to first record (idle) | "
        + " | ".join(f"{s['steady'].get(c, {}).get('startup_to_first_record_seconds')} s" for c in copiers)
        + " |"
    )
    for rate in results["rates"]:
        cells = []
        for c in copiers:
            step = s["steady"].get(c, {}).get("steps", {}).get(rate)
            cells.append("-" if step is None else f"{step[0]} / {step[1]} ms{'' if step[2] else ' (not sustained)'}")
        lines.append(f"| {rate:,}/s: latency p50 / p99 | {' | '.join(cells)} |")
    lines.append(
        "| highest sustained rate (p99 < 2 s) | "
        + " | ".join(f"{s['steady'].get(c, {}).get('highest_sustained_rate') or 0:,}/s" for c in copiers)
        + " |"
    )
    lines.append(
        "| peak RSS of the process tree | "
        + " | ".join(f"{s['memory_mb'][c]:,.0f} MB" if s["memory_mb"][c] else "-" for c in copiers)
        + " |"
    )
    if s.get("spark_workers_memory_mb"):
        lines += [
            "",
            f"drkit, Spark cluster: the tree above is the driver's; the Spark workers' trees (worker JVMs, "
            f"executors, their Python workers) peaked at {s['spark_workers_memory_mb']:,.0f} MB together.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
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
    p.add_argument("--repetitions", type=int, help="backlog repetitions (default 2, quick 1)")
    p.add_argument("--rates", help="comma-separated steady rates (default 2000,5000,10000,20000; quick 2000,5000)")
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
    args.sizes = [int(x) for x in (args.sizes or "100,1000,100000").split(",")]
    args.repetitions = args.repetitions or (1 if args.quick else 2)
    args.rates = [int(x) for x in (args.rates or ("2000,5000" if args.quick else "2000,5000,10000,20000")).split(",")]
    args.step_seconds = args.step_seconds or (10.0 if args.quick else 20.0)
    copiers = [c for c in args.copiers.split(",") if c]
    unknown = sorted(set(copiers) - set(COPIERS))
    if unknown:
        p.error(f"unknown copier(s) {', '.join(unknown)}; known: {', '.join(COPIERS)}")
    scale = 0.3 if args.quick else 1.0
    records = {100: int(300_000 * scale), 1000: int(100_000 * scale), 100_000: int(2_000 * scale)}

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
        "backlog_skipped": args.no_backlog,
        "drkit_mirror": drkit_mirror_settings(args.drkit_mirror),
        "records": {str(k): records.get(k, int(100_000_000 * scale / k)) for k in args.sizes},
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
