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

    .venv/bin/python scripts/bench_operator.py --quick           # an hour of syncs, 100 groups
    .venv/bin/python scripts/bench_operator.py --out /tmp/bench_operator.json   # a day, 1,000 groups
    .venv/bin/python scripts/bench_operator.py --phases clusters_down --sync-batches 600 --groups 20 \
        --group-partitions 2 --partitions 4 --freshness-commits 0 --profile '' --repeats 3   # outages
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

FLOW = "A->B"
TOPIC = "orders"
TARGET = "A.orders"
RECORDS = 1  # records per partition per batch: the records exist on both clusters
GAP_EVERY = 600  # a downstream gap every N batches (transaction markers on the target)
GROUP_PREFIX = "bench-g"
STREAM = "bench-stream"
PHASES = ("without_maintain", "after_maintain")

#: The operator commands measured, in order: name -> (arguments after the config, expected exit codes).
COMMANDS: dict[str, tuple[list[str], set[int]]] = {
    "status": (["status", "--flow", FLOW], {0, 20, 21}),
    "offsets_group": (["offsets", "--flow", FLOW, "--group", "{group}"], {0}),
    "failover_group_dry_run": (["failover", "--flow", FLOW, "--group", "{group}"], {0}),
    "failover_group_apply": (["failover", "--flow", FLOW, "--group", "{group}", "--apply", "--yes"], {0}),
    "failover_all_dry_run": (["failover", "--flow", FLOW, "--all-groups"], {0}),
    "failover_all_apply": (["failover", "--flow", FLOW, "--all-groups", "--apply", "--yes"], {0}),
    "history": (["history", "--flow", FLOW], {0}),
}
#: Targets (seconds, whole process, idle machine): issue 23's for status and failover of all groups,
#: issue 10's for the others.
TARGETS = {
    "status": 1.0,
    "offsets_group": 3.0,
    "history": 3.0,
    "failover_group_dry_run": 3.0,
    "failover_all_apply": 3.0,
}
FRESHNESS_TARGET_P99 = 5.0

#: Phase ``clusters_down`` (issue 26): the operator commands while clusters are gone. Each outage names the
#: clusters it takes away and how: ``down`` stops the broker (connections refused, as after a crash or a
#: stop), ``frozen`` SIGSTOPs it (connections accepted, nothing answered, as across a network partition).
OUTAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "source_down": (("A",), "down"),
    "target_down": (("B",), "down"),
    "both_down": (("A", "B"), "down"),
    "source_frozen": (("A",), "frozen"),
    "target_frozen": (("B",), "frozen"),
    "both_frozen": (("A", "B"), "frozen"),
}
#: The commands timed in each outage (``{group}``: a group with checkpoints, failed over and back).
OUTAGE_COMMANDS: dict[str, list[str]] = {
    "status": ["status", "--flow", FLOW],
    "offsets_group": ["offsets", "--flow", FLOW, "--group", "{group}"],
    "failover_group_dry_run": ["failover", "--flow", FLOW, "--group", "{group}"],
    "failover_group_apply": ["failover", "--flow", FLOW, "--group", "{group}", "--apply", "--yes"],
    "failback_group_dry_run": ["failback", "--flow", FLOW, "--group", "{group}"],
}
#: The exit code each command must give with the source gone (A) and with the target gone (B, or both):
#: the verdicts of drkit.core.reach and drkit.core.status. Status: 22 source unreachable, 25 target
#: unreachable (also with both gone: nowhere to fail over to is the worse); failover does without the
#: source (its RPO from the last observation) and stops without the target (4); failback needs both (4);
#: offsets shows the source's column as unknown and stops without the target (4).
OUTAGE_EXPECTED: dict[str, dict[str, int]] = {
    "source": {
        "status": 22,
        "offsets_group": 0,
        "failover_group_dry_run": 0,
        "failover_group_apply": 0,
        "failback_group_dry_run": 4,
    },
    "target": {
        "status": 25,
        "offsets_group": 4,
        "failover_group_dry_run": 4,
        "failover_group_apply": 4,
        "failback_group_dry_run": 4,
    },
}
#: Issue 26's target: every command answers within this with a cluster stopped (idle machine, whole process).
OUTAGE_TARGET_SECONDS = 3.0


def log(message: str) -> None:
    print(f"[bench_operator {datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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


# -- child processes with their own Spark session ------------------------------------------------


def internal_maintain(args: argparse.Namespace) -> dict[str, Any]:
    from drkit.config import load_config
    from drkit.service import Drkit

    service = Drkit(load_config(str(args.config)))
    started = time.monotonic()
    report = service.maintain().as_dict()
    seconds = time.monotonic() - started
    service.spark.stop()
    return {"seconds_with_spark_start": round(seconds, 1), "report": report}


def run_internal(args: argparse.Namespace, what: str, cfg: Path, extra: list[str]) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
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
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cfg.parent, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_seconds"] = round(time.monotonic() - started, 1)
    return result


# -- set-up -----------------------------------------------------------------------------------------


def batch_rows(first_batch: int, last_batch: int, partitions: int, first_epoch: float) -> Any:
    """The offset_syncs rows of batches ``first_batch..last_batch`` (one range per partition, RECORDS
    records each), batch ``b`` written ``first_epoch + b`` seconds."""
    import numpy as np
    import pyarrow as pa

    from drkit.store.offset_syncs import SPEC

    b = np.repeat(np.arange(first_batch, last_batch + 1, dtype=np.int64), partitions)
    p = np.tile(np.arange(partitions, dtype=np.int32), last_batch - first_batch + 1)
    up_first, up_last = b * RECORDS, b * RECORDS + RECORDS - 1
    written = ((first_epoch + b) * 1_000_000).astype(np.int64)
    n = len(b)
    return pa.Table.from_pydict(
        {
            "flow": pa.array([FLOW] * n, pa.string()),
            "source_topic": pa.array([TOPIC] * n, pa.string()),
            "target_topic": pa.array([TARGET] * n, pa.string()),
            "partition": p,
            "upstream_first": up_first,
            "upstream_last": up_last,
            "downstream_first": up_first + b // GAP_EVERY,
            "downstream_last": up_last + b // GAP_EVERY,
            "record_count": np.full(n, RECORDS, dtype=np.int64),
            "batch_id": b,
            "stream_id": pa.array([STREAM] * n, pa.string()),
            "written_at": pa.array(written, pa.timestamp("us", tz="UTC")),
            "sync_date": pa.array(written // 1_000_000 // 86_400, pa.int32()).cast(pa.date32()),
        },
        schema=SPEC.schema,
    )


def fill_syncs(args: argparse.Namespace, cfg: Path) -> dict[str, Any]:
    """``offset_syncs`` as a mirror that has run ``--sync-batches`` one-second batches until now leaves it
    (see the module docstring): coalesced up to each day's last coalescing batch, per batch after it."""
    import pyarrow as pa

    from drkit.config import load_config
    from drkit.layout import StateLayout
    from drkit.store import delta
    from drkit.store.offset_syncs import COMPACT_EVERY, SPEC, merge_rows

    layout = StateLayout(load_config(str(cfg)).state_root())
    started = time.monotonic()
    first_epoch = time.time() - args.sync_batches  # the last batch is written now
    days: dict[int, list[int]] = {}
    for b in range(args.sync_batches):
        days.setdefault(int((first_epoch + b) // 86_400), []).append(b)
    merged_rows = commits = 0
    for batches in days.values():
        coalesced_to = max((b for b in batches if b % COMPACT_EVERY == 0), default=None)
        if coalesced_to is not None:
            merged = None
            for lo in range(batches[0], coalesced_to + 1, 3_600):  # an hour at a time: merging is associative
                chunk = merge_rows(batch_rows(lo, min(lo + 3_599, coalesced_to), args.partitions, first_epoch))
                merged = chunk if merged is None else merge_rows(pa.concat_tables([merged, chunk]))
            assert merged is not None
            delta.write(layout.offset_syncs, SPEC, merged, app=(f"drkit-mirror-{STREAM}", coalesced_to))
            merged_rows += merged.num_rows
            commits += 1
        for b in (b for b in batches if coalesced_to is None or b > coalesced_to):
            delta.write(
                layout.offset_syncs,
                SPEC,
                batch_rows(b, b, args.partitions, first_epoch),
                app=(f"drkit-mirror-{STREAM}", b),
            )
            commits += 1
    from deltalake import DeltaTable

    table = DeltaTable(str(layout.offset_syncs))
    return {
        "seconds": round(time.monotonic() - started, 1),
        "rows": table.to_pyarrow_dataset().count_rows(),
        "rows_coalesced": merged_rows,
        "files": len(table.file_uris()),
        "commits": commits,
        "days": len(days),
        "written_from": datetime.fromtimestamp(first_epoch, UTC).isoformat(timespec="seconds"),
    }


def produce_records(bootstrap: str, topic: str, per_partition: int, partitions: int) -> float:
    """``per_partition`` one-byte records on every partition of ``topic``."""
    from confluent_kafka import Producer

    started = time.monotonic()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "enable.idempotence": False,
            "acks": 1,
        }
    )
    produce, poll = producer.produce, producer.poll
    for p in range(partitions):
        for _ in range(per_partition):
            while True:
                try:
                    produce(topic, b"x", partition=p)
                    break
                except BufferError:
                    poll(0.05)
        poll(0)
    if producer.flush(300):
        raise SystemExit(f"records for {topic} were not all acknowledged")
    return time.monotonic() - started


def write_config(state: Path, base_port: int, max_age: float) -> Path:
    cfg = state / "drkit.toml"
    cfg.write_text(f"""\
# written by scripts/bench_operator.py
[state]
root = "{state / "drkit-state"}"

[spark]
master = "local[2]"

[clusters.A]
bootstrap_servers = "127.0.0.1:{base_port}"

[clusters.B]
bootstrap_servers = "127.0.0.1:{base_port + 10}"

[[flows]]
source = "A"
target = "B"
replication_policy = "prefix"
topics = {{ include = ["{TOPIC}"], exclude = [] }}
groups = {{ include = [".*"], exclude = [] }}

[flows.checkpoint]
max_age_seconds = {max_age}
""")
    return cfg


def create_topics(bootstrap_a: str, bootstrap_b: str, partitions: int) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic

    started = time.monotonic()
    for bootstrap, topic in ((bootstrap_a, TOPIC), (bootstrap_b, TARGET)):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(120)
    return time.monotonic() - started


def group_name(g: int) -> str:
    return f"{GROUP_PREFIX}{g:04d}"


def downstream(upstream: int) -> int:
    """The synthetic mapping of bench_translate (a downstream gap every GAP_EVERY batches)."""
    return upstream + (upstream // RECORDS) // GAP_EVERY


def write_checkpoints(args: argparse.Namespace, cfg: Path) -> dict[str, Any]:
    """``--checkpoint-versions`` appends of every group-partition (the last one now) and the last-run file."""
    from drkit.config import load_config
    from drkit.core.checkpoints import Checkpoint
    from drkit.core.translate import Position
    from drkit.layout import StateLayout
    from drkit.store.checkpoints import CheckpointTable
    from drkit.store.runs import RunFiles, TranslatorRun

    config = load_config(str(cfg))
    layout = StateLayout(config.state_root())
    store = CheckpointTable(layout)
    rng = random.Random(args.seed)
    end = args.sync_batches * RECORDS  # upstream offsets 0..end-1 were mirrored on every partition
    versions = max(1, args.checkpoint_versions)
    now = datetime.now(UTC)
    started = time.monotonic()
    rows_written = 0
    for v in range(versions):
        at = now - timedelta(minutes=10 * (versions - 1 - v))
        rows = []
        for g in range(args.groups):
            for k in range(args.group_partitions):
                p = (g * args.group_partitions + k) % args.partitions
                # each version further on, as a consuming group moves
                c = min(end - 1, int(end * (0.5 + 0.5 * (v + rng.random()) / versions)))
                rows.append(Checkpoint(FLOW, group_name(g), TOPIC, TARGET, p, c, downstream(c), Position.MIRRORED))
        rows_written += store.append(rows, at=at)
    RunFiles(layout).write_last_run(
        FLOW, TranslatorRun(int(time.time() * 1000), 1.0, args.groups, args.groups * args.group_partitions, 0)
    )
    return {"rows": rows_written, "versions": versions, "seconds": round(time.monotonic() - started, 2)}


# -- one CLI process ------------------------------------------------------------------------------


def _proc_table() -> dict[int, int]:
    """pid -> parent pid of every process."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
            out[int(entry.name)] = int(stat.rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class TreeSampler(threading.Thread):
    """Samples the RSS of a process and its descendants until stopped."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.stop_event = threading.Event()
        self.peak_tree_kb = 0
        self.hwm_kb: dict[int, int] = {}
        self.names: dict[int, str] = {}

    def run(self) -> None:
        while not self.stop_event.is_set():
            table = _proc_table()
            tree, frontier = {self.pid}, [self.pid]
            while frontier:
                parent = frontier.pop()
                for pid, ppid in table.items():
                    if ppid == parent and pid not in tree:
                        tree.add(pid)
                        frontier.append(pid)
            total = 0
            for pid in tree:
                total += _status_kb(pid, "VmRSS:")
                self.hwm_kb[pid] = max(self.hwm_kb.get(pid, 0), _status_kb(pid, "VmHWM:"))
                with contextlib.suppress(OSError):  # read every time: spark-submit exec()s the JVM
                    self.names[pid] = Path(f"/proc/{pid}/comm").read_text().strip()
            self.peak_tree_kb = max(self.peak_tree_kb, total)
            self.stop_event.wait(self.every)


#: Process groups of the CLI processes and translators running now (killed if the benchmark is stopped).
CHILDREN: set[int] = set()


def _kill_children() -> None:
    for pid in list(CHILDREN):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        CHILDREN.discard(pid)


#: Set from --drkit-path: the checkout the CLI processes import drkit from (None: this one).
DRKIT_PATH: Path | None = None


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if DRKIT_PATH is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(DRKIT_PATH), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_cli(cfg: Path, argv: list[str], timeout: float, prefix: list[str] | None = None) -> dict[str, Any]:
    """One cold CLI process: wall clock from spawn to exit, exit code, peak memory, its JSON output."""
    cmd = [sys.executable, *(prefix or []), "-m", "drkit.cli.app", *argv[:1], "-c", str(cfg), *argv[1:], "-o", "json"]
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=cli_env(),
            cwd=cfg.parent,
            start_new_session=True,
        )
        sampler = TreeSampler(proc.pid)
        sampler.start()
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.daemon = True
        timer.start()
        try:
            _, wait_status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # stopped (SIGTERM, Ctrl-C): the CLI and its JVM go too
            timer.cancel()
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        seconds = time.perf_counter() - started
        CHILDREN.discard(proc.pid)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(wait_status)
        sampler.stop_event.set()
        sampler.join()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    # an operator command starts no JVM: any java process in its tree is a finding
    jvm_hwm = sum(kb for pid, kb in sampler.hwm_kb.items() if sampler.names.get(pid, "").startswith("java"))
    return {
        "seconds": round(seconds, 3),
        "exit_code": proc.returncode,
        "load1": round(load, 2),
        "python_maxrss_mb": round(usage.ru_maxrss / 1024, 1),
        "tree_peak_rss_mb": round(sampler.peak_tree_kb / 1024, 1),
        "jvm_peak_rss_mb": round(jvm_hwm / 1024, 1) if jvm_hwm else None,
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "stdout": stdout,
        "stderr_tail": stderr[-1500:],
    }


def digest(name: str, stdout: str) -> dict[str, Any]:
    """A few facts of the command's JSON output (enough to see it did the work)."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return {"json": False, "stdout_head": stdout[:300]}
    if isinstance(data, dict) and "error" in data:
        return {"json": True, "error": data["error"]}
    if name == "status":
        flows = data.get("flows", [])
        return {
            "json": True,
            "verdict": data.get("verdict"),
            "partitions": sum(len(f.get("partitions", [])) for f in flows),
            "groups": sum(len(f.get("groups", [])) for f in flows),
            "unreachable": sorted({line for f in flows for line in f.get("unreachable", [])}),
        }
    if name.startswith(("failover", "failback")):
        plan = data.get("plan", {})
        return {
            "json": True,
            "status": data.get("status"),
            "moves": len(plan.get("moves", [])),
            "refusals": len(plan.get("refusals", [])),
            "rpo_source_ends_from": (data.get("rpo") or {}).get("source_ends_from"),
            "verified_groups": len(data.get("verified", {})),
            "first_refusal": (plan.get("refusals") or [{}])[0].get("detail"),
        }
    if name == "offsets_group":
        return {"json": True, "partitions": sum(len(g.get("partitions", [])) for g in data)}
    if name == "history":
        return {"json": True, "operations": len(data)}
    return {"json": True}


def measure_phase(args: argparse.Namespace, cfg: Path, phase: str, commands: list[str]) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in commands}
    group = group_name(0)
    for rep in range(args.repeats):
        for name in commands:  # commands alternate within a repeat: the machine's noise spreads over all
            argv_template, expected = COMMANDS[name]
            argv = [a.replace("{group}", group) for a in argv_template]
            r = run_cli(cfg, argv, args.timeout)
            facts = digest(name, r.pop("stdout"))
            ok = r["exit_code"] in expected
            record = {"rep": rep + 1, **r, "expected_exit": sorted(expected), "ok": ok, "output": facts}
            if ok:
                record.pop("stderr_tail")
            runs[name].append(record)
            log(
                f"{phase} {name:24s} #{rep + 1}: {r['seconds']:7.2f} s exit {r['exit_code']}"
                f"{'' if ok else ' (UNEXPECTED)'} load {r['load1']} tree {r['tree_peak_rss_mb']} MB"
            )
    out: dict[str, Any] = {}
    for name in commands:
        rs = runs[name]
        out[name] = {
            "command": "drkit " + " ".join(COMMANDS[name][0]).replace("{group}", group),
            "median_seconds": round(statistics.median(r["seconds"] for r in rs), 2),
            "seconds": [r["seconds"] for r in rs],
            "all_ok": all(r["ok"] for r in rs),
            "exit_codes": [r["exit_code"] for r in rs],
            "load1": [r["load1"] for r in rs],
            "peak_tree_rss_mb": max(r["tree_peak_rss_mb"] for r in rs),
            "runs": rs,
        }
    return out


# -- clusters down (issue 26) ---------------------------------------------------------------------


def _take_away(kafka: Any, aliases: tuple[str, ...], how: str) -> None:
    for alias in aliases:
        if how == "down":
            kafka.stop(alias)  # SIGTERM, waited for: nothing listens on its port afterwards
        else:
            kafka.freeze(alias)


def _give_back(kafka: Any, aliases: tuple[str, ...], how: str) -> float:
    from drkit.errors import DrkitError

    started = time.monotonic()
    for alias in aliases:
        if how == "frozen":
            if kafka.thaw(alias):
                kafka.wait_ready(alias, time.monotonic() + 120)
            continue
        for attempt in (1, 2, 3):  # on a loaded machine a restarted broker has been seen to exit at once
            try:
                kafka.start(alias)
                break
            except DrkitError as exc:
                log(f"restarting {alias} failed (attempt {attempt}): {str(exc).splitlines()[0]}")
                if attempt == 3:
                    raise
                time.sleep(5)
    return round(time.monotonic() - started, 1)


def measure_outages(args: argparse.Namespace, cfg: Path, kafka: Any) -> dict[str, Any]:
    """Each outage of ``--outages`` in turn: the clusters taken away, every command of ``--outage-commands``
    ``--repeats`` times (commands alternating), the clusters given back (and ready) before the next."""
    group = group_name(0)
    commands = [c.strip() for c in args.outage_commands.split(",") if c.strip()]
    unknown = set(commands) - set(OUTAGE_COMMANDS)
    if unknown:
        raise SystemExit(f"unknown outage commands: {sorted(unknown)}; choose from {list(OUTAGE_COMMANDS)}")
    out: dict[str, Any] = {}
    for outage in [o.strip() for o in args.outages.split(",") if o.strip()]:
        aliases, how = OUTAGES[outage]
        expected = OUTAGE_EXPECTED["target" if "B" in aliases else "source"]
        load_before = [round(x, 2) for x in os.getloadavg()]
        log(f"clusters_down {outage}: {how} {', '.join(aliases)}")
        _take_away(kafka, aliases, how)
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in commands}
        try:
            for rep in range(args.repeats):
                for name in commands:
                    argv = [a.replace("{group}", group) for a in OUTAGE_COMMANDS[name]]
                    r = run_cli(cfg, argv, args.timeout)
                    facts = digest(name, r.pop("stdout"))
                    ok = r["exit_code"] == expected[name]
                    record = {"rep": rep + 1, **r, "expected_exit": expected[name], "ok": ok, "output": facts}
                    if ok:
                        record.pop("stderr_tail")
                    runs[name].append(record)
                    log(
                        f"{outage} {name:24s} #{rep + 1}: {r['seconds']:7.2f} s exit {r['exit_code']}"
                        f"{'' if ok else ' (UNEXPECTED)'} load {r['load1']}"
                    )
        finally:
            restored = _give_back(kafka, aliases, how)
        out[outage] = {
            "clusters": list(aliases),
            "how": how,
            "load_average_before": load_before,
            "restore_seconds": restored,
            "commands": {
                name: {
                    "command": "drkit " + " ".join(OUTAGE_COMMANDS[name]).replace("{group}", group),
                    "median_seconds": round(statistics.median(r["seconds"] for r in rs), 2),
                    "max_seconds": max(r["seconds"] for r in rs),
                    "seconds": [r["seconds"] for r in rs],
                    "expected_exit": expected[name],
                    "exit_codes": [r["exit_code"] for r in rs],
                    "all_ok": all(r["ok"] for r in rs),
                    "load1": [r["load1"] for r in rs],
                    "output": rs[-1]["output"],
                    "runs": rs,
                }
                for name, rs in runs.items()
            },
        }
    return out


# -- freshness ------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))  # nearest rank
    return round(ordered[k], 3)


def freshness(args: argparse.Namespace, cfg: Path, interval: str, bootstrap_a: str) -> dict[str, Any]:
    """Commits on A -> a checkpoint at or past the committed offset visible in the table."""
    from confluent_kafka import Consumer, TopicPartition

    from drkit.config import load_config
    from drkit.layout import StateLayout
    from drkit.store.checkpoints import CheckpointTable
    from drkit.store.runs import RunFiles

    config = load_config(str(cfg))
    layout = StateLayout(config.state_root())
    store = CheckpointTable(layout)
    runs_file = RunFiles(layout)
    group = f"bench-fresh-{interval}-{int(time.time())}"
    partitions = list(range(min(12, args.partitions)))
    end = args.sync_batches * RECORDS
    consumer = Consumer({"bootstrap.servers": bootstrap_a, "group.id": group, "enable.auto.commit": False})

    def commit(offsets: dict[int, int]) -> float:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
        return time.monotonic()

    def visible() -> dict[int, int]:
        return {r.checkpoint.partition: r.checkpoint.upstream_offset for r in store.latest(FLOW, [group])}

    base = end // 4
    commit({p: base for p in partitions})
    cmd = [sys.executable, "-m", "drkit.cli.app", "checkpoint", "-c", str(cfg), "--flow", FLOW]
    if interval != "default":
        cmd += ["--interval", interval]
    log_path = cfg.parent / f"translator-{interval}.log"
    before_start = runs_file.last_run(FLOW)
    started = time.monotonic()
    with open(log_path, "wb") as tlog:
        proc = subprocess.Popen(
            cmd,
            stdout=tlog,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=cli_env(),
            cwd=cfg.parent,
            start_new_session=True,
        )
    result: dict[str, Any] = {
        "interval": interval,
        "group": group,
        "commits": args.freshness_commits,
        "commit_every_seconds": args.commit_every,
        "poll_seconds": args.poll,
    }
    sampler = TreeSampler(proc.pid, every=1.0)
    sampler.start()
    try:
        # warm-up: the translator's first run (cold load of the syncs) must show the first commit
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if all(visible().get(p, -1) >= base for p in partitions):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"translator did not checkpoint the first commit (see {log_path})")
        result["first_checkpoint_after_start_seconds"] = round(time.monotonic() - started, 1)
        pending: list[tuple[int, int, float]] = []
        latencies: list[float] = []
        lock = threading.Lock()
        done = threading.Event()
        polls = [0, 0.0]

        def poller() -> None:
            while not done.is_set():
                t0 = time.monotonic()
                seen = visible()
                now = time.monotonic()
                polls[0] += 1
                polls[1] += now - t0
                with lock:
                    still = []
                    for p, o, t in pending:
                        if seen.get(p, -1) >= o:
                            latencies.append(now - t)
                        else:
                            still.append((p, o, t))
                    pending[:] = still
                done.wait(args.poll)

        thread = threading.Thread(target=poller, daemon=True)
        thread.start()
        offsets = dict.fromkeys(partitions, base)
        for i in range(args.freshness_commits):
            p = partitions[i % len(partitions)]
            offsets[p] += 1 + i % 7
            t = commit({p: offsets[p]})
            with lock:
                pending.append((p, offsets[p], t))
            time.sleep(args.commit_every)
        wait_until = time.monotonic() + 60
        while time.monotonic() < wait_until:
            with lock:
                if not pending:
                    break
            time.sleep(0.1)
        done.set()
        thread.join()
        last = runs_file.last_run(FLOW)
        result.update(
            {
                "seen": len(latencies),
                "never_seen_within_60s": len(pending),
                "p50_seconds": percentile(latencies, 50),
                "p99_seconds": percentile(latencies, 99),
                "max_seconds": round(max(latencies), 3) if latencies else None,
                "mean_seconds": round(statistics.mean(latencies), 3) if latencies else None,
                "poll_read_mean_seconds": round(polls[1] / polls[0], 3) if polls[0] else None,
                "translator_last_run_seconds": None if last is None or last == before_start else round(last.seconds, 3),
                "translator_peak_tree_rss_mb": round(sampler.peak_tree_kb / 1024, 1),
            }
        )
    finally:
        sampler.stop_event.set()
        consumer.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        CHILDREN.discard(proc.pid)
        result["translator_exit_code"] = proc.returncode
        result["translator_log_tail"] = log_path.read_text(errors="replace")[-300:]
    return result


# -- profile --------------------------------------------------------------------------------------


def profile(cfg: Path, name: str, timeout: float) -> dict[str, Any]:
    """One delta-rs CLI process under cProfile and -X importtime: where its time goes."""
    import pstats

    argv = [a.replace("{group}", group_name(0)) for a in COMMANDS[name][0]]
    prof = cfg.parent / f"profile-{name}-{int(time.time())}.pstats"
    r = run_cli(cfg, argv, timeout, prefix=["-m", "cProfile", "-o", str(prof)])
    out: dict[str, Any] = {"command": name, "seconds_under_profiler": r["seconds"], "exit_code": r["exit_code"]}
    out["pstats_file"] = str(prof)
    if prof.exists():
        stats = pstats.Stats(str(prof))
        rows = []
        for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            rows.append((ct, tt, nc, f"{_short(file)}:{line}({func})"))
        out["total_seconds"] = round(stats.total_tt, 2)  # type: ignore[attr-defined]
        out["top_cumulative"] = [
            {"function": f, "cumulative_s": round(ct, 3), "own_s": round(tt, 3), "calls": nc}
            for ct, tt, nc, f in sorted(rows, reverse=True)[:30]
        ]
        out["top_own"] = [
            {"function": f, "own_s": round(tt, 3), "cumulative_s": round(ct, 3), "calls": nc}
            for ct, tt, nc, f in sorted(rows, key=lambda x: -x[1])[:15]
        ]
    return out


def importtime(cfg: Path, name: str, timeout: float) -> dict[str, Any]:
    """The slowest top-level imports of one CLI process (``-X importtime``)."""
    argv = [a.replace("{group}", group_name(0)) for a in COMMANDS[name][0]]
    cmd = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "drkit.cli.app",
        *argv[:1],
        "-c",
        str(cfg),
        *argv[1:],
        "-o",
        "json",
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=cli_env(), cwd=cfg.parent, timeout=timeout, check=False
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        _self_us, cumulative_us, package = line.split(":", 1)[1].split("|")
        if not package.startswith("  "):  # top level: one space after the bar, deeper ones indented
            rows.append((int(cumulative_us.strip()), package.strip()))
    total = sum(us for us, _ in rows)
    return {
        "command": name,
        "top_level_imports_seconds": round(total / 1e6, 2),
        "slowest_imports": [{"module": m, "seconds": round(us / 1e6, 3)} for us, m in sorted(rows, reverse=True)[:12]],
    }


def profiles(args: argparse.Namespace, cfg: Path, phase: str) -> list[dict[str, Any]]:
    out = []
    for name in [n.strip() for n in args.profile.split(",") if n.strip()]:
        log(f"{phase}: profiling {name}")
        out.append({**profile(cfg, name, args.timeout), **importtime(cfg, name, args.timeout)})
    return out


def _short(file: str) -> str:
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file


# -- report ---------------------------------------------------------------------------------------


def baseline_medians(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The commands a report measured without ``maintain``: what a later run is compared with."""
    phase = report.get("phases", {}).get("without_maintain", {})
    return dict(phase.get("commands", {}))


def markdown(report: dict[str, Any], baseline: dict[str, dict[str, Any]] | None = None) -> str:
    """The report as Markdown tables: only measured figures, the baseline's read from its JSON report."""
    phases = [p for p in PHASES if p in report["phases"]]
    head = ["command", *(["baseline (its without maintain)"] if baseline is not None else [])]
    head += [p.replace("_", " ") for p in phases]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in COMMANDS:
        cells = [] if baseline is None else [_cell(baseline.get(name))]
        present = False
        for p in phases:
            m = report["phases"][p]["commands"].get(name)
            present = present or m is not None
            cells.append(_cell(m))
        if present:
            lines.append(f"| `{COMMANDS[name][0][0]} {' '.join(COMMANDS[name][0][1:])}` | " + " | ".join(cells) + " |")
    lines[2:] = [line.replace(f" --flow {FLOW}", "").replace("{group}", "G") for line in lines[2:]]
    imports = report.get("imports", {})
    if imports:
        lines.append(
            "\nimports (seconds of top-level imports, `-X importtime`): "
            + ", ".join(f"{name} {m['top_level_imports_seconds']}" for name, m in imports.items())
        )
    for f in report.get("freshness", []):
        if "p50_seconds" in f:
            lines.append(
                f"\nfreshness (interval {f['interval']}): p50 {f['p50_seconds']} s, p99 {f['p99_seconds']} s, "
                f"max {f['max_seconds']} s over {f['seen']} commits"
            )
    down = report.get("clusters_down", {})
    if down:
        outages = list(down)
        lines.append(
            "\n| command (clusters down: median, max; exit) | "
            + " | ".join(o.replace("_", " ") for o in outages)
            + " |"
        )
        lines.append("|" + " --- |" * (len(outages) + 1))
        for name, argv in OUTAGE_COMMANDS.items():
            cells = []
            for o in outages:
                m = down[o]["commands"].get(name)
                if m is None:
                    cells.append("")
                    continue
                flag = "" if m["all_ok"] else f" UNEXPECTED {m['exit_codes']}"
                cells.append(f"{m['median_seconds']} s, {m['max_seconds']} s; {m['expected_exit']}{flag}")
            label = " ".join(argv).replace(f" --flow {FLOW}", "").replace("{group}", "G")
            lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
        loads = ", ".join(f"{o} {down[o]['load_average_before'][0]}" for o in outages)
        lines.append(f"\n1-minute load average as each outage began: {loads}")
    return "\n".join(lines)


def _cell(m: dict[str, Any] | None) -> str:
    if m is None:
        return ""
    flag = "" if m["all_ok"] else f" (exit {m['exit_codes']})"
    return f"{m['median_seconds']} s, {m['peak_tree_rss_mb']:.0f} MB{flag}"


def targets(report: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase, data in report["phases"].items():
        for name, limit in TARGETS.items():
            m = data["commands"].get(name)
            if m is None:
                continue
            out[f"{phase}.{name}"] = {
                "target_seconds": limit,
                "median_seconds": m["median_seconds"],
                "met": m["all_ok"] and m["median_seconds"] < limit,
                "load1": m["load1"],
            }
    for outage, data in report.get("clusters_down", {}).items():
        if data["how"] != "down":
            continue  # a frozen cluster costs its probe timeout by design: measured, not a target
        for name, m in data["commands"].items():
            out[f"clusters_down.{outage}.{name}"] = {
                "target_seconds": OUTAGE_TARGET_SECONDS,
                "max_seconds": m["max_seconds"],
                "met": m["all_ok"] and m["max_seconds"] < OUTAGE_TARGET_SECONDS,
                "load1": m["load1"],
            }
    for f in report.get("freshness", []):
        if f.get("interval") == "default" and f.get("p99_seconds") is not None:
            out["freshness_default.p99"] = {
                "target_seconds": FRESHNESS_TARGET_P99,
                "p99_seconds": f["p99_seconds"],
                "met": f["p99_seconds"] < FRESHNESS_TARGET_P99 and not f["never_seen_within_60s"],
            }
    return out


def git_facts(repo: Path | None = None) -> dict[str, Any]:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], capture_output=True, text=True, cwd=repo or REPO, check=False).stdout

    return {
        "commit": git("rev-parse", "--short", "HEAD").strip(),
        "uncommitted_drkit_files": [line[3:] for line in git("status", "--short", "--", "drkit").splitlines()],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.internal:
        result = internal_maintain(args)
        print(json.dumps(result, default=str))
        return 0

    from drkit.localdev.clusters import LocalKafka

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
    global DRKIT_PATH
    DRKIT_PATH = args.drkit_path.resolve() if args.drkit_path else None
    tmp = tempfile.mkdtemp(prefix="drkit-bench-operator-")
    state = (args.state or Path(tmp)).resolve()
    state.mkdir(parents=True, exist_ok=True)
    kafka = LocalKafka(state / "kafka", base_port=args.base_port)
    started = time.monotonic()

    def dump() -> None:  # the report so far, after every step (a long run stopped early still tells)
        if args.out:
            args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")

    report: dict[str, Any] = {
        "bench": "operator",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_facts(),
        "cli_drkit": str(DRKIT_PATH or REPO),
        "cli_drkit_commit": git_facts(DRKIT_PATH)["commit"] if DRKIT_PATH else None,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        log(f"state {state}; starting clusters A, B on {args.base_port}/{args.base_port + 10}")
        t = time.monotonic()
        clusters = {c.alias: c.bootstrap_servers for c in kafka.up(["A", "B"])}
        clusters_seconds = time.monotonic() - t
        cfg = write_config(state, args.base_port, args.max_age)
        topics_seconds = create_topics(clusters["A"], clusters["B"], args.partitions)
        source_records = args.sync_batches * RECORDS
        target_records = downstream(source_records - 1) + 1
        log(f"producing {source_records:,} records per partition on A, {target_records:,} on B")
        produced = {
            "source_records_per_partition": source_records,
            "target_records_per_partition": target_records,
            "source_seconds": round(produce_records(clusters["A"], TOPIC, source_records, args.partitions), 1),
            "target_seconds": round(produce_records(clusters["B"], TARGET, target_records, args.partitions), 1),
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
        _kill_children()
        log("stopping clusters")
        kafka.down()
        report["total_seconds"] = round(time.monotonic() - started, 1)
        report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        if not args.keep_state and args.state is None:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    table = markdown(report, baseline)
    print(table, file=sys.stdout if args.markdown else sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
