"""Where the continuous copy's milliseconds go: per-record stage times of drkit's copier, next to MirrorMaker 2.

Usage::

    .venv/bin/python -m scripts.bench.latency_stages --base-port 24192 > stages.json
    .venv/bin/python -m scripts.bench.latency_stages --step-seconds 20 --repetitions 2 --contenders drkit,mm2

Prints one JSON document to stdout (progress on stderr). On two local KRaft clusters A and B (see
lib/clusters.py, ``--base-port`` and +10) each contender (``drkit``: ``drkit mirror`` with its default
``local[2]`` master, the driver copying continuously; ``mm2``: MirrorMaker 2; both as against_mm2 starts
them, lz4, linger 5 ms, acks=all) tails a fresh 12-partition topic. Unlike against_mm2, the *source* topic
too is created with ``message.timestamp.type=LogAppendTime``, so each record's append time on A is known.
After a trickle (start-up) and ``--warmup-seconds`` at the first rate, for each value size (``--sizes``) and
rate (``--rates``) the paced load (each value starts with its send time) runs for ``--step-seconds``. Then
the step's records are read from A and from B and paired by position per partition (fresh topics, copied in
order; a pair whose send times differ is counted in ``unpaired`` and left out). Stages, per record, in ms:

* from outside, for every contender: ``send_to_source`` (the load producer's linger and A's append: the
  same for both), ``source_to_target`` (A's append to B's append: the copier's whole share) and
  ``send_to_target`` (what against_mm2 reports);
* inside drkit's copier (drkit.mirror.latency_probe, on through ``DRKIT_MIRROR_LATENCY_PROBE`` in the
  child's environment only): ``source_to_read`` (A's append until the ``consume()`` that returned the record
  returned: fetch, librdkafka's queue, the copying thread's time outside ``consume``), ``read_to_produce``
  (the lock, the lease check, the records before it in the same read), ``produce_to_target`` (linger,
  compression, the produce request, B's append), ``target_to_report`` (the response, until ``poll`` served
  the report), and over the copying thread's reads: ``outside_read`` (from one ``consume`` returning to the
  next call: the copy of a read's records and waits for the lock or the GIL) and ``read_call``.

Broker times are whole milliseconds, so a stage between a broker time and a wall-clock time is off by up
to 1 ms either way. Each stage gives p50 and p99 (index rank, as against_mm2). The contenders alternate (the
order reversed every repetition), and the 1-minute load average is recorded before and after each step.
``--drkit-mirror``, and the environment variables DRKIT_BENCH_SET, DRKIT_BENCH_SOURCE_CONSUMER and
DRKIT_BENCH_SWITCH_INTERVAL (lib/drkit_child.py), turn drkit's knobs. ``--knob-runs`` measures nothing: it
gathers against_mm2 steady runs, one per knob, with their drkit/mm2 ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import tempfile
import time
import uuid
from array import array
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from drkit.mirror.latency_probe import COPY_FIELDS, READ_FIELDS
from scripts.bench.against_mm2 import drkit_mirror_settings
from scripts.bench.lib.clusters import create_topic, local_kafka, start_pair, target_topic
from scripts.bench.lib.copiers import Running, start_drkit, start_mm2
from scripts.bench.lib.machine import git_facts, load1, load_averages, versions
from scripts.bench.lib.output import logger
from scripts.bench.lib.producers import SEQ_BYTES, Pacer
from scripts.bench.lib.stats import index_rank, median
from scripts.bench.lib.watch import ends, total, wait_for

PARTITIONS = 12
CONTENDERS = ("drkit", "mm2")
PROBE_ENV = "DRKIT_MIRROR_LATENCY_PROBE"
#: The drkit child's knobs without a drkit setting (lib/drkit_child.py), recorded with the run.
KNOB_ENV = ("DRKIT_BENCH_SET", "DRKIT_BENCH_SOURCE_CONSUMER", "DRKIT_BENCH_SWITCH_INTERVAL")
LOG_APPEND = {"message.timestamp.type": "LogAppendTime"}
#: Stages measured from outside (both contenders) and inside drkit's copier (the probe), in path order.
OUTSIDE = ("send_to_source", "source_to_target", "send_to_target")
INSIDE = ("source_to_read", "read_to_produce", "produce_to_target", "target_to_report", "source_to_target_probe")
READS = ("outside_read", "read_call")

log = logger("stages")
LIVE: list[Running] = []


def pct(values: list[float]) -> dict[str, float | None]:
    return {"p50_ms": index_rank(values, 0.5), "p99_ms": index_rank(values, 0.99), "max_ms": index_rank(values, 1.0)}


def read_range(bootstrap: str, topic: str, since: dict[int, int], until: dict[int, int]) -> dict[int, list[Any]]:
    """Per partition, (send time us, append time ms) of the records in [since, until), in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"stages-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
        }
    )
    out: dict[int, list[Any]] = {p: [] for p in since}
    try:
        consumer.assign([TopicPartition(topic, p, since[p]) for p in since if until[p] > since[p]])
        remaining = sum(until[p] - since[p] for p in since)
        deadline = time.monotonic() + 90
        while remaining > 0 and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() or msg.offset() >= until[msg.partition()]:
                    continue
                out[msg.partition()].append((int.from_bytes(msg.value()[:SEQ_BYTES], "big"), msg.timestamp()[1]))
                remaining -= 1
    finally:
        consumer.close()
    return out


def outside_stages(src: dict[int, list[Any]], dst: dict[int, list[Any]]) -> tuple[dict[str, list[float]], int]:
    """The outside stages of the records paired by position per partition; how many could not be paired."""
    stages: dict[str, list[float]] = {name: [] for name in OUTSIDE}
    unpaired = 0
    for p, records in src.items():
        copies = dst.get(p, [])
        unpaired += abs(len(records) - len(copies))
        for (sent, at_a), (sent_b, at_b) in zip(records, copies, strict=False):
            if sent != sent_b:
                unpaired += 1
                continue
            stages["send_to_source"].append(at_a - sent / 1000)
            stages["source_to_target"].append(at_b - at_a)
            stages["send_to_target"].append(at_b - sent / 1000)
    return stages, unpaired


def rows(path: Path, fields: int) -> list[tuple[float, ...]]:
    if not path.exists():
        return []
    data = array("d")
    raw = path.read_bytes()
    data.frombytes(raw[: len(raw) // (8 * fields) * 8 * fields])
    return [tuple(data[i : i + fields]) for i in range(0, len(data), fields)]


def probe_stages(
    probe: Path, since: dict[int, int], until: dict[int, int], window: tuple[float, float]
) -> dict[str, Any]:
    """The probe's stages of the copies at target offsets [since, until), and its reads within ``window``."""
    time.sleep(1.2)  # the probe writes every half second
    stages: dict[str, list[float]] = {name: [] for name in INSIDE}
    for p, src_ms, read_s, produce_s, report_s, offset, dst_ms in rows(probe, COPY_FIELDS):
        if not since[int(p)] <= offset < until[int(p)]:
            continue
        stages["source_to_read"].append(read_s * 1000 - src_ms)
        stages["read_to_produce"].append((produce_s - read_s) * 1000)
        stages["produce_to_target"].append(dst_ms - produce_s * 1000)
        stages["target_to_report"].append(report_s * 1000 - dst_ms)
        stages["source_to_target_probe"].append(dst_ms - src_ms)
    reads = [r for r in rows(Path(f"{probe}.reads"), READ_FIELDS) if window[0] <= r[0] <= window[1]]
    outside = [(b[0] - a[1]) * 1000 for a, b in itertools.pairwise(reads)]
    calls = [(r[1] - r[0]) * 1000 for r in reads]
    returned = [r[2] for r in reads if r[2] > 0]
    return {
        "copies": len(stages["source_to_read"]),
        "stages": {name: pct(values) for name, values in stages.items()},
        "reads": {
            "count": len(reads),
            "empty": sum(1 for r in reads if r[2] == 0),
            "records_per_read_p50": index_rank(returned, 0.5),
            "outside_read": pct(outside),
            "read_call": pct(calls),
        },
    }


def start(contender: str, workdir: Path, a: str, b: str, topic: str, args: argparse.Namespace) -> Running:
    if contender == "drkit":
        os.environ[PROBE_ENV] = str(workdir / "probe.bin")
        try:
            running = start_drkit(workdir, a, b, topic, drkit_mirror_settings(args.drkit_mirror))
        finally:
            os.environ.pop(PROBE_ENV, None)
    else:
        running = start_mm2(workdir, a, b, topic, args.compression)
    LIVE.append(running)
    return running


def run(
    contender: str, a: str, b: str, work: Path, args: argparse.Namespace, watcher: Consumer, source: Consumer
) -> dict[str, Any]:
    topic = f"ls-{contender}-{uuid.uuid4().hex[:6]}"
    copy = target_topic(topic)
    create_topic(a, topic, PARTITIONS, LOG_APPEND)
    create_topic(b, copy, PARTITIONS, LOG_APPEND)
    began = time.time()
    result: dict[str, Any] = {"contender": contender, "topic": topic, "load_before_start": load1(), "steps": []}
    running = start(contender, work / topic, a, b, topic, args)
    trickle = Pacer(a, topic, 20, args.timeout, PARTITIONS)
    trickle.start()
    first = wait_for(watcher, copy, PARTITIONS, 1, args.timeout, running)
    trickle.seconds = 0
    trickle.join()
    if first is None:
        result["error"] = "no record mirrored"
        result.update(running.stop())
        return result
    result["startup_seconds"] = round(time.time() - began, 1)
    wait_for(watcher, copy, PARTITIONS, trickle.sent, 60, running)
    if args.warmup_seconds > 0:
        before = total(watcher, copy, PARTITIONS)
        warm = Pacer(a, topic, args.rates[0], args.warmup_seconds, PARTITIONS)
        warm.start()
        warm.join()
        result["warmup_caught_up"] = wait_for(watcher, copy, PARTITIONS, before + warm.sent, 60, running) is not None
    for size in args.sizes:
        for rate in args.rates:
            src_since = {p: hi for p, (_, hi) in ends(source, topic, PARTITIONS).items()}
            dst_since = {p: hi for p, (_, hi) in ends(watcher, copy, PARTITIONS).items()}
            before = sum(dst_since.values())
            load_before, window_start = load1(), time.time()
            pacer = Pacer(a, topic, rate, args.step_seconds, PARTITIONS, size)
            pacer.start()
            pacer.join()
            caught = wait_for(watcher, copy, PARTITIONS, before + pacer.sent, 30, running)
            window = (window_start, time.time())
            src_until = {p: hi for p, (_, hi) in ends(source, topic, PARTITIONS).items()}
            dst_until = {p: hi for p, (_, hi) in ends(watcher, copy, PARTITIONS).items()}
            outside, unpaired = outside_stages(
                read_range(a, topic, src_since, src_until), read_range(b, copy, dst_since, dst_until)
            )
            step: dict[str, Any] = {
                "size": size,
                "rate": rate,
                "records": pacer.sent,
                "achieved_rate": round(pacer.sent / max(pacer.elapsed, 0.001)),
                "caught_up": caught is not None,
                "paired": len(outside["send_to_target"]),
                "unpaired": unpaired,
                "outside": {name: pct(values) for name, values in outside.items()},
                "load_before": load_before,
                "load_after": load1(),
            }
            if contender == "drkit":
                step["probe"] = probe_stages(work / topic / "probe.bin", dst_since, dst_until, window)
            result["steps"].append(step)
            o = step["outside"]["source_to_target"]
            log(f"{contender} {size} B {rate}/s: A->B p50 {o['p50_ms']} p99 {o['p99_ms']} ms (load {load_before})")
            if caught is None:
                break
    result.update(running.stop())
    return result


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Per size and rate: each contender's stage p50/p99, medians over the repetitions; the ratios
    drkit/mm2 of the outside stages, each from one repetition, then their median."""
    out: dict[str, Any] = {}
    for size in results["sizes"]:
        for rate in results["rates"]:
            key = f"{size}B_{rate}"
            row: dict[str, Any] = {}
            by_rep: dict[int, dict[str, Any]] = {}
            for contender in results["contenders"]:
                steps = [
                    (r["rep"], s)
                    for r in results["runs"]
                    if r["contender"] == contender
                    for s in r.get("steps", [])
                    if s["size"] == size and s["rate"] == rate
                ]
                for rep, s in steps:
                    by_rep.setdefault(rep, {})[contender] = s
                cell: dict[str, Any] = {}
                for name in OUTSIDE:
                    for q in ("p50_ms", "p99_ms"):
                        cell[f"{name}_{q}"] = median([s["outside"][name][q] for _, s in steps])
                for name in INSIDE:
                    for q in ("p50_ms", "p99_ms"):
                        values = [s["probe"]["stages"][name][q] for _, s in steps if "probe" in s]
                        if values:
                            cell[f"{name}_{q}"] = median(values)
                for name in READS:
                    for q in ("p50_ms", "p99_ms"):
                        values = [s["probe"]["reads"][name][q] for _, s in steps if "probe" in s]
                        if values:
                            cell[f"{name}_{q}"] = median(values)
                cell["load"] = median([s["load_before"] for _, s in steps])
                row[contender] = cell
            ratios: dict[str, list[float]] = {}
            for pair in by_rep.values():
                if "drkit" in pair and "mm2" in pair:
                    for name in ("source_to_target", "send_to_target"):
                        for q in ("p50_ms", "p99_ms"):
                            d, m = pair["drkit"]["outside"][name][q], pair["mm2"]["outside"][name][q]
                            if d is not None and m:
                                ratios.setdefault(f"{name}_{q}_drkit/mm2", []).append(d / m)
            row["ratios"] = {k: median(v) for k, v in ratios.items()}
            out[key] = row
    return out


def knob_runs(pairs: list[str]) -> dict[str, Any]:
    """Steady-state runs of against_mm2 (``--copiers drkit,mm2 --no-backlog``), one per knob, side by side:
    each ``LABEL=FILE`` run's p50/p99 per rate for both copiers, the load before each step, and the ratios
    drkit/mm2 of that one run (the copiers alternate within it, so each ratio is from one machine state)."""
    out: dict[str, Any] = {"benchmark": "latency_knobs", "runs": {}}
    for pair in pairs:
        label, _, path = pair.partition("=")
        run = json.loads(Path(path).read_text())
        steps = {r["copier"]: {s["rate"]: s for s in r["steps"]} for r in run["steady"]}
        rates: dict[str, Any] = {}
        for rate in run["rates"]:
            d, m = steps.get("drkit", {}).get(rate), steps.get("mm2", {}).get(rate)
            if d is None or m is None:
                continue
            rates[str(rate)] = {
                "drkit_p50_ms": d["p50_ms"],
                "drkit_p99_ms": d["p99_ms"],
                "mm2_p50_ms": m["p50_ms"],
                "mm2_p99_ms": m["p99_ms"],
                "p50_drkit/mm2": round(d["p50_ms"] / m["p50_ms"], 2) if m["p50_ms"] else None,
                "p99_drkit/mm2": round(d["p99_ms"] / m["p99_ms"], 2) if m["p99_ms"] else None,
                "load_drkit": d["load_before"],
                "load_mm2": m["load_before"],
            }
        out["runs"][label] = {
            "started": run["started"],
            "drkit_mirror": run.get("drkit_mirror"),
            "load_start": run["load_start"],
            "load_end": run["load_end"],
            "steps": rates,
        }
    return out


def stage_runs(pairs: list[str]) -> dict[str, Any]:
    """Runs of this benchmark, one per knob (``LABEL=FILE``), in one document: each run's knobs, loads and
    steps (their stages), in the order given (the order they ran in)."""
    out: dict[str, Any] = {"benchmark": "latency_stages_knobs", "runs": {}}
    for pair in pairs:
        label, _, path = pair.partition("=")
        run = json.loads(Path(path).read_text())
        out["runs"][label] = {
            key: run[key] for key in ("started", "drkit_mirror", "drkit_env", "load_start", "load_end", "git")
        } | {"steps": [step for r in run["runs"] for step in r["steps"]]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scripts.bench.latency_stages",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--base-port", type=int, default=24192, help="broker port of A; B gets base+10")
    p.add_argument("--state", type=Path, help="clusters' and copiers' state (default: a temp dir, removed)")
    p.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated subset of drkit,mm2")
    p.add_argument("--sizes", default="100,1000", help="comma-separated value sizes in bytes")
    p.add_argument("--rates", default="2000,10000,20000", help="comma-separated rates (records/s)")
    p.add_argument("--step-seconds", type=float, default=20.0)
    p.add_argument("--warmup-seconds", type=float, default=15.0, help="unmeasured load at the first rate")
    p.add_argument("--repetitions", type=int, default=2)
    p.add_argument("--compression", default="lz4", help="MirrorMaker 2's producer (drkit: --drkit-mirror)")
    p.add_argument("--drkit-mirror", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument(
        "--knob-runs",
        nargs="+",
        metavar="LABEL=FILE",
        help="measure nothing: print against_mm2 steady runs side by side with their drkit/mm2 ratios",
    )
    p.add_argument(
        "--stage-runs",
        nargs="+",
        metavar="LABEL=FILE",
        help="measure nothing: print runs of this benchmark, one per knob, in one document",
    )
    args = p.parse_args(argv)
    if args.stage_runs:
        print(json.dumps(stage_runs(args.stage_runs), indent=2))
        return 0
    if args.knob_runs:
        print(json.dumps(knob_runs(args.knob_runs), indent=2))
        return 0
    args.sizes = [int(x) for x in args.sizes.split(",")]
    args.rates = [int(x) for x in args.rates.split(",")]
    contenders = [c for c in args.contenders.split(",") if c]
    if not contenders or set(contenders) - set(CONTENDERS):
        p.error(f"--contenders: a subset of {','.join(CONTENDERS)}")
    tmp = None
    if args.state is None:
        tmp = tempfile.TemporaryDirectory(prefix="drkit-stages-")
        args.state = Path(tmp.name)
    kafka = local_kafka(args.state / "kafka", args.base_port, "512m")
    results: dict[str, Any] = {
        "benchmark": "latency_stages",
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "versions": versions(local_brokers=True),
        "git": git_facts(),
        "contenders": contenders,
        "sizes": args.sizes,
        "rates": args.rates,
        "step_seconds": args.step_seconds,
        "repetitions": args.repetitions,
        "drkit_mirror": drkit_mirror_settings(args.drkit_mirror),
        "drkit_env": {k: os.environ[k] for k in KNOB_ENV if k in os.environ},
        "load_start": load_averages(),
        "runs": [],
    }
    try:
        a, b = start_pair(kafka)
        watcher = Consumer({"bootstrap.servers": b, "group.id": "stages-watch", "enable.auto.commit": False})
        source = Consumer({"bootstrap.servers": a, "group.id": "stages-watch", "enable.auto.commit": False})
        for rep in range(args.repetitions):
            for contender in contenders if rep % 2 == 0 else list(reversed(contenders)):
                log(f"rep {rep}: {contender} (load {load1()})")
                r = run(contender, a, b, args.state / "runs", args, watcher, source)
                r["rep"] = rep
                results["runs"].append(r)
        watcher.close()
        source.close()
    finally:
        for running in LIVE:
            if running.proc.poll() is None:
                with contextlib.suppress(Exception):
                    running.stop(30)
        results["load_end"] = load_averages()
        with contextlib.suppress(Exception):
            kafka.down()
        if tmp is not None:
            tmp.cleanup()
    results["summary"] = summarize(results)
    print(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
