"""Benchmark of the operator commands as whole CLI processes, over a day of offset-syncs. Not a test.

The question it answers (issues 10 and 23): how long does an operator wait for ``drkit status``,
``offsets``, ``failover`` (one group, all groups; dry run and apply) and ``history`` when the mirror
has written a day of one-second batches on 100 partitions and 1,000 groups have checkpoints, at any
time of day and without ``drkit maintain``; and how fresh does the running translator keep the
checkpoints?

What it does, in a fresh state folder:

1. Starts two local KRaft clusters A and B (``LocalKafka``, own state folder, ``--base-port``),
   creates ``orders`` on A and ``A.orders`` on B (``--partitions``, default 100) and writes a
   config for the flow A->B (``checkpoint.max_age_seconds`` raised to ``--max-age`` so the
   checkpoints written at set-up stay usable for the whole run: what is timed is the work, not a
   refusal).
2. Makes the clusters real: one record per partition per batch on ``orders``, and on ``A.orders``
   as many records as the syncs say were copied there (every downstream offset up to the last synced
   one exists), so ``status`` sees no divergence and failovers succeed.
3. Fills ``offset_syncs`` as the mirror leaves it (drkit.store.offset_syncs): ``--sync-batches``
   one-second batches x ``--partitions`` ranges, one record each, a downstream gap every
   ``GAP_EVERY`` batches, the last batch written now. The mirror coalesces a stream's rows of the
   current UTC day with every ``COMPACT_EVERY``-th batch: so each day's rows up to its last coalescing
   batch are coalesced here by the product's own ``merge_rows``, and the batches after it are
   committed one by one with their application transaction, as the mirror commits them. Appends
   ``--checkpoint-versions`` versions of checkpoints for ``--groups`` groups x ``--group-partitions``
   partitions (the last one now) and the translator's last-run file. The groups have no members on B.
4. Phase ``without_maintain``: each command as a cold CLI process (``python -m drkit.cli.app ...
   -o json``; wall clock including Python start), ``--repeats`` times, commands alternating. Each
   run records exit code (and whether it is the expected one), the 1-minute load average when it
   started, peak memory, and a digest of its JSON output.
5. ``drkit maintain`` through the facade (child process, Spark), then the same measurements: phase
   ``after_maintain``.
6. Checkpoint freshness: ``drkit checkpoint --flow A->B`` runs as a process (default interval, and
   ``--interval 1``); a group commits ``--freshness-commits`` offsets on A's ``orders``, one every
   ``--commit-every`` seconds; a poller reads ``CheckpointTable.latest`` every ``--poll`` seconds and
   records, per commit, the time until a checkpoint at or past that offset is visible.
7. ``--profile``: one CLI process of the slowest commands under ``cProfile`` and ``-X importtime``;
   the top costs go into the JSON. Every command's import time (``-X importtime``, one process each)
   goes into ``imports``.

8. Phase ``clusters_down`` (issue 26; ``--phases clusters_down``, runs last): each outage of ``--outages`` in
   turn takes clusters away, ``down`` (the broker stopped: connections refused) or ``frozen`` (SIGSTOP:
   connections accepted, nothing answered), for the source (A), the target (B) or both; ``status``,
   ``offsets``, ``failover`` (dry run and apply) and ``failback`` run ``--repeats`` times each, commands
   alternating, each run checked against the exit code drkit must give (``OUTAGE_EXPECTED``), with the
   1-minute load average; the clusters come back (and are ready) before the next outage. Target: every
   command under 3 s with a cluster stopped. ``--drkit-path DIR`` runs the CLI processes with drkit from
   another checkout (``git archive <commit> drkit | tar -x -C DIR``): the "before" of a change, same script.

Peak memory: the CLI process tree is sampled from ``/proc`` every 0.2 s (psutil is not in the
venv): ``tree_peak_rss_mb`` is the largest sum of the tree's RSS seen at one instant,
``python_maxrss_mb`` the CLI process's own peak from ``wait4``.

What the set-up does not reproduce: the Delta log of a real day holds 86,400 commits (delta-rs writes
a checkpoint every 100, so opening the table reads at most 100 commit files) and the tombstones of the
files each coalescing write replaced; here the coalesced days are one commit each.

Printed as one JSON object on stdout (``--out`` also writes it to a file); a Markdown table goes to
stderr (or stdout with ``--markdown``). Progress goes to stderr. The clusters are stopped at the
end, whatever happens.

Example::

    .venv/bin/python -m scripts.bench.operator --quick           # an hour of syncs, 100 groups
    .venv/bin/python -m scripts.bench.operator --out /tmp/bench_operator.json   # a day, 1,000 groups
    .venv/bin/python -m scripts.bench.operator --phases clusters_down --sync-batches 600 --groups 20 \
        --group-partitions 2 --partitions 4 --freshness-commits 0 --profile '' --repeats 3   # outages
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scripts.bench.lib.clusters import local_kafka, start_pair
from scripts.bench.lib.machine import REPO, git_facts, load_averages
from scripts.bench.lib.output import print_json, to_json
from scripts.bench.lib.producers import produce_filler
from scripts.bench.operator import cli
from scripts.bench.operator.commands import COMMANDS, OUTAGE_COMMANDS, OUTAGES, PHASES
from scripts.bench.operator.fixture import (
    RECORDS,
    TARGET,
    TOPIC,
    create_topics,
    downstream,
    fill_syncs,
    write_checkpoints,
    write_config,
)
from scripts.bench.operator.freshness import freshness
from scripts.bench.operator.latency import measure_phase
from scripts.bench.operator.outages import measure_outages
from scripts.bench.operator.profile import importtime, profiles
from scripts.bench.operator.progress import log
from scripts.bench.operator.report import baseline_medians, markdown, targets


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.operator", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="small: 3,600 batches, 100 groups, 2 repeats, 20 commits per freshness run"
    )
    p.add_argument("--sync-batches", type=int, default=None, help="one-second batches (default: 86,400, a day)")
    p.add_argument("--partitions", type=int, default=100, help="partitions of orders / A.orders")
    p.add_argument("--groups", type=int, default=None, help="groups with checkpoints (default 1,000)")
    p.add_argument("--group-partitions", type=int, default=12, help="partitions each group has checkpoints on")
    p.add_argument("--checkpoint-versions", type=int, default=3, help="versions of checkpoint history")
    p.add_argument("--repeats", type=int, default=None, help="runs per command and phase (default 3)")
    p.add_argument("--commands", default=",".join(COMMANDS), help="comma-separated subset of the commands")
    p.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated: {', '.join(PHASES)}, clusters_down (stops and freezes the clusters; runs last)",
    )
    p.add_argument("--outages", default=",".join(OUTAGES), help=f"clusters_down: comma-separated {', '.join(OUTAGES)}")
    p.add_argument("--outage-commands", default=",".join(OUTAGE_COMMANDS), help="clusters_down: comma-separated subset")
    p.add_argument(
        "--drkit-path",
        type=Path,
        default=None,
        help="run the CLI processes with drkit imported from this checkout (to time an earlier commit)",
    )
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a JSON report of an earlier run of this script: the table adds its medians as a first column",
    )
    p.add_argument("--freshness-commits", type=int, default=None, help="commits per freshness run (default 50)")
    p.add_argument(
        "--freshness-intervals",
        default="default,1",
        help="translator intervals for the freshness runs: 'default' (the config's) or seconds",
    )
    p.add_argument("--commit-every", type=float, default=0.7, help="seconds between commits (freshness)")
    p.add_argument("--poll", type=float, default=0.1, help="seconds between checkpoint polls (freshness)")
    p.add_argument("--max-age", type=float, default=7200.0, help="checkpoint.max_age_seconds of the config")
    p.add_argument(
        "--profile",
        default="failover_all_apply,status",
        help="commands profiled once with delta-rs (cProfile, -X importtime); '' for none",
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds one CLI process may take")
    p.add_argument("--base-port", type=int, default=45092)
    p.add_argument("--state", type=Path, default=None, help="state folder (default: a temporary one)")
    p.add_argument("--keep-state", action="store_true", help="do not delete the state folder at the end")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=None, help="also write the JSON report to this file")
    p.add_argument("--markdown", action="store_true", help="print the Markdown table on stdout after the JSON")
    p.add_argument("--internal", choices=["maintain"], help=argparse.SUPPRESS)
    p.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    quick = args.quick
    defaults = {
        "sync_batches": (3_600, 86_400),
        "groups": (100, 1_000),
        "repeats": (2, 3),
        "freshness_commits": (20, 50),
    }
    for name, (small, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    return args


# -- child processes ------------------------------------------------------------------------------


def internal_maintain(args: argparse.Namespace) -> dict[str, Any]:
    from drkit.config import load_config
    from drkit.service import Drkit

    service = Drkit(load_config(str(args.config)))
    started = time.monotonic()
    report = service.maintain().as_dict()  # on delta-rs: no Spark session, no JVM
    return {"seconds": round(time.monotonic() - started, 1), "report": report}


def run_internal(args: argparse.Namespace, what: str, cfg: Path, extra: list[str]) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "scripts.bench.operator",
        "--internal",
        what,
        "--config",
        str(cfg),
        "--sync-batches",
        str(args.sync_batches),
        "--partitions",
        str(args.partitions),
        *extra,
    ]
    started = time.monotonic()
    # run in the state folder: this checkout put first on the child's path, so that it finds this package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cfg.parent, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_seconds"] = round(time.monotonic() - started, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.internal:
        result = internal_maintain(args)
        print(json.dumps(result, default=str))
        return 0

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # run the finally blocks: children killed, clusters stopped

    signal.signal(signal.SIGTERM, stop)
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    unknown = set(commands) - set(COMMANDS)
    if unknown:
        raise SystemExit(f"unknown commands: {sorted(unknown)}; choose from {list(COMMANDS)}")
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    baseline = None
    if args.baseline is not None:
        try:
            baseline = baseline_medians(json.loads(args.baseline.read_text()))
        except (OSError, ValueError, AttributeError) as e:
            raise SystemExit(f"--baseline {args.baseline}: not a JSON report of this script ({e})") from None
        if not baseline:
            raise SystemExit(f"--baseline {args.baseline}: the report has no without_maintain phase")
    drkit_path = args.drkit_path.resolve() if args.drkit_path else None
    cli.use_drkit_path(drkit_path)
    tmp = tempfile.mkdtemp(prefix="drkit-bench-operator-")
    state = (args.state or Path(tmp)).resolve()
    state.mkdir(parents=True, exist_ok=True)
    kafka = local_kafka(state / "kafka", args.base_port)
    started = time.monotonic()

    def dump() -> None:  # the report so far, after every step (a long run stopped early still tells)
        if args.out:
            args.out.write_text(to_json(report) + "\n")

    report: dict[str, Any] = {
        "bench": "operator",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_facts(),
        "cli_drkit": str(drkit_path or REPO),
        "cli_drkit_commit": git_facts(drkit_path)["commit"] if drkit_path else None,
        "load_average_at_start": load_averages(),
    }
    try:
        log(f"state {state}; starting clusters A, B on {args.base_port}/{args.base_port + 10}")
        t = time.monotonic()
        clusters = dict(zip(("A", "B"), start_pair(kafka), strict=True))
        clusters_seconds = time.monotonic() - t
        cfg = write_config(state, args.base_port, args.max_age)
        topics_seconds = create_topics(clusters["A"], clusters["B"], args.partitions)
        source_records = args.sync_batches * RECORDS
        target_records = downstream(source_records - 1) + 1
        log(f"producing {source_records:,} records per partition on A, {target_records:,} on B")
        produced = {
            "source_records_per_partition": source_records,
            "target_records_per_partition": target_records,
            "source_seconds": round(produce_filler(clusters["A"], TOPIC, source_records, args.partitions), 1),
            "target_seconds": round(produce_filler(clusters["B"], TARGET, target_records, args.partitions), 1),
        }
        log(f"filling offset_syncs: {args.sync_batches:,} batches x {args.partitions} partitions")
        filled = fill_syncs(args, cfg)
        log(f"filled: {filled['rows']:,} rows in {filled['files']} files ({filled['seconds']} s); writing checkpoints")
        checkpoints = write_checkpoints(args, cfg)
        report["setup"] = {
            "sync_batches": args.sync_batches,
            "partitions": args.partitions,
            "offset_sync_rows": filled["rows"],
            "syncs_written_from": filled["written_from"],
            "groups": args.groups,
            "group_partitions": args.group_partitions,
            "checkpoint_rows": checkpoints["rows"],
            "checkpoint_versions": checkpoints["versions"],
            "max_age_seconds": args.max_age,
            "repeats": args.repeats,
            "cpus": os.cpu_count(),
            "clusters_start_seconds": round(clusters_seconds, 1),
            "topics_create_seconds": round(topics_seconds, 1),
            "fill": filled,
            "checkpoints_write_seconds": checkpoints["seconds"],
            "records": produced,
            "note": (
                "every synced offset exists on both clusters; checkpoint.max_age_seconds is raised so set-up "
                "checkpoints stay usable"
            ),
        }
        report["phases"] = {}
        dump()
        if "without_maintain" in phases:
            report["phases"]["without_maintain"] = {
                "commands": measure_phase(args, cfg, "without_maintain", commands),
                "profiles": profiles(args, cfg, "without maintain"),
            }
            log("import time of each command (-X importtime, one process each)")
            report["imports"] = {name: importtime(cfg, name, args.timeout) for name in commands}
            dump()
        if "after_maintain" in phases:
            log("drkit maintain (facade, Spark)")
            maintained = run_internal(args, "maintain", cfg, [])
            syncs = maintained["report"].get("offset_syncs", {})
            report["maintain"] = {
                "process_seconds": maintained["process_seconds"],
                "seconds": maintained["report"].get("seconds"),
                "offset_syncs": {
                    k: syncs.get(k) for k in ("rows_before", "rows_after", "files_before", "files_after") if k in syncs
                }
                or syncs,
            }
            dump()
            report["phases"]["after_maintain"] = {
                "commands": measure_phase(args, cfg, "after_maintain", commands),
                "profiles": profiles(args, cfg, "after"),
            }
            dump()
        report["freshness"] = []
        for interval in [i.strip() for i in args.freshness_intervals.split(",") if i.strip()]:
            if args.freshness_commits <= 0:
                break
            log(f"freshness: translator interval {interval}, {args.freshness_commits} commits")
            f = freshness(args, cfg, interval, clusters["A"])
            log(
                f"freshness {interval}: p50 {f.get('p50_seconds')} p99 {f.get('p99_seconds')} "
                f"max {f.get('max_seconds')}"
            )
            report["freshness"].append(f)
            dump()
        if "clusters_down" in phases:
            report["clusters_down"] = measure_outages(args, cfg, kafka)
            dump()
        report["targets"] = targets(report)
    finally:
        cli.kill_children()
        log("stopping clusters")
        kafka.down()
        report["total_seconds"] = round(time.monotonic() - started, 1)
        report["load_average_at_end"] = load_averages()
        if not args.keep_state and args.state is None:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    print_json(report, args.out)
    table = markdown(report, baseline)
    print(table, file=sys.stdout if args.markdown else sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
