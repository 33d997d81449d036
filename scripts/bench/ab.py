"""A/B of two drkit checkouts in one run: the operator and mirror benchmarks, the contenders alternating. Not a test.

The question (issue 35's "behaviour unchanged"): is the code after a change as fast as the code before it, on a
machine whose load moves while it is measured? Both contenders are measured in ONE run on the same clusters
and state, alternating (A B, B A, ...: scripts.bench.lib.pairs), each measurement with the host's 1-minute
load average just before and after it; each pair gives the ratio after / before of its time, and the spread
of those ratios across pairs is the noise the run could not take out. ``before`` and ``after`` are checkouts
of drkit (``--before``, ``--after``: folders holding a ``drkit`` package), put first on the PYTHONPATH of the
processes that run drkit; this package's own machinery builds the state and reads the results.

Parts (``--parts``):

* ``operator``: the operator benchmark's state (scripts.bench.operator.fixture: clusters A and B made real,
  ``--sync-batches`` one-second batches of offset-syncs on ``--partitions`` partitions, checkpoints of
  ``--groups`` groups), built once; then ``--repeats`` times each command of ``--commands`` as a cold CLI
  process (scripts.bench.operator.cli), once per contender back to back: one pair. One untimed ``status``
  per contender first (page cache). Figure: the process's wall clock, seconds.
* ``mirror``: clusters A and B started once; ``--rounds`` rounds, in each the mirror benchmark's measurement
  (scripts.bench.mirror.measure: ``--records`` fresh records of ``--size`` bytes on a fresh topic, ``drkit
  mirror --once`` in an instrumented child, every record read back and checked) once per contender. One
  untimed small run per contender first (``--warmup-records``). Figures: the mirror process's wall time
  (``mirror_seconds``, Spark start-up included) and the sum of its batches' times (``mirror_copy_seconds``).

A ratio above 1 means ``after`` took longer. A run whose exit code is not the expected one (operator) or whose
copy is not exact (mirror: a record missing, unexpected or in the wrong partition) stops the run.

Example (from the repository root; nice: the benchmark yields to a CI run on the same cores)::

    nice -n 5 .venv/bin/python -m scripts.bench.ab --before /work/wt/before --base-port 26000 \\
        --out docs/results/bench_ab_<date>.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scripts.bench import mirror
from scripts.bench.lib.clusters import local_kafka, start_pair
from scripts.bench.lib.machine import REPO, git_facts, load1, load_averages
from scripts.bench.lib.output import logger, print_json
from scripts.bench.lib.pairs import AFTER, BEFORE, CONTENDERS, Measurement, order, summarize
from scripts.bench.lib.producers import produce_filler
from scripts.bench.operator import cli
from scripts.bench.operator.commands import COMMANDS
from scripts.bench.operator.fixture import (
    RECORDS,
    TARGET,
    TOPIC,
    create_topics,
    downstream,
    fill_syncs,
    group_name,
    write_checkpoints,
    write_config,
)

log = logger("ab")

#: The operator commands timed by default: those that change nothing a later run would see.
READ_COMMANDS = ("status", "offsets_group", "failover_group_dry_run", "failover_all_dry_run", "history")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m scripts.bench.ab",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--before", type=Path, required=True, help="checkout of the code before (holds drkit/)")
    p.add_argument("--after", type=Path, default=REPO, help="checkout of the code after (default: this one)")
    p.add_argument("--parts", default="operator,mirror", help="comma-separated: operator, mirror")
    p.add_argument("--base-port", type=int, default=26000, help="operator's A; B +10; the mirror's A +200")
    p.add_argument("--out", type=Path, help="also write the JSON report to this file")
    p.add_argument("--state", type=Path, help="state folder (default: a temporary one, deleted at the end)")
    op = p.add_argument_group("operator")
    op.add_argument("--sync-batches", type=int, default=3_600, help="one-second batches of offset-syncs")
    op.add_argument("--partitions", type=int, default=100, help="partitions of orders / A.orders")
    op.add_argument("--groups", type=int, default=100, help="groups with checkpoints")
    op.add_argument("--group-partitions", type=int, default=12, help="partitions each group has checkpoints on")
    op.add_argument("--repeats", type=int, default=5, help="pairs per command")
    op.add_argument("--commands", default=",".join(READ_COMMANDS), help="comma-separated operator commands")
    op.add_argument("--timeout", type=float, default=300.0, help="seconds one CLI process may take")
    mi = p.add_argument_group("mirror")
    mi.add_argument("--records", type=int, default=200_000, help="records per mirror run")
    mi.add_argument("--size", type=int, default=512, help="value size in bytes")
    mi.add_argument("--mirror-partitions", type=int, default=6, help="partitions of each source topic")
    mi.add_argument("--rounds", type=int, default=4, help="pairs of mirror runs")
    mi.add_argument("--warmup-records", type=int, default=20_000, help="records of the untimed first runs (0: none)")
    mi.add_argument("--broker-heap", default="512m", help="heap of each local broker")
    mi.add_argument("--mirror-timeout", type=float, default=900.0, help="seconds one mirror run may take")
    args = p.parse_args(argv)
    args.parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    args.commands = [x.strip() for x in args.commands.split(",") if x.strip()]
    for checkout in (args.before, args.after):
        if not (checkout / "drkit" / "__init__.py").is_file():
            p.error(f"{checkout} holds no drkit package (drkit/__init__.py)")
    if unknown := set(args.parts) - {"operator", "mirror"}:
        p.error(f"unknown parts {sorted(unknown)}; choose from operator, mirror")
    if unknown := set(args.commands) - set(COMMANDS):
        p.error(f"unknown commands {sorted(unknown)}; choose from {', '.join(COMMANDS)}")
    args.before, args.after = args.before.resolve(), args.after.resolve()
    return args


# -- operator ---------------------------------------------------------------------------------


def operator_part(args: argparse.Namespace, paths: dict[str, Path], state: Path) -> dict[str, Any]:
    fixture = argparse.Namespace(
        sync_batches=args.sync_batches,
        partitions=args.partitions,
        groups=args.groups,
        group_partitions=args.group_partitions,
        checkpoint_versions=3,
        seed=7,
    )
    state.mkdir(parents=True, exist_ok=True)
    kafka = local_kafka(state / "kafka", args.base_port)
    try:
        log(f"operator: clusters A, B on {args.base_port}/{args.base_port + 10}")
        source, target = start_pair(kafka)
        cfg = write_config(state, args.base_port, 7200.0)
        create_topics(source, target, args.partitions)
        produce_filler(source, TOPIC, args.sync_batches * RECORDS, args.partitions)
        produce_filler(target, TARGET, downstream(args.sync_batches * RECORDS - 1) + 1, args.partitions)
        log(f"operator: offset_syncs of {args.sync_batches:,} batches x {args.partitions} partitions")
        filled = fill_syncs(fixture, cfg)
        checkpoints = write_checkpoints(fixture, cfg)
        group = group_name(0)
        for contender in CONTENDERS:  # untimed: the page cache holds both checkouts' modules
            cli.use_drkit_path(paths[contender])
            cli.run_cli(cfg, ["status", "--flow", "A->B"], args.timeout)
        measurements: dict[str, list[Measurement]] = {name: [] for name in args.commands}
        runs: list[dict[str, Any]] = []
        pair = 0
        for rep in range(1, args.repeats + 1):
            for name in args.commands:
                template, expected = COMMANDS[name]
                argv = [a.replace("{group}", group) for a in template]
                for contender in order(pair):
                    cli.use_drkit_path(paths[contender])
                    load_before = load1()
                    r = cli.measured_run(cfg, name, argv, args.timeout, rep, sorted(expected), expected)
                    load_after = load1()
                    if not r["ok"]:
                        raise RuntimeError(f"{contender} {name} exited {r['exit_code']}: {r.get('stderr_tail')}")
                    measurements[name].append(
                        Measurement(contender, f"{name}#{rep}", r["seconds"], load_before, load_after)
                    )
                    runs.append({"contender": contender, "pair": f"{name}#{rep}", "load1_after": load_after, **r})
                    seconds = r["seconds"]
                    log(f"operator {name:24s} #{rep} {contender:6s} {seconds:6.2f} s load {load_before}-{load_after}")
                pair += 1
    finally:
        cli.kill_children()
        log("operator: stopping clusters")
        kafka.down()
    every = [m for name in args.commands for m in measurements[name]]
    return {
        "setup": {
            "sync_batches": args.sync_batches,
            "partitions": args.partitions,
            "groups": args.groups,
            "group_partitions": args.group_partitions,
            "offset_sync_rows": filled["rows"],
            "checkpoint_rows": checkpoints["rows"],
            "repeats": args.repeats,
        },
        "figure": "wall clock of one cold CLI process (python -m drkit.cli.app ... -o json), seconds",
        "commands": {
            name: {
                "command": "drkit " + " ".join(COMMANDS[name][0]).replace("{group}", group),
                "seconds": summarize(measurements[name]),
            }
            for name in args.commands
        },
        "all_commands_seconds": summarize(every),
        "same_output_digest": same_digests(runs),
        "runs": runs,
    }


def same_digests(runs: list[dict[str, Any]]) -> dict[str, bool]:
    """Per pair: did both contenders' JSON outputs give the same digest (counts, verdicts)?"""
    digests: dict[str, list[Any]] = {}
    for r in runs:
        digests.setdefault(r["pair"], []).append(r["output"])
    return {pair: len(d) == 2 and d[0] == d[1] for pair, d in digests.items()}


# -- mirror -----------------------------------------------------------------------------------


def mirror_part(args: argparse.Namespace, paths: dict[str, Path], state: Path) -> dict[str, Any]:
    base = args.base_port + 200
    kafka = local_kafka(state / "mirror-kafka", base, args.broker_heap)

    def settings(contender: str, records: int) -> argparse.Namespace:
        return argparse.Namespace(
            records=records,
            size=args.size,
            partitions=args.mirror_partitions,
            max_offsets_per_trigger=None,
            sample_interval=0.25,
            timeout=args.mirror_timeout,
            drkit_path=paths[contender],
        )

    keys = ("mirror_seconds", "mirror_copy_seconds")
    measurements: dict[str, list[Measurement]] = {k: [] for k in keys}
    runs: list[dict[str, Any]] = []
    try:
        log(f"mirror: clusters A, B on {base}/{base + 10}")
        source, target = start_pair(kafka)
        if args.warmup_records:
            for contender in CONTENDERS:
                log(f"mirror: warm-up, {contender}, {args.warmup_records} records")
                mirror.measure(settings(contender, args.warmup_records), state, source, target, True)
        for round_ in range(args.rounds):
            for contender in order(round_):
                load_before = load1()
                r = mirror.measure(settings(contender, args.records), state, source, target, True)
                load_after = load1()
                if r["missing"] or r["unexpected"] or r["wrong_partition"]:
                    raise RuntimeError(f"{contender}'s copy is not exact: {r['missing']} missing, {r['unexpected']}")
                for k in keys:
                    measurements[k].append(Measurement(contender, f"round {round_ + 1}", r[k], load_before, load_after))
                runs.append(
                    {
                        "contender": contender,
                        "round": round_ + 1,
                        "load1_before": load_before,
                        "load1_after": load_after,
                        **{k: v for k, v in r.items() if k not in ("memory", "definitions", "versions")},
                    }
                )
                log(
                    f"mirror round {round_ + 1} {contender:6s} {r['mirror_seconds']:6.1f} s "
                    f"(batches {r['mirror_copy_seconds']} s) load {load_before}-{load_after}"
                )
    finally:
        log("mirror: stopping clusters")
        kafka.down()
    return {
        "setup": {
            "records": args.records,
            "record_size": args.size,
            "partitions": args.mirror_partitions,
            "rounds": args.rounds,
            "warmup_records": args.warmup_records,
            "spark_master": "local[2]",
        },
        "figures": {
            "mirror_seconds": "wall time of the `drkit mirror --once` process, Spark start-up included",
            "mirror_copy_seconds": "sum of the per-batch times the mirror logs (inside foreachBatch)",
        },
        **{k: summarize(measurements[k]) for k in keys},
        "duplicates": {c: [r["duplicates"] for r in runs if r["contender"] == c] for c in CONTENDERS},
        "runs": runs,
    }


# -- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # run the finally blocks: children killed, clusters stopped

    signal.signal(signal.SIGTERM, stop)
    paths = {BEFORE: args.before, AFTER: args.after}
    temp = args.state is None
    state = Path(tempfile.mkdtemp(prefix="drkit-bench-ab-")) if temp else args.state.resolve()
    state.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    report: dict[str, Any] = {
        "bench": "ab",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": sys.argv,
        "niceness": os.nice(0),
        "cpus": os.cpu_count(),
        "contenders": {c: {"path": str(p), **git_facts(p)} for c, p in paths.items()},
        "ratio": "after / before of the same pair's figure (above 1: after took longer)",
        "load_average_at_start": load_averages(),
    }
    try:
        if "operator" in args.parts:
            report["operator"] = operator_part(args, paths, state / "operator")
        if "mirror" in args.parts:
            (state / "mirror").mkdir(parents=True, exist_ok=True)
            report["mirror"] = mirror_part(args, paths, state / "mirror")
    except Exception as exc:
        log(f"failed: {exc}")
        report["error"] = str(exc)
        print_json(report, args.out)
        return 1
    finally:
        report["total_seconds"] = round(time.monotonic() - started, 1)
        report["load_average_at_end"] = load_averages()
        if temp:
            shutil.rmtree(state, ignore_errors=True)
    print_json(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
