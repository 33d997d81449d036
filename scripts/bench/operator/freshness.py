"""Checkpoint freshness: ``drkit checkpoint`` runs as a process; a group commits offsets on A one every
``--commit-every`` seconds; a poller reads the checkpoint table every ``--poll`` seconds and records, per commit,
the time until a checkpoint at or past that offset is visible."""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from scripts.bench.lib.memory import TreeMemory
from scripts.bench.lib.stats import nearest_rank
from scripts.bench.operator.cli import CHILDREN, cli_env
from scripts.bench.operator.fixture import FLOW, RECORDS, TOPIC


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
    memory = TreeMemory(proc.pid, 1.0).start()
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
                "p50_seconds": nearest_rank(latencies, 0.50),
                "p99_seconds": nearest_rank(latencies, 0.99),
                "max_seconds": round(max(latencies), 3) if latencies else None,
                "mean_seconds": round(statistics.mean(latencies), 3) if latencies else None,
                "poll_read_mean_seconds": round(polls[1] / polls[0], 3) if polls[0] else None,
                "translator_last_run_seconds": None if last is None or last == before_start else round(last.seconds, 3),
                "translator_peak_tree_rss_mb": memory.peak_rss_mb(),
            }
        )
    finally:
        memory.stop()
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
