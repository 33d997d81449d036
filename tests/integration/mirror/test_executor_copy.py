"""The executor copy path on real brokers and local Spark (``driver_copy_max_records = 0`` forces it): copy
tasks read whole partitions with their own consumer and produce them; record by record, every copy and
every sync is exact, a task retried after a failure leaves 0 missing and syncs of its successful attempt
only, and records removed from the source fail the batch or are skipped as the flow says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import faulty_mirror
from support.kafka_io import create_topic, delete_records, produce, read_all, unique
from support.mirror_checks import assert_exact_copy, audit_syncs, committed_batches, partition_syncs

from drkit.config import DrkitConfig
from drkit.core.batch import BatchPlan, plan_batch
from drkit.errors import MirrorError
from drkit.service import Drkit

EXECUTORS = {"driver_copy_max_records": 0}


def records(n: int, partitions: int) -> list[dict[str, Any]]:
    now = int(time.time() * 1000)
    return [
        {"partition": i % partitions, "key": b"k%d" % i, "value": b"v%d-" % i + b"x" * (i % 50), "timestamp": now + i}
        for i in range(n)
    ]


def test_copy_tasks_copy_every_record_and_every_sync_exactly(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique("exec")
    create_topic(clusters["A"], topic, 12)
    produce(clusters["A"], topic, records(6_000, 12))
    flow = {"source": "A", "target": "B", "topics": {"include": [topic]}}
    config = make_config([{**flow, "mirror": {**EXECUTORS, "max_offsets_per_trigger": 2_500}}])
    with caplog.at_level("INFO", logger="drkit.mirror.job"):
        [summary] = Drkit(config, spark).mirror("A->B", once=True)
    assert summary.records == 6_000 and summary.batches == 3
    # Local mode: Spark's one executor is the driver's JVM, but no batch was copied by the driver's process.
    assert summary.copy_executors == frozenset({"driver"}) and summary.driver_batches == 0
    lines = [r.getMessage() for r in caplog.records if "mirrored" in r.getMessage()]
    pids = {int(p) for line in lines for p in re.findall(r"\(pid (\d+)", line)}
    assert len(lines) == 3 and all("copied by 2 task(s)" in line for line in lines), lines
    assert pids and os.getpid() not in pids, lines  # Spark's Python workers, not this process
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert_exact_copy(source, target)
    audit = audit_syncs(partition_syncs(spark, config, topic), source, target)
    assert audit.described == len(target) == 6_000 and audit.orphans == 0


def test_a_copy_task_retried_after_a_failure_leaves_nothing_missing_and_syncs_of_its_last_attempt(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    """A separate process (its own Spark, ``local[2,2]``: local mode retries a task only with F > 1) whose
    first copy task fails after copying its records; Spark runs it again; the batch commits."""
    topic = unique("retried")
    create_topic(clusters["A"], topic, 4)
    total = 4_000
    produce(clusters["A"], topic, records(total, 4))
    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    toml = tmp_path / "drkit.toml"
    toml.write_text(
        f'[state]\nroot = {json.dumps(str(config.state_root()))}\n\n[spark]\nmaster = "local[2,2]"\n\n'
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        "[flows.mirror]\ndriver_copy_max_records = 0\n[flows.heartbeats]\ninterval_seconds = 0\n"
    )
    marker = tmp_path / "failed-once"
    env = {**os.environ, "DRKIT_SPARK_LOG_LEVEL": "ERROR"}
    done = subprocess.run(
        faulty_mirror.command("--verbose", "mirror", "--once", "-c", str(toml), fail_copy_task_once=marker),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert marker.exists(), "no copy task failed: the retry was not exercised"
    assert committed_batches(config) == ["0"]
    # The batch line names the sites of the attempts that succeeded: the retried task's is its second.
    assert re.search(r"copied by 2 task\(s\): .*attempt 1\)", output), output[-3000:]
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    audit = audit_syncs(partition_syncs(spark, config, topic), source, target, exact=False)
    # Every source record described once by a copy of the attempt that succeeded: 0 missing; the failed
    # attempt's copies are on the target too, orphans without a sync.
    assert audit.described == len(source) == total
    assert audit.orphans == audit.duplicates == len(target) - total > 0
    print(f"retried copy task: {total} records, 0 missing, {audit.duplicates} orphans of the failed attempt")


def deleting_after_planning(monkeypatch: pytest.MonkeyPatch, bootstrap: str, topic: str, before: int) -> None:
    """delete-records up to ``before`` right after the driver planned the batch, before its tasks read it."""
    real = plan_batch

    def plan(*args: Any, **kwargs: Any) -> BatchPlan:
        out = real(*args, **kwargs)
        delete_records(bootstrap, topic, before)
        return replace(out)

    monkeypatch.setattr("drkit.mirror.job.plan_batch", plan)


def test_records_removed_before_a_task_read_them_fail_the_batch_in_one_line(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique("exec-removed")
    create_topic(clusters["A"], topic, 1)
    produce(clusters["A"], topic, [{"value": b"v%d" % i} for i in range(100)])
    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}, "mirror": EXECUTORS}])
    deleting_after_planning(monkeypatch, clusters["A"], topic, 60)
    with pytest.raises(MirrorError) as raised:
        Drkit(config, spark).mirror(None, once=True)
    message = str(raised.value)
    assert "\n" not in message and "removed from the source before they were mirrored" in message, message
    assert f"{topic}/0" in message, message
    assert committed_batches(config) == [] and partition_syncs(spark, config, topic) == {}


def test_records_removed_before_a_task_read_them_are_skipped_when_the_loss_is_accepted(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique("exec-skipped")
    create_topic(clusters["A"], topic, 1)
    produce(clusters["A"], topic, [{"value": b"v%d" % i} for i in range(100)])
    mirror = {**EXECUTORS, "fail_on_data_loss": False}
    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}, "mirror": mirror}])
    deleting_after_planning(monkeypatch, clusters["A"], topic, 60)
    [summary] = Drkit(config, spark).mirror(None, once=True)
    assert summary.records == 40 and summary.driver_batches == 0
    target = read_all(clusters["B"], f"A.{topic}")
    assert [r.value for r in target] == [b"v%d" % i for i in range(60, 100)]
    pairs = [pair for rng in partition_syncs(spark, config, topic).get(0, []) for pair in rng.pairs()]
    assert sorted(u for u, _ in pairs) == list(range(60, 100))
    by_offset = {r.offset: r for r in target}
    assert all(by_offset[d].origin("A") == u for u, d in pairs)
