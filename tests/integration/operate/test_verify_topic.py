"""``drkit verify`` on real brokers: a topic mirrored by drkit (origin headers) verifies record by record; the
records deleted from its copy are named as exactly the missing source offsets (a sample over the whole log
finds exactly its windows' share of them, and its seed repeats it); records produced since are not mirrored
yet, not a failure; another tool's copy (no headers) is verified by content, and the one record
whose value differs is named. The CLI exits 31 with the ranges in its JSON, and an unknown topic is one line,
exit 3. Nothing is written anywhere (the groups and the tables are untouched: it commits nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.kafka_io import create_topic, delete_records, produce, unique
from support.sync_writer import sync, write_syncs
from support.synced_flow import synced_flow

from drkit.config import DrkitConfig
from drkit.core.verify import Finding, sample_windows
from drkit.layout import StateLayout
from drkit.service import Drkit

FLOW, RECORDS, PARTITIONS = "A->B", 300, 2


def records(partition: int, first: int, count: int) -> list[dict[str, object]]:
    return [
        {
            "partition": partition,
            "key": f"k{i}".encode(),
            "value": f"v{partition}-{i}".encode(),
            "headers": [("h", b"x")],
        }
        for i in range(first, first + count)
    ]


def test_a_mirrored_topic_verifies_and_deleted_copies_are_named_exactly(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic = unique("verify")
    create_topic(clusters["A"], topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce(clusters["A"], topic, records(p, 0, RECORDS))
    service = Drkit(make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}]), spark)
    service.mirror(None, once=True)

    report = service.verify(FLOW, topic)
    assert report.ok and report.as_dict()["verified"] == PARTITIONS * RECORDS, report.as_dict()
    assert report.target_topic == f"A.{topic}"

    delete_records(clusters["B"], f"A.{topic}", 50, partition=0)  # the copy's first 50 records gone
    for p in range(PARTITIONS):
        produce(clusters["A"], topic, records(p, RECORDS, 7))  # not mirrored yet
    report = service.verify(FLOW, topic, from_offset=0)
    d = report.as_dict()
    assert not report.ok and (d["missing"], d["not_mirrored"], d["verified"]) == (50, 14, 2 * RECORDS - 50)
    [p0, p1] = d["partitions"]
    assert p0["ranges"] == {"missing": [[0, 49]]} and p1["ranges"] == {} and p1["ok"]
    # A range past the deletion verifies.
    assert service.verify(FLOW, topic, partitions=(0,), from_offset=50, max_records=RECORDS - 50).ok

    # A sample over the whole log: what it finds missing is exactly its windows' part of 0-49, no more.
    sample = service.verify(FLOW, topic, sample=60, window=10)
    [s0, s1] = sample.partitions
    assert sample.sample_seed is not None and len(s0.windows) == len(s1.windows) == 6
    in_deleted = sum(max(0, min(hi, 50) - lo) for lo, hi in s0.windows)
    unmirrored = [sum(max(0, hi - max(lo, RECORDS)) for lo, hi in p.windows) for p in (s0, s1)]
    assert (s0.records, s1.records) == (60, 60)
    assert s0.counts[Finding.MISSING] == in_deleted and s1.counts[Finding.MISSING] == 0
    assert [p.counts[Finding.NOT_MIRRORED] for p in (s0, s1)] == unmirrored
    assert s0.counts[Finding.VERIFIED] == 60 - in_deleted - unmirrored[0] and s1.ok
    repeated = service.verify(FLOW, topic, sample=60, window=10, seed=sample.sample_seed)
    assert repeated.as_dict() == sample.as_dict()


def test_another_tools_copy_is_verified_by_content_and_the_cli_names_the_record_that_differs(
    clusters: dict[str, str], tmp_path: Path
) -> None:
    toml, topic = synced_flow(clusters, tmp_path, "verify-foreign")  # 10 records, copies without headers
    produce(clusters["A"], topic, [{"partition": 0, "value": b"v10"}])
    produce(clusters["B"], f"A.{topic}", [{"partition": 0, "value": b"not v10"}])
    write_syncs(StateLayout(tmp_path / "state"), [sync(FLOW, topic, 0, (10, 10), (10, 10), 1)])

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "drkit.cli.app", "verify", "--flow", FLOW, "-c", str(toml), "-o", "json", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)

    proc = cli("--topic", topic)
    assert proc.returncode == 31, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert (out["verdict"], out["verified"], out["different"]) == ("fail", 10, 1)
    assert out["partitions"][0]["ranges"] == {"different": [[10, 10]]}
    proc = cli("--topic", topic, "--max-records", "10", "--from-offset", "0")
    assert proc.returncode == 0 and json.loads(proc.stdout)["verified"] == 10, proc.stdout + proc.stderr

    proc = cli("--topic", topic, "--sample", "5", "--window", "2", "--seed", "7")
    windows = sample_windows(0, 11, 5, 2, 7)
    differs = any(lo <= 10 < hi for lo, hi in windows)
    assert proc.returncode == (31 if differs else 0), proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["sample_seed"] == 7 and out["partitions"][0]["windows"] == [list(w) for w in windows]
    assert (out["records"], out["different"]) == (sum(hi - lo for lo, hi in windows), int(differs))

    unknown = cli("--topic", "no-such-topic")
    assert unknown.returncode == 3, unknown.stdout + unknown.stderr
    error = json.loads(unknown.stdout)["error"]
    assert error.startswith("flow A->B has mirrored no topic 'no-such-topic'") and "\n" not in error
