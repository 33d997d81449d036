"""status, offsets, metrics and the translator's freshness, against the session clusters."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.kafka_io import commit, create_topic, produce, unique
from support.processes import no_java_env

from drkit.config import DrkitConfig
from drkit.service import Drkit
from drkit.store.checkpoints import CheckpointTable
from drkit.translator.job import TranslatorRunner


def status(service: Drkit, flow: str | None) -> tuple[list[dict[str, Any]], str]:
    """The facade's status as plain data: (flows, overall verdict)."""
    report = service.status(flow).as_dict()
    return report["flows"], report["verdict"]


def group_offsets(service: Drkit, flow: str, group: str) -> list[dict[str, Any]]:
    partitions: list[dict[str, Any]] = service.offsets(group, flow).groups[0].as_dict()["partitions"]
    return partitions


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_status_offsets_and_metrics(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    topic, group = unique("st"), unique("stg")
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(100)])
    port = free_port()
    flows = [{"source": "A", "target": "B", "topics": {"include": [topic]}, "groups": {"include": [group]}}]
    config = make_config(flows, metrics={"port": port})
    service = Drkit(config, spark)
    service.mirror(None, once=True)
    commit(clusters["A"], group, {(topic, 0): 20, (topic, 1): 50})
    service.translate(None, once=True)

    flows_status, verdict = status(service, None)
    assert verdict == "healthy", flows_status
    assert flows_status[0]["lag_records"] == 0
    assert {(p["partition"], p["mirrored_up_to"]) for p in flows_status[0]["partitions"]} == {(0, 50), (1, 50)}
    assert [g["group"] for g in flows_status[0]["groups"]] == [group]
    assert flows_status[0]["groups"][0]["reread_records"] == 0  # checkpointed where it is
    assert flows_status[0]["groups"][0]["readiness"] == "exact"
    assert flows_status[0]["groups"][0]["at_risk_records"] == 0  # everything mirrored

    # The group commits past its checkpoint: a failover now would re-read exactly that.
    commit(clusters["A"], group, {(topic, 0): 26, (topic, 1): 50})
    flows_status, _ = status(service, None)
    assert flows_status[0]["groups"][0]["reread_records"] == 6

    produce(clusters["A"], topic, [{"partition": 1, "value": b"new"} for _ in range(7)])
    flows_status, verdict = status(service, None)
    assert verdict == "lagging" and flows_status[0]["lag_records"] == 7
    # Unread by the group (at 50 on partition 1) and not mirrored: lost to it if A died now.
    assert flows_status[0]["groups"][0]["at_risk_records"] == 7
    lagging = next(p for p in flows_status[0]["partitions"] if p["partition"] == 1)
    assert lagging["lag_records"] == 7 and lagging["lag_seconds"] is not None and lagging["lag_seconds"] >= 0

    rows = {r["partition"]: r for r in group_offsets(service, "A->B", group)}
    assert rows[0]["source_committed"] == 26 and rows[0]["translated_now"] == 20
    assert rows[1]["translated_now"] == 50 and rows[1]["target_group_offset"] is None

    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    records = [line for line in body.splitlines() if line.startswith('drkit_mirror_records_total{flow="A->B"}')]
    assert records and float(records[0].split()[-1]) >= 100
    assert f'drkit_mirror_lag_records{{flow="A->B",partition="0",topic="{topic}"}} 0.0' in body
    assert 'drkit_checkpoint_runs_total{flow="A->B"}' in body

    # The source unreachable: status says so (the same state, a dead address for A).
    dead = make_config(
        flows, clusters={"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": clusters["B"]}}
    )
    dead_status, dead_verdict = status(Drkit(dead, spark), None)
    assert dead_verdict == "source unreachable"
    assert dead_status[0]["groups"][0]["reread_records"] is None  # unknown, never 0
    assert dead_status[0]["groups"][0]["at_risk_records"] is None
    assert dead_status[0]["groups"][0]["readiness"] == "exact"  # the syncs and the checkpoint still tell

    # The CLI's exit code tells monitors the verdict (20: lagging).
    toml = tmp_path / "status.toml"
    toml.write_text(
        f"[state]\nroot = {json.dumps(str(config.state_root()))}\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", "status", "-c", str(toml), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=no_java_env(),
    )  # no JVM can start
    assert proc.returncode == 20, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["verdict"] == "lagging"


def test_checkpoint_freshness_with_interval(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic, group = unique("fresh"), unique("freshg")
    create_topic(clusters["A"], topic, 1)
    produce(clusters["A"], topic, [{"value": f"v{i}".encode()} for i in range(30)])
    config = make_config(
        [{"source": "A", "target": "B", "topics": {"include": [topic]}, "groups": {"include": [group]}}]
    )
    service = Drkit(config, spark)
    service.mirror(None, once=True)
    runner = TranslatorRunner(service.translator_context(), config.flows)
    thread = threading.Thread(target=runner.run, args=(False, 1.0), daemon=True)
    thread.start()
    store = CheckpointTable(service.layout)
    try:
        time.sleep(2)
        commit(clusters["A"], group, {(topic, 0): 17})
        committed_at = time.monotonic()
        translated = None
        while time.monotonic() - committed_at < 120:
            rows = store.latest("A->B", [group])
            if rows and rows[0].checkpoint.upstream_offset == 17:
                translated = rows[0].checkpoint.downstream_offset
                break
            time.sleep(0.2)
        lag = time.monotonic() - committed_at
    finally:
        runner.stopped.set()
        thread.join(60)
    assert translated == 17, "the commit was never translated"
    print(f"freshness: commit translated {lag:.1f}s after it was made (interval 1s)")
