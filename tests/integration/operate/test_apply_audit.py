"""The audit trail tells the truth about applies on real brokers: an apply interrupted by SIGINT mid-way
records exactly the partitions the broker holds, and a rerun completes it; a group the broker refuses
(a consumer joined after the plan) makes a partial apply; of two applies on one group at once, one is
refused and the group keeps the winner's offsets.

No Spark: the offset-syncs and checkpoints are written to the Delta tables as the mirror and the
translator write them, and the target topics hold the records those syncs describe.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from support.synced_flow import FLOW, synced_flow
from support.terminal import Terminal

from drkit.core.audit import OperationRecord, OperationStatus
from drkit.core.checkpoints import Checkpoint
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.service import Drkit
from drkit.store.checkpoints import CheckpointTable


def mirrored(clusters: dict[str, str], tmp_path: Path, prefix: str) -> tuple[Path, str]:
    """A synced flow (support.synced_flow) selecting the groups named ``prefix``...; the config file and the topic."""
    return synced_flow(clusters, tmp_path, prefix, f'groups = {{ include = ["{prefix}.*"] }}\n')


def checkpoint(tmp_path: Path, topic: str, offsets: dict[str, int], at: datetime | None = None) -> None:
    rows = [Checkpoint(FLOW, g, topic, f"A.{topic}", 0, o, o, Position.MIRRORED) for g, o in offsets.items()]
    CheckpointTable(StateLayout(tmp_path / "state")).append(rows, at)


def held(bootstrap: str, groups: list[str], topic: str) -> dict[str, int | None]:
    """Each group's committed offset on ``topic``/0 as the broker holds it (None: no commit)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = {g: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)])[g] for g in groups}
    out: dict[str, int | None] = {}
    for g, future in futures.items():
        parts = {(tp.topic, tp.partition): tp.offset for tp in future.result(30).topic_partitions or []}
        offset = parts.get((topic, 0))
        out[g] = offset if offset is not None and offset >= 0 else None
    return out


def cli(toml: Path, *args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "drkit.cli.app", *args, "-c", str(toml)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def latest(toml: Path) -> list[OperationRecord]:
    return list(Drkit.from_file(str(toml)).history(FLOW, 10).operations)


def test_an_apply_interrupted_mid_way_is_audited_exactly_and_a_rerun_completes_it(
    clusters: dict[str, str], tmp_path: Path
) -> None:
    toml, topic = mirrored(clusters, tmp_path, "intr")
    groups = [f"intr-{i:04d}" for i in range(600)]  # 12 batches of 50 groups: SIGINT lands between two
    planned = {g: 1 + i % 9 for i, g in enumerate(groups)}
    checkpoint(tmp_path, topic, planned)
    target = f"A.{topic}"
    proc = cli(toml, "failover", "--flow", FLOW, "--all-groups", "--apply", "--yes", "-o", "json")
    admin = AdminClient({"bootstrap.servers": clusters["B"]})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:  # the first batch's first group on the broker
        parts = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(groups[0])])[groups[0]].result(10)
        if any(tp.offset >= 0 for tp in parts.topic_partitions or []):
            os.kill(proc.pid, signal.SIGINT)
            break
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    answer = json.loads(out)
    assert answer["status"] == "interrupted"

    # The audit names exactly what the broker holds: each group committed at its planned offset or not at all.
    on_broker = held(clusters["B"], groups, target)
    [record] = [r for r in latest(toml) if r.id == answer["operation_id"]]
    assert record.status == "interrupted" and record.finished_at is not None
    committed = {g for g, parts in record.result["committed"].items() if parts == {f"{target}/0": planned[g]}}
    missing = set(record.result["not_committed"])
    assert committed == {g for g in groups if on_broker[g] == planned[g]}
    assert missing == {g for g in groups if on_broker[g] is None}
    assert committed and missing and committed | missing == set(groups)

    # The rerun commits only what is missing, reads back every partition, and says what it completes.
    result = Drkit.from_file(str(toml)).failover(FLOW, None, apply=True, confirm=lambda plan: True)
    assert result.status is OperationStatus.APPLIED and result.completes == answer["operation_id"]
    assert held(clusters["B"], groups, target) == planned
    assert result.verified == {g: {f"{target}/0": o} for g, o in planned.items()}
    assert sum(m.changes for m in result.plan.moves) == len(missing)


def test_a_group_refused_by_the_broker_makes_a_partial_apply(clusters: dict[str, str], tmp_path: Path) -> None:
    toml, topic = mirrored(clusters, tmp_path, "part")
    target, groups = f"A.{topic}", ["part-a", "part-b", "part-c"]
    checkpoint(tmp_path, topic, dict.fromkeys(groups, 6))
    consumer = Consumer({"bootstrap.servers": clusters["B"], "group.id": "part-b", "enable.auto.commit": False})

    def join_then_confirm(plan: object) -> bool:  # a consumer of part-b starts on B after the plan was made
        consumer.subscribe([target])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        return True

    try:
        result = Drkit.from_file(str(toml)).failover(FLOW, groups, apply=True, confirm=join_then_confirm)
        assert result.status is OperationStatus.PARTIAL
        assert result.outcome is not None and list(result.outcome.errors) == ["part-b"]
        assert "cluster B" in result.outcome.errors["part-b"]
        assert held(clusters["B"], groups, target) == {"part-a": 6, "part-b": None, "part-c": 6}
        [record] = [r for r in latest(toml) if r.id == result.operation_id]
        assert record.status == "partial"
        assert record.result["committed"] == {"part-a": {f"{target}/0": 6}, "part-c": {f"{target}/0": 6}}
        assert record.result["not_committed"] == {"part-b": {f"{target}/0": {"planned": 6, "held": None}}}
    finally:
        consumer.close()
    rerun = Drkit.from_file(str(toml)).failover(FLOW, groups, apply=True, confirm=lambda plan: True)
    assert rerun.status is OperationStatus.APPLIED and rerun.completes == result.operation_id
    assert held(clusters["B"], groups, target) == dict.fromkeys(groups, 6)


def test_of_two_concurrent_applies_on_a_group_one_is_refused_and_the_winner_holds(
    clusters: dict[str, str], tmp_path: Path
) -> None:
    toml, topic = mirrored(clusters, tmp_path, "race")
    target, group = f"A.{topic}", "race-g"
    now = datetime.now(UTC)
    checkpoint(tmp_path, topic, {group: 3}, now - timedelta(seconds=30))  # what --as-of finds
    checkpoint(tmp_path, topic, {group: 7}, now)
    as_of = (now - timedelta(seconds=20)).isoformat()
    common = ("failover", "--flow", FLOW, "--group", group, "--apply")
    terminals = {3: Terminal(), 7: Terminal()}  # the prompt needs a terminal (a pipe is refused)
    procs = {
        3: cli(toml, *common, "--as-of", as_of, stdin=terminals[3].fd),
        7: cli(toml, *common, stdin=terminals[7].fd),
    }
    # Both plans are made (each process waits at its prompt) before either is confirmed: then the second to
    # commit finds the first's intent (the lease) or the group moved under its plan; either way it is refused.
    seen = {k: "" for k in procs}

    def read(key: int) -> None:
        stream = procs[key].stdout
        assert stream is not None
        while "Apply" not in seen[key] and (chunk := stream.read(1)):
            seen[key] += chunk

    readers = [threading.Thread(target=read, args=(k,), daemon=True) for k in procs]
    for t in readers:
        t.start()
    for t in readers:
        t.join(60)
    assert all("Apply" in s for s in seen.values()), seen
    for terminal in terminals.values():
        terminal.type("y\n")
    results = {k: (p.communicate(timeout=60), p.returncode) for k, p in procs.items()}
    for terminal in terminals.values():
        terminal.close()
    codes = sorted(code for _, code in results.values())
    assert codes == [0, 3], results
    winner = next(k for k, (_, code) in results.items() if code == 0)
    (_, loser_err), _ = next(v for v in results.values() if v[1] == 3)
    assert held(clusters["B"], [group], target) == {group: winner}
    ops = latest(toml)
    applied = [r for r in ops if r.status == "applied"]
    assert len(applied) == 1 and [r.status for r in ops if r.id != applied[0].id] == ["refused"]
    [line] = [x for x in loser_err.splitlines() if x.startswith("error:")]
    assert "Traceback" not in loser_err and group in line and applied[0].id[:12] in line
