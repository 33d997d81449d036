"""Operator commands with real brokers gone: stopped (connections refused) and frozen (SIGSTOP: accepted,
never answered). Each command, run as the operator runs it (a CLI process, ``-o json``), gives the verdict
and exit code of drkit.core.reach and drkit.core.status and names the cluster and how it failed.

No timing is asserted here (the machine is shared); python -m scripts.bench.operator --phases clusters_down
measures how fast these answers come (docs/performance.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kafka_io import commit, committed_on, create_topic, produce
from support.ports import OUTAGE_ANSWERS
from support.processes import no_java_env

from drkit.config import load_config
from drkit.core.checkpoints import Checkpoint
from drkit.core.offsets import SyncRange
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.localdev.clusters import LocalKafka
from drkit.store.checkpoints import CheckpointTable
from drkit.store.offset_syncs import SyncTable, range_table
from drkit.store.runs import RunFiles, TranslatorRun

TOPIC, TARGET, GROUP, RECORDS = "orders", "A.orders", "billing", 10
COMMITTED = {0: 5, 1: 7}
#: The copies start this far into each target partition (records that were there before the mirror): a
#: failover that committed the source's offsets unchanged would be seen.
SHIFT = 3


@pytest.fixture(scope="module")
def gone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, Path]]:
    """Clusters A and B of their own (this module stops and freezes them), a flow A->B whose tables say
    ``orders`` is mirrored whole and ``billing`` is checkpointed: every command has its facts."""
    home = tmp_path_factory.mktemp("outage-answers")
    kafka = LocalKafka(home / "kafka", base_port=OUTAGE_ANSWERS.base, heap="384m")
    try:
        clusters = {c.alias: c.bootstrap_servers for c in kafka.up(["A", "B"])}
        for alias, topic, count in (("A", TOPIC, RECORDS), ("B", TARGET, SHIFT + RECORDS)):
            create_topic(clusters[alias], topic, 2)
            produce(clusters[alias], topic, [{"partition": i % 2, "value": b"v"} for i in range(2 * count)])
        commit(clusters["A"], GROUP, {(TOPIC, p): o for p, o in COMMITTED.items()})
        config = home / "drkit.toml"
        config.write_text(
            f'[state]\nroot = "{home / "state"}"\n'
            + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n' for a, bs in clusters.items())
            + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = ["{TOPIC}"] }}\n'
            + "[flows.checkpoint]\nmax_age_seconds = 3600\n[flows.heartbeats]\ninterval_seconds = 0\n"
        )
        layout = StateLayout(load_config(str(config)).state_root())
        syncs, checkpoints = SyncTable(layout), CheckpointTable(layout)
        syncs.ensure()
        checkpoints.ensure()
        whole = SyncRange(0, RECORDS - 1, SHIFT, SHIFT + RECORDS - 1)
        syncs.write("A->B", "outage-stream", 0, range_table([(TOPIC, TARGET, p, whole) for p in (0, 1)]))
        checkpoints.append(
            [Checkpoint("A->B", GROUP, TOPIC, TARGET, p, o, o + SHIFT, Position.MIRRORED) for p, o in COMMITTED.items()]
        )
        RunFiles(layout).write_last_run("A->B", TranslatorRun(int(time.time() * 1000), 0.1, 1, 2, 0))
        yield kafka, config
    finally:
        kafka.down()


def cli(config: Path, *argv: str) -> tuple[int, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", *argv[:1], "-c", str(config), *argv[1:], "-o", "json"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**no_java_env(), "PYTHONFAULTHANDLER": "1"},  # a crash prints every thread's stack
    )
    # A process killed by a signal after its answer (a SIGSEGV in the interpreter's teardown, once) is a failure
    # of its own, whatever it printed.
    assert proc.returncode >= 0, f"drkit {argv[0]} died of signal {-proc.returncode}: {proc.stderr[-3000:]}"
    return proc.returncode, json.loads(proc.stdout)


def commands(config: Path) -> dict[str, tuple[int, Any]]:
    return {
        "status": cli(config, "status"),
        "offsets": cli(config, "offsets", "--group", GROUP),
        "failover": cli(config, "failover", "--flow", "A->B", "--group", GROUP, "--apply", "--yes"),
        "failback": cli(config, "failback", "--flow", "A->B", "--group", GROUP),
    }


def unreachable(status: dict[str, Any]) -> list[str]:
    [flow] = status["flows"]
    return list(flow["unreachable"])


def test_source_stopped(gone: tuple[LocalKafka, Path]) -> None:
    kafka, config = gone
    bootstrap = load_config(str(config)).clusters["B"].bootstrap_servers
    assert committed_on(bootstrap, GROUP, TARGET) == {}, "the group is on B before the failover"
    kafka.stop("A")
    try:
        got = commands(config)
    finally:
        kafka.start("A")
    code, status = got["status"]
    assert (code, status["verdict"]) == (22, "source unreachable")
    assert unreachable(status) == [unreachable(status)[0]] and "cluster A" in unreachable(status)[0]
    assert "refused the connection" in unreachable(status)[0]
    assert status["flows"][0]["target_reachable"] is True
    code, offsets = got["offsets"]
    assert code == 0
    assert [r["source_committed"] for r in offsets[0]["partitions"]] == [None, None]  # unknown, not 0
    assert [r["checkpointed_offset"] for r in offsets[0]["partitions"]] == [5, 7]
    assert offsets[0]["unreachable"][0].startswith("cluster A is unreachable")
    code, failover = got["failover"]
    assert (code, failover["status"]) == (0, "applied"), failover
    assert failover["rpo"]["source_reachable"] is False
    # "applied" read back by a consumer of B: each source offset at its place in B's copy, SHIFT further on.
    assert committed_on(bootstrap, GROUP, TARGET) == {p: o + SHIFT for p, o in COMMITTED.items()}
    code, failback = got["failback"]
    assert code == 4 and failback["error"].startswith("failback A->B: cluster A is unreachable"), failback
    assert "cluster B" not in failback["error"]


def test_target_stopped(gone: tuple[LocalKafka, Path]) -> None:
    kafka, config = gone
    bootstrap = load_config(str(config)).clusters["B"].bootstrap_servers
    before = committed_on(bootstrap, GROUP, TARGET)
    kafka.stop("B")
    try:
        got = commands(config)
    finally:
        kafka.start("B")
    assert committed_on(bootstrap, GROUP, TARGET) == before, "a failover with B stopped changed B"
    code, status = got["status"]
    assert (code, status["verdict"]) == (25, "target unreachable")
    assert len(unreachable(status)) == 1 and unreachable(status)[0].startswith("cluster B is unreachable")
    assert status["flows"][0]["source_reachable"] is True
    for name in ("offsets", "failover", "failback"):
        code, out = got[name]
        assert code == 4, (name, out)
        assert "cluster B is unreachable: every bootstrap server refused the connection" in out["error"], out
        assert "cluster A" not in out["error"], out


def test_both_stopped(gone: tuple[LocalKafka, Path]) -> None:
    kafka, config = gone
    kafka.stop("A")
    kafka.stop("B")
    try:
        got = commands(config)
    finally:
        kafka.start("A")
        kafka.start("B")
    code, status = got["status"]
    assert (code, status["verdict"]) == (25, "target unreachable")
    assert [line.split(" is ")[0] for line in unreachable(status)] == ["cluster A", "cluster B"]
    assert status["flows"][0]["source_reachable"] is False
    assert got["failover"][0] == 4 and "cluster A" not in got["failover"][1]["error"]
    code, failback = got["failback"]
    assert code == 4
    assert "cluster A is unreachable" in failback["error"] and "cluster B is unreachable" in failback["error"]


@pytest.mark.parametrize(
    ("alias", "verdict", "code"), [("A", "source unreachable", 22), ("B", "target unreachable", 25)]
)
def test_a_frozen_broker_is_told_as_silent_not_as_refusing(
    gone: tuple[LocalKafka, Path], alias: str, verdict: str, code: int
) -> None:
    kafka, config = gone
    kafka.freeze(alias)
    try:
        status = cli(config, "status")
        failover = cli(config, "failover", "--flow", "A->B", "--group", GROUP)
    finally:
        kafka.thaw(alias)
        kafka.wait_ready(alias, time.monotonic() + 120)
    assert (status[0], status[1]["verdict"]) == (code, verdict)
    [line] = unreachable(status[1])
    assert line.startswith(f"cluster {alias} is unreachable: it did not answer within 2 s"), line
    # failover does without a silent source (its RPO from the last observation), not without a silent target
    if alias == "A":
        assert failover[0] == 0 and failover[1]["rpo"]["source_reachable"] is False, failover
    else:
        assert failover[0] == 4 and "did not answer within" in failover[1]["error"], failover
