"""Mirror benchmark: drkit, Apache Kafka's MirrorMaker 2 and a plain client loop on the same two clusters.

Usage::

    .venv/bin/python -m scripts.bench.against_mm2 --quick   # a few minutes: one repetition, small backlogs
    .venv/bin/python -m scripts.bench.against_mm2           # the full suite (~20-30 min on 2 cores)

Prints one JSON document to stdout and a Markdown table to stderr (and to ``--markdown FILE``).

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
  within 5 s of the step's end and p99 < 2 s; the highest sustained rate is reported, and higher rates are
  skipped after the first that is not.
* **Memory.** Peak RSS of the copier's whole process tree (drkit: Python driver, Spark JVM, Python
  workers; MM2: its JVM; plain: one Python process), sampled every 0.5 s.
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
from scripts.bench.lib.output import finish_report, logger
from scripts.bench.lib.producers import Pacer, produce_backlog
from scripts.bench.lib.stats import index_rank, median
from scripts.bench.lib.watch import append_span, ends, latencies, total, wait_for

PARTITIONS = 12
COPIERS = ("drkit", "mm2", "plain")

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
    if copier == "drkit":
        running = start_drkit(
            workdir,
            a,
            b,
            topic,
            drkit_mirror_settings(args.drkit_mirror),
            drkit_mirror_settings(getattr(args, "drkit_topology", []), "--drkit-topology"),
        )
    elif copier == "mm2":
        running = start_mm2(workdir, a, b, topic, args.compression)
    else:
        running = start_plain(workdir, a, b, topic, target_topic, args.compression, records)
    LIVE.append(running)
    return running


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
    done = wait_for(watcher, target_topic, PARTITIONS, records, args.timeout, running)
    load_after = load()
    stopped = running.stop()
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
    if copier == "drkit":
        result["phases"] = drkit_phases(running.log)
    return result


def steady(copier: str, a: str, b: str, work: Path, args: argparse.Namespace, watcher: Consumer) -> dict[str, Any]:
    topic = f"ss-{copier}-{uuid.uuid4().hex[:6]}"
    target_topic = create_pair(a, b, topic, PARTITIONS)
    began_wall = time.time()
    load_before = load()
    running = start(copier, work / topic, a, b, topic, target_topic, args)
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
    if copier == "drkit":
        result["phases"] = drkit_phases(running.log)
    return result


# -- report -----------------------------------------------------------------------------------------------


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"backlog": {}, "steady": {}, "memory_mb": {}}
    for size in results["sizes"]:
        row: dict[str, Any] = {}
        for copier in COPIERS:
            runs = [r for r in results["backlog"] if r["copier"] == copier and r["size"] == size and "error" not in r]
            row[copier] = {
                "records_per_s": median([r["records_per_s"] for r in runs]),
                "mb_per_s": median([r["mb_per_s"] for r in runs]),
                "startup_seconds": median([r["startup_seconds"] for r in runs]),
                "stop_seconds": median([r["stop_seconds"] for r in runs]),
                "load": median([r["load_before"] for r in runs]),
            }
        ratios: dict[str, list[float]] = {"drkit/mm2": [], "drkit/plain": []}
        for rep in range(results["repetitions"]):
            by = {
                r["copier"]: r
                for r in results["backlog"]
                if r["size"] == size and r.get("rep") == rep and "error" not in r
            }
            if "drkit" in by and "mm2" in by:
                ratios["drkit/mm2"].append(by["drkit"]["records_per_s"] / by["mm2"]["records_per_s"])
            if "drkit" in by and "plain" in by:
                ratios["drkit/plain"].append(by["drkit"]["records_per_s"] / by["plain"]["records_per_s"])
        row["ratios"] = {k: median(v) for k, v in ratios.items()}
        out["backlog"][str(size)] = row
    for r in results["steady"]:
        out["steady"][r["copier"]] = {
            "startup_to_first_record_seconds": r.get("startup_to_first_record_seconds"),
            "highest_sustained_rate": r.get("highest_sustained_rate"),
            "steps": {s["rate"]: (s["p50_ms"], s["p99_ms"], s["sustained"]) for s in r["steps"]},
        }
    for copier in COPIERS:
        peaks = [r.get("peak_rss_mb", 0) for r in results["backlog"] + results["steady"] if r["copier"] == copier]
        out["memory_mb"][copier] = max(peaks) if peaks else None
    return out


def markdown(results: dict[str, Any]) -> str:
    s = results["summary"]
    lines = [
        f"Run {results['started']} ({'quick' if results['quick'] else 'full'}), {results['repetitions']} "
        f"repetition(s), {os.cpu_count()} cores, compression {results['compression']}; "
        f"1-min load average {results['load_start']} at start, {results['load_end']} at end.",
        "",
        "| backlog copy (12 partitions) | drkit | MirrorMaker 2 | plain loop | drkit / MM2 | drkit / plain |",
        "|---|---|---|---|---|---|",
    ]
    for size, row in s["backlog"].items():
        label = {100: "100 B", 1000: "1 KB", 100_000: "100 KB"}.get(int(size), f"{size} B")
        cells = [
            f"{row[c]['records_per_s']:,.0f} rec/s, {row[c]['mb_per_s']} MB/s (load {row[c]['load']})"
            if row[c]["records_per_s"]
            else "failed"
            for c in COPIERS
        ]
        ratios = [f"{v:.2f}x" if v else "-" for v in row["ratios"].values()]
        n = results["records"][str(size)]
        lines.append(f"| {label} x {n:,} | {' | '.join(cells)} | {' | '.join(ratios)} |")
    ref = s["backlog"].get("1000") or next(iter(s["backlog"].values()), None)
    if ref is not None:
        lines.append(
            "| start-up to first record (backlog) | "
            + " | ".join(f"{ref[c]['startup_seconds']} s" for c in COPIERS)
            + " | | |"
        )
        lines.append(
            "| stop (SIGINT; MM2 SIGTERM) | " + " | ".join(f"{ref[c]['stop_seconds']} s" for c in COPIERS) + " | | |"
        )
    lines += ["", "| steady state, 1 KB records | drkit | MirrorMaker 2 | plain loop |", "|---|---|---|---|"]
    lines.append(
        "| start-up to first record (idle) | "
        + " | ".join(f"{s['steady'].get(c, {}).get('startup_to_first_record_seconds')} s" for c in COPIERS)
        + " |"
    )
    for rate in results["rates"]:
        cells = []
        for c in COPIERS:
            step = s["steady"].get(c, {}).get("steps", {}).get(rate)
            cells.append("-" if step is None else f"{step[0]} / {step[1]} ms{'' if step[2] else ' (not sustained)'}")
        lines.append(f"| {rate:,}/s: latency p50 / p99 | {' | '.join(cells)} |")
    lines.append(
        "| highest sustained rate (p99 < 2 s) | "
        + " | ".join(f"{s['steady'].get(c, {}).get('highest_sustained_rate') or 0:,}/s" for c in COPIERS)
        + " |"
    )
    lines.append(
        "| peak RSS of the process tree | "
        + " | ".join(f"{s['memory_mb'][c]:,.0f} MB" if s["memory_mb"][c] else "-" for c in COPIERS)
        + " |"
    )
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
    p.add_argument("--copiers", default=",".join(COPIERS), help="comma-separated subset of drkit,mm2,plain")
    p.add_argument("--sizes", help="comma-separated record sizes (default 100,1000,100000)")
    p.add_argument("--repetitions", type=int, help="backlog repetitions (default 2, quick 1)")
    p.add_argument("--rates", help="comma-separated steady rates (default 2000,5000,10000,20000; quick 2000,5000)")
    p.add_argument("--step-seconds", type=float, help="seconds per steady rate (default 20, quick 10)")
    p.add_argument("--warmup-seconds", type=float, default=30.0, help="unmeasured load at the first rate (default 30)")
    p.add_argument("--no-steady", action="store_true", help="skip the steady-state part")
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
    scale = 0.3 if args.quick else 1.0
    records = {100: int(300_000 * scale), 1000: int(100_000 * scale), 100_000: int(2_000 * scale)}

    tmp = None
    if args.state is None:
        tmp = tempfile.TemporaryDirectory(prefix="drkit-bench-")
        args.state = Path(tmp.name)
    kafka = local_kafka(args.state / "kafka", args.base_port, "512m")
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "quick": args.quick,
        "repetitions": args.repetitions,
        "sizes": args.sizes,
        "rates": args.rates,
        "compression": args.compression,
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
        for rep in range(args.repetitions):
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
        with contextlib.suppress(Exception):
            kafka.down()
        if tmp is not None:
            tmp.cleanup()
    finish_report(results, summarize, markdown, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
