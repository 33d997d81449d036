"""Real commands, run as an operator runs them: their output is drkit's own lines, and the rest is on file.

``drkit mirror --once`` starts a Spark JVM (its launcher's notice, log4j's warnings): none of it on the terminal,
all of it in the state root's ``logs/spark.log``. With a cluster gone (an address nobody listens on), ``drkit
status`` and ``drkit failover`` answer; with the target gone, status's reader of the newest heartbeat (a
consumer) makes librdkafka complain of
refused connections at each reconnect: none of its lines (``%3|...|FAIL|``, ``FAIL [rdkafka#...]``) on the
terminal, each kind of line once in ``logs/libraries.log`` (the repeats counted). ``--verbose`` and
``DRKIT_LOG=debug`` put it all on the terminal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.kafka_io import commit, create_topic, produce, unique

from drkit.layout import StateLayout

#: Nothing listens on port 1: connections are refused at once.
NOBODY = "127.0.0.1:1"

#: Lines that are not drkit's: librdkafka's (its own stderr format, or its log line), the JVM's launcher, log4j's
#: (Spark's pattern and drkit's quiet one), Spark's banner, Java and Python traces, py4j.
NOT_DRKITS = re.compile(
    r"^%\d\|"
    r"|\[rdkafka#|\bFAIL \[|BGQUEUE|GETPID"
    r"|^WARNING: Using incubator modules"
    r"|^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR)\b"
    r"|Using Spark's default log4j profile|Setting default log level|To adjust logging level"
    r"|NativeCodeLoader|log4j"
    r"|^\s+at [\w$.]+\(|^Caused by: |Exception in thread|^Traceback \(most recent call last\)"
    r"|py4j",
    re.MULTILINE,
)


def drkit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
    return subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**environ, **(env or {})},
    )


def foreign(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of stdout and stderr that are not drkit's."""
    return [ln for ln in (done.stdout + done.stderr).splitlines() if NOT_DRKITS.search(ln)]


def write_config(path: Path, root: Path, a: str, b: str, topic: str) -> Path:
    path.write_text(
        f'[state]\nroot = {json.dumps(str(root))}\n\n[spark]\nmaster = "local[1]"\n\n'
        f'[clusters.A]\nbootstrap_servers = "{a}"\n\n[clusters.B]\nbootstrap_servers = "{b}"\n\n'
        f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        'groups = { include = [".*"] }\n'
    )
    return path


@pytest.fixture(scope="module")
def world(clusters: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A flow mirrored once and checkpointed (its commands' output kept), then a config whose source is gone."""
    tmp = tmp_path_factory.mktemp("quiet")
    topic, group = unique("quiet"), unique("quiet-app")
    create_topic(clusters["A"], topic, partitions=2)
    produce(clusters["A"], topic, [{"value": f"v{i}".encode(), "partition": i % 2} for i in range(40)])
    commit(clusters["A"], group, {(topic, 0): 10, (topic, 1): 12})
    root = tmp / "state"
    up = write_config(tmp / "up.toml", root, clusters["A"], clusters["B"], topic)
    source_down = write_config(tmp / "source-down.toml", root, NOBODY, clusters["B"], topic)
    target_down = write_config(tmp / "target-down.toml", root, clusters["A"], NOBODY, topic)
    mirror = drkit("mirror", "-c", str(up), "--flow", "A->B", "--once")
    checkpoint = drkit("checkpoint", "-c", str(up), "--flow", "A->B", "--once")
    return {
        "up": up,
        "source_down": source_down,
        "target_down": target_down,
        "group": group,
        "layout": StateLayout(root),
        "mirror": mirror,
        "checkpoint": checkpoint,
    }


def test_the_mirrors_spark_output_is_in_the_state_roots_spark_log(world: dict[str, object]) -> None:
    mirror = world["mirror"]
    assert isinstance(mirror, subprocess.CompletedProcess)
    assert mirror.returncode == 0, mirror.stderr[-3000:]
    assert foreign(mirror) == [], mirror.stdout + mirror.stderr
    assert "A->B" in mirror.stdout and mirror.stderr.strip() == ""
    layout = world["layout"]
    assert isinstance(layout, StateLayout)
    log = layout.spark_log.read_text()
    assert "Spark driver JVM starting" in log
    # What the JVM printed: the launcher's notice (JDK 17+) and log4j's start-up warning (no native Hadoop).
    assert "WARNING: Using incubator modules" in log or " WARN NativeCodeLoader" in log, log[-3000:]
    assert "Using Spark's default log4j profile" not in log  # drkit's quiet profile, no banner


def test_with_a_cluster_gone_status_and_failover_print_drkits_lines_only(world: dict[str, object]) -> None:
    checkpoint = world["checkpoint"]
    assert isinstance(checkpoint, subprocess.CompletedProcess)
    assert checkpoint.returncode == 0, checkpoint.stderr[-3000:]
    assert foreign(checkpoint) == []
    source_down, target_down, group = str(world["source_down"]), str(world["target_down"]), str(world["group"])
    layout = world["layout"]
    assert isinstance(layout, StateLayout)

    status = drkit("status", "-c", source_down)
    assert status.returncode == 22, status.stdout + status.stderr  # source unreachable
    assert foreign(status) == [], status.stdout + status.stderr
    failover = drkit("failover", "-c", source_down, "--flow", "A->B", "--group", group)
    assert failover.returncode == 0, failover.stdout + failover.stderr  # a dry run, from the checkpoints
    assert foreign(failover) == [], failover.stdout + failover.stderr
    assert group in failover.stdout

    before = layout.library_log.read_text() if layout.library_log.exists() else ""
    status = drkit("status", "-c", target_down)
    assert status.returncode == 25, status.stdout + status.stderr  # target unreachable
    assert foreign(status) == [], status.stdout + status.stderr
    failover = drkit("failover", "-c", target_down, "--flow", "A->B", "--group", group, "--apply", "--yes")
    assert failover.returncode == 4, failover.stdout + failover.stderr
    errors = [ln for ln in failover.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "cluster B" in errors[0], failover.stderr
    assert foreign(failover) == [], failover.stdout + failover.stderr

    # librdkafka did complain: in the library log, the first of each kind of line, then how many more came.
    written = layout.library_log.read_text()[len(before) :].splitlines()
    refused = [ln for ln in written if " drkit.kafka.B: " in ln and "Connection refused" in ln]
    firsts = [ln for ln in refused if " ERROR drkit.kafka.B: FAIL [rdkafka#" in ln]
    assert firsts, written
    assert len(firsts) <= 2, refused  # once per client of B that was polled (status, failover), not per reconnect
    assert all(ln in firsts or "more like" in ln for ln in refused), refused


def test_verbose_and_drkit_log_debug_show_the_libraries_and_the_jvm(world: dict[str, object]) -> None:
    status = drkit("--verbose", "status", "-c", str(world["target_down"]))
    assert status.returncode == 25
    assert re.search(r"^ERROR drkit\.kafka\.B: FAIL \[rdkafka#.*Connection refused", status.stderr, re.MULTILINE), (
        status.stderr[-3000:]
    )

    mirror = drkit("mirror", "-c", str(world["up"]), "--flow", "A->B", "--once", env={"DRKIT_LOG": "debug"})
    assert mirror.returncode == 0, mirror.stderr[-3000:]
    for line in ("Using Spark's default log4j profile", 'Setting default log level to "WARN"'):
        assert line in mirror.stderr, mirror.stderr[-3000:]
    assert re.search(r"^INFO drkit\.mirror\.job: flow A->B: batch \d+ ", mirror.stderr, re.MULTILINE), mirror.stderr
