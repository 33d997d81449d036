"""Exactly-once against at-least-once: the backlog copy rate and the end-to-end latency, as a read_committed
consumer of the target sees them.

Usage::

    .venv/bin/python -m scripts.bench.exactly_once                 # ~10 min on 2 cores
    .venv/bin/python -m scripts.bench.exactly_once --records 50000 --step-seconds 10 --repetitions 1

Prints one JSON document to stdout and a Markdown table to stderr (and to ``--markdown FILE``).

Modes (drkit's ``[flows.mirror]``): ``at_least_once`` (the default: the continuous copy),
``at_least_once_per_batch`` (``continuous_copy = false``: each batch copies its own records), ``exactly_once``
(with the local master: the continuous copier's transactions, committed as records flow) and
``exactly_once_per_batch`` (``continuous_copy = false``: each batch's copy in its own transactions). On two
local KRaft clusters (drkit.localdev.clusters.LocalKafka), all traffic on 127.0.0.1:

* **Backlog.** ``--records`` records of ``--size`` bytes are produced to a fresh 12-partition topic before the
  mirror starts. A ``read_committed`` consumer of the target reads it from the start; the copy rate is the
  records over the time from the first copy's append on the target (its LogAppendTime) to when the consumer
  received the last record: start-up is not in it, and a record counts only once a read_committed consumer
  can see it (an exactly-once batch's records all become visible at its commit). It also counts, by the
  sequence number each value starts with, the records missing and received twice.
* **Steady state.** A fresh topic, a mirror started and caught up, ``--warmup-seconds`` of unmeasured load,
  then ``--rate`` records/s of 1 KB for ``--step-seconds``, each value holding its send time. Latency = when the
  ``read_committed`` consumer received a record minus its send time: what a consumer of the target waits,
  transactions included (the append time on the target would count a record before its transaction commits).
* **Load.** The 1-minute load average before and after every measurement; the modes alternate, their order
  reversed on every repetition, so each ratio comes from one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from scripts.bench.lib.clusters import create_pair, local_kafka, start_pair
from scripts.bench.lib.copiers import Running, start_drkit
from scripts.bench.lib.machine import load1 as load
from scripts.bench.lib.output import finish_report, logger
from scripts.bench.lib.producers import Pacer, produce_backlog
from scripts.bench.lib.reader import Reader, latencies_ms
from scripts.bench.lib.stats import index_rank

PARTITIONS = 12

log = logger("bench")

MODES: dict[str, dict[str, Any]] = {
    "at_least_once": {},
    "at_least_once_per_batch": {"continuous_copy": False},
    "exactly_once": {"delivery": "exactly_once"},
    "exactly_once_per_batch": {"delivery": "exactly_once", "continuous_copy": False},
}


def mirror(mode: str, work: Path, a: str, b: str, topic: str) -> Running:
    return start_drkit(work, a, b, topic, dict(MODES[mode]))


def backlog(mode: str, records: int, size: int, a: str, b: str, work: Path, timeout: float) -> dict[str, Any]:
    topic = f"eos-bl-{mode}-{uuid.uuid4().hex[:6]}"
    target = create_pair(a, b, topic, PARTITIONS)
    produce_backlog(a, topic, records, size, PARTITIONS)
    reader = Reader(b, target, PARTITIONS)
    reader.start()
    load_before = load()
    running = mirror(mode, work / topic, a, b, topic)
    deadline = time.monotonic() + timeout
    while reader.seen() < records and time.monotonic() < deadline and running.proc.poll() is None:
        time.sleep(0.2)
    time.sleep(2.0)  # anything arriving late (a duplicate) is counted too
    reader.stop.set()
    reader.join(30)
    load_after = load()
    running.stop()
    seqs = [s for s, _, _ in reader.arrived]
    distinct = set(seqs)
    result: dict[str, Any] = {
        "mode": mode,
        "records": records,
        "size": size,
        "load_before": load_before,
        "load_after": load_after,
        "received": len(seqs),
        "missing": records - len(distinct & set(range(records))),
        "duplicated": len(seqs) - len(distinct),
    }
    if len(distinct) < records:
        result["error"] = f"{len(distinct)} of {records} received within {timeout:g}s"
        return result
    first_append = min(a for _, _, a in reader.arrived)
    last_seen = max(w for _, w, _ in reader.arrived)
    span = max(last_seen - first_append, 0.001)
    result.update({"copy_seconds": round(span, 3), "records_per_s": round(records / span)})
    return result


def steady(mode: str, rate: int, seconds: float, warmup: float, a: str, b: str, work: Path) -> dict[str, Any]:
    topic = f"eos-st-{mode}-{uuid.uuid4().hex[:6]}"
    target = create_pair(a, b, topic, PARTITIONS)
    reader = Reader(b, target, PARTITIONS)
    reader.start()
    running = mirror(mode, work / topic, a, b, topic)
    try:
        deadline = time.monotonic() + 180
        while reader.seen() == 0 and time.monotonic() < deadline:  # a trickle until the mirror copies
            Pacer(a, topic, 50, 0.5, PARTITIONS).run()
        warm = Pacer(a, topic, rate, warmup, PARTITIONS)
        warm.run()
        time.sleep(3.0)
        skip = reader.seen()
        load_before = load()
        pacer = Pacer(a, topic, rate, seconds, PARTITIONS)
        pacer.run()
        deadline = time.monotonic() + 30
        while reader.seen() - skip < pacer.sent and time.monotonic() < deadline:
            time.sleep(0.2)
        load_after = load()
    finally:
        reader.stop.set()
        reader.join(30)
        running.stop()
    lat = latencies_ms(reader.arrived[skip:])
    return {
        "mode": mode,
        "rate": rate,
        "seconds": seconds,
        "sent": pacer.sent,
        "received": len(lat),
        "load_before": load_before,
        "load_after": load_after,
        "p50_ms": index_rank(lat, 0.50),
        "p99_ms": index_rank(lat, 0.99),
        "max_ms": round(max(lat), 1) if lat else None,
    }


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in results["modes"]:
        rates = [r["records_per_s"] for r in results["backlog"] if r["mode"] == mode and "records_per_s" in r]
        st = [r for r in results["steady"] if r["mode"] == mode]
        out[mode] = {
            "backlog_records_per_s_median": round(statistics.median(rates)) if rates else None,
            "p50_ms": st[0]["p50_ms"] if st else None,
            "p99_ms": st[0]["p99_ms"] if st else None,
        }
    base = out.get("at_least_once", {}).get("backlog_records_per_s_median")
    per_batch = out.get("at_least_once_per_batch", {}).get("backlog_records_per_s_median")
    eos = out.get("exactly_once", {}).get("backlog_records_per_s_median")
    ratios: dict[str, Any] = {}
    for rep in sorted({r["rep"] for r in results["backlog"]}):
        by = {r["mode"]: r.get("records_per_s") for r in results["backlog"] if r["rep"] == rep}
        if by.get("exactly_once") and by.get("at_least_once"):
            ratios[f"rep{rep}_eos_vs_alo"] = round(by["exactly_once"] / by["at_least_once"], 2)
        if by.get("exactly_once") and by.get("at_least_once_per_batch"):
            ratios[f"rep{rep}_eos_vs_alo_per_batch"] = round(by["exactly_once"] / by["at_least_once_per_batch"], 2)
    out["ratios_within_one_run"] = ratios
    if base and eos:
        out["eos_vs_alo_median"] = round(eos / base, 2)
    if per_batch and eos:
        out["eos_vs_alo_per_batch_median"] = round(eos / per_batch, 2)
    return out


def markdown(results: dict[str, Any]) -> str:
    lines = ["| mode | backlog rec/s (median) | p50 ms | p99 ms |", "| --- | --- | --- | --- |"]
    for mode, s in results["summary"].items():
        if mode in MODES:
            lines.append(f"| {mode} | {s['backlog_records_per_s_median']} | {s['p50_ms']} | {s['p99_ms']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.exactly_once", description=__doc__.split("\n\n")[0])
    p.add_argument("--base-port", type=int, default=24292, help="broker port of A; B gets base+10")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--size", type=int, default=1000)
    p.add_argument("--repetitions", type=int, default=2)
    p.add_argument("--rate", type=int, default=5000)
    p.add_argument("--step-seconds", type=float, default=20.0)
    p.add_argument("--warmup-seconds", type=float, default=10.0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--no-steady", action="store_true")
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise SystemExit(f"unknown mode {unknown[0]!r}: choose from {', '.join(MODES)}")
    tmp = tempfile.TemporaryDirectory(prefix="drkit-bench-eos-")
    state = Path(tmp.name)
    kafka = local_kafka(state / "kafka", args.base_port, "512m")
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "modes": modes,
        "records": args.records,
        "size": args.size,
        "rate": args.rate,
        "step_seconds": args.step_seconds,
        "load_start": load(),
        "backlog": [],
        "steady": [],
    }
    try:
        a, b = start_pair(kafka)
        for rep in range(args.repetitions):
            for mode in modes if rep % 2 == 0 else list(reversed(modes)):
                log(f"backlog rep {rep}: {mode} (load {load()})")
                r = backlog(mode, args.records, args.size, a, b, state / "runs", args.timeout)
                r["rep"] = rep
                log(f"  -> {json.dumps(r)}")
                results["backlog"].append(r)
        if not args.no_steady:
            for mode in modes:
                log(f"steady: {mode} at {args.rate}/s (load {load()})")
                r = steady(mode, args.rate, args.step_seconds, args.warmup_seconds, a, b, state / "runs")
                log(f"  -> {json.dumps(r)}")
                results["steady"].append(r)
    finally:
        results["load_end"] = load()
        with contextlib.suppress(Exception):
            kafka.down()
        tmp.cleanup()
    finish_report(results, summarize, markdown, args.markdown)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
