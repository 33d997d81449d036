"""``drkit status`` exits 21 (stale) and 23 (target diverged) on real brokers, as a monitor runs it.

Each case starts from a flow mirrored and checkpointed on the session's clusters that the same command
calls healthy (exit 0), changes one thing (the checkpoints' age limit; the target topic deleted), and reads
the exit code, the one line that says why and the JSON verdict of the CLI, in a process that cannot start a
JVM (status reads the tables and the brokers only).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from support.kafka_io import commit, create_topic, end_offsets, produce, unique
from support.processes import no_java_env

from drkit.config import DrkitConfig
from drkit.service import Drkit


def write_toml(path: Path, clusters: dict[str, str], state: Path, topic: str, max_age: float) -> Path:
    path.write_text(
        f"[state]\nroot = {json.dumps(str(state))}\n\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        f"[flows.checkpoint]\nmax_age_seconds = {max_age}\n[flows.heartbeats]\ninterval_seconds = 0\n"
    )
    return path


def status(toml: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", "status", "-c", str(toml), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=no_java_env(),
    )


def lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stdout.splitlines() if line.strip()]


def mirrored_flow(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> tuple[str, Path, Path]:
    """A topic of 2 partitions mirrored whole once and a group checkpointed: ``drkit status`` says healthy."""
    topic, group = unique("exit"), unique("exit-g")
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(30)])
    commit(clusters["A"], group, {(topic, 0): 4, (topic, 1): 6})
    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    service = Drkit(config, spark)
    service.mirror(None, once=True)
    service.translate(None, once=True)
    assert end_offsets(clusters["B"], f"A.{topic}") == {0: 15, 1: 15}
    toml = write_toml(tmp_path / "fresh.toml", clusters, config.state_root(), topic, 3600)
    healthy = status(toml)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert lines(healthy)[-1] == "healthy", healthy.stdout
    return topic, toml, Path(config.state_root())


def test_checkpoints_older_than_the_flows_limit_exit_21_stale(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    topic, _, state = mirrored_flow(clusters, spark, make_config, tmp_path)
    # The same state, read with a limit its last translator run cannot meet: it ran before the healthy status.
    strict = write_toml(tmp_path / "strict.toml", clusters, state, topic, 0.1)
    done = status(strict)
    assert done.returncode == 21, done.stdout + done.stderr
    out = lines(done)
    assert out[-1] == "stale", done.stdout
    [header] = [line for line in out if line.startswith("A->B: ")]
    assert header.startswith("A->B: stale (mirror not running, checkpoint not running, last checkpoint run "), header
    assert done.stderr.strip() == "", done.stderr
    as_json = status(strict, "-o", "json")
    assert as_json.returncode == 21
    report = json.loads(as_json.stdout)
    assert report["verdict"] == "stale" and [f["verdict"] for f in report["flows"]] == ["stale"], report
    assert report["flows"][0]["checkpoint_last_run_age_seconds"] > 0.1, report


def test_a_deleted_target_topic_exits_23_target_diverged(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    topic, toml, _state = mirrored_flow(clusters, spark, make_config, tmp_path)
    target = f"A.{topic}"
    admin = AdminClient({"bootstrap.servers": clusters["B"]})
    admin.delete_topics([target])[target].result(30)
    deadline = time.monotonic() + 30
    while target in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{target} still listed 30 s after its deletion"
        time.sleep(0.2)

    done = status(toml)
    assert done.returncode == 23, done.stdout + done.stderr
    out = lines(done)
    assert out[-1] == "target diverged", done.stdout
    [problem] = [line for line in out if target in line]
    assert problem.startswith(
        f"A->B: target topic {target} on B does not exist (partition 0: missing, synced up to 14; partition 1: "
        "missing, synced up to 14): it was deleted or truncated, and the offset-syncs of flow A->B"
    ), problem
    assert "drkit does not recreate it" in problem and f"exclude {topic}" in problem, problem
    assert done.stderr.strip() == "", done.stderr
    as_json = status(toml, "-o", "json")
    assert as_json.returncode == 23
    report = json.loads(as_json.stdout)
    assert report["verdict"] == "target diverged", report
    [flow] = report["flows"]
    assert {(d["kind"], d["partition"]) for d in flow["target_divergences"]} == {
        ("topic missing", 0),
        ("topic missing", 1),
    }, flow["target_divergences"]
