"""The probe drill on real brokers, with ``drkit mirror`` running as a process: drkit gets only the clusters'
addresses (the test started them, drkit did not), and never a broker to signal.

One mirror serves the whole module, in steps: a correct mirror passes (every record of the window verified,
0 missed, 0 re-read); records deleted from the target fail it with exactly those records missed; a frozen
mirror (SIGSTOP: it still holds its lease) fails it with exactly the records produced since counted as not
mirrored; commits the checkpoint does not have yet are re-read, exactly, and pass within ``--max-reread``.
Around every probe the group's committed offsets (and metadata) on both clusters are byte-for-byte the same
and no drill group is left. Bad input: a group without checkpoints, and a flow whose mirror stopped, are one
line each and write nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from support.kafka_io import commit, create_topic, delete_records, end_offsets, produce, unique
from support.ports import PROBE
from support.waiting import wait_until

from drkit.config import load_config
from drkit.core.drill import DrillVerdict
from drkit.core.probe import DRILL_GROUP_PREFIX, ProbeReason, ProbeReport
from drkit.errors import RefusedError
from drkit.service import Drkit

FLOW, GROUP, PARTITIONS, RECORDS = "A->B", "ledger", 2, 100
#: The group's committed offset on A in every partition.
COMMITTED = 40


def records(partition: int, start: int, count: int) -> list[dict[str, object]]:
    return [
        {
            "partition": partition,
            "key": f"k{i}".encode(),
            "value": f"{partition}-{i}".encode(),
            "headers": [("app", b"x")],
        }
        for i in range(start, start + count)
    ]


def group_offsets(bootstrap: str, group: str) -> list[tuple[str, int, int, str]]:
    """The group's committed offsets with their metadata, as the broker holds them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return sorted((tp.topic, tp.partition, tp.offset, tp.metadata or "") for tp in found.topic_partitions or [])


def drill_groups(bootstrap: str) -> list[str]:
    # A fresh client's listing asks every broker; a whole-suite run once saw it unanswered within 30 s on a
    # loaded machine after the probe had answered right: the listing is given the request's own timeout.
    groups = AdminClient({"bootstrap.servers": bootstrap}).list_consumer_groups(request_timeout=60).result(90)
    return sorted(g.group_id for g in groups.valid if g.group_id.startswith(DRILL_GROUP_PREFIX))


class Flow:
    """The module's flow: topic on A, config file, facade, and the mirror process."""

    def __init__(self, clusters: dict[str, str], folder: Path) -> None:
        self.clusters = clusters
        self.topic = unique("probe")
        self.copy = f"A.{self.topic}"
        self.toml = folder / "drkit.toml"
        self.toml.write_text(
            f"[state]\nroot = {json.dumps(str(folder / 'state'))}\n\n"
            + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
            + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = ["{self.topic}"] }}\n'
            # A lease long enough to outlast the frozen mirror's step.
            + "mirror = { trigger_interval_seconds = 1, lease_seconds = 60, lease_renew_seconds = 1 }\n"
            + "heartbeats = { interval_seconds = 0 }\n"
        )
        self.drkit = Drkit(load_config(self.toml))
        self.log = folder / "mirror.log"
        self.mirror: subprocess.Popen[bytes] | None = None

    def start_mirror(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
        argv = [
            sys.executable,
            "-m",
            "drkit.cli.app",
            "mirror",
            "-c",
            str(self.toml),
            "--metrics-port",
            str(PROBE.base),
        ]
        with self.log.open("ab") as out:
            self.mirror = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def on_target(self) -> int:
        assert self.mirror is not None and self.mirror.poll() is None, self.log.read_text()[-3000:]
        return sum(end_offsets(self.clusters["B"], self.copy).values())

    def probe(self, **kw: Any) -> ProbeReport:
        """A probe of GROUP, with the group's offsets on both clusters checked unchanged and no drill group left."""
        before = {alias: group_offsets(bs, GROUP) for alias, bs in self.clusters.items()}
        rows = len(self.drkit.drill_history(1000).drills)
        report = self.drkit.drill_probe(FLOW, GROUP, **kw)
        assert {alias: group_offsets(bs, GROUP) for alias, bs in self.clusters.items()} == before
        assert drill_groups(self.clusters["B"]) == []
        assert len(self.drkit.drill_history(1000).drills) == rows + 1
        return report

    def stop(self) -> None:
        if self.mirror is not None and self.mirror.poll() is None:
            os.killpg(self.mirror.pid, signal.SIGCONT)
            self.mirror.terminate()
            try:
                self.mirror.wait(60)
            except subprocess.TimeoutExpired:
                self.mirror.kill()
                self.mirror.wait(10)


@pytest.fixture(scope="module")
def flow(clusters: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    f = Flow(clusters, tmp_path_factory.mktemp("probe"))
    create_topic(clusters["A"], f.topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce(clusters["A"], f.topic, records(p, 0, RECORDS))
    f.start_mirror()
    try:
        wait_until(lambda: f.on_target() == PARTITIONS * RECORDS, 180, "every record copied to B", interval=1.0)
        commit(clusters["A"], GROUP, {(f.topic, p): COMMITTED for p in range(PARTITIONS)})
        f.drkit.translate(FLOW, once=True)
        yield f
    finally:
        f.stop()


def counts(report: ProbeReport) -> dict[str, int]:
    names = ("expected", "verified", "missed", "reread", "mismatched", "not_mirrored")
    return {n: report.total(n) for n in names}


def by_partition(report: ProbeReport, name: str) -> dict[int, int]:
    return {p.partition: int(getattr(p, name)) for p in report.partitions}


def test_a_correct_mirror_passes_with_every_record_verified(flow: Flow) -> None:
    report = flow.probe(wait_seconds=30)
    window = PARTITIONS * (RECORDS - COMMITTED)
    assert report.verdict is DrillVerdict.PASSED, report.as_dict()
    assert counts(report) == {
        "expected": window,
        "verified": window,
        "missed": 0,
        "reread": 0,
        "mismatched": 0,
        "not_mirrored": 0,
    }
    assert report.timings.rto_ms is not None and report.timings.verified_ms is not None
    print(f"probe passed: {window} records verified, steps {report.as_dict()['timings_ms']}")


def test_records_deleted_on_the_target_are_missed_exactly(flow: Flow) -> None:
    delete_records(flow.clusters["B"], flow.copy, before=COMMITTED + 10, partition=0)
    report = flow.probe(wait_seconds=30)
    assert report.verdict is DrillVerdict.FAILED
    assert [r for r, _ in report.reasons] == [ProbeReason.MISSED]
    assert by_partition(report, "missed") == {0: 10, 1: 0}
    [p0] = [p for p in report.partitions if p.partition == 0]
    assert p0.missed_offsets == ((COMMITTED, COMMITTED + 9),)


def test_a_frozen_mirror_leaves_exactly_the_new_records_not_mirrored(flow: Flow) -> None:
    assert flow.mirror is not None
    os.killpg(flow.mirror.pid, signal.SIGSTOP)  # it keeps its lease (60 s) and copies nothing
    try:
        produce(flow.clusters["A"], flow.topic, records(1, RECORDS, 30))
        report = flow.probe(wait_seconds=3)
    finally:
        os.killpg(flow.mirror.pid, signal.SIGCONT)
    assert report.verdict is DrillVerdict.FAILED
    assert {r for r, _ in report.reasons} == {ProbeReason.MISSED, ProbeReason.NOT_MIRRORED}
    assert by_partition(report, "not_mirrored") == {0: 0, 1: 30}
    assert by_partition(report, "missed") == {0: 10, 1: 0}
    [p1] = [p for p in report.partitions if p.partition == 1]
    assert p1.not_mirrored_offsets == ((RECORDS, RECORDS + 29),) and report.rpo_ms > 0
    wait_until(lambda: flow.on_target() == PARTITIONS * RECORDS + 30, 120, "the 30 records copied once thawed")


def test_commits_the_checkpoint_has_not_seen_are_re_read_exactly(flow: Flow) -> None:
    # The group commits 10 more per partition on A; no checkpoint since: a failover now resumes at 40.
    commit(flow.clusters["A"], GROUP, {(flow.topic, p): COMMITTED + 10 for p in range(PARTITIONS)})
    report = flow.probe(wait_seconds=30)
    # Partition 0's copies of 40..49 are gone (deleted above): it resumes at the copy of 50, nothing re-read.
    assert by_partition(report, "reread") == {0: 0, 1: 10}
    assert report.verdict is DrillVerdict.FAILED and [r for r, _ in report.reasons] == [ProbeReason.REREAD]
    allowed = flow.probe(wait_seconds=30, max_reread=10)
    assert allowed.verdict is DrillVerdict.PASSED, allowed.as_dict()["reasons"]
    assert counts(allowed)["verified"] == (RECORDS - 50) + (RECORDS + 30 - 50)


def test_a_group_without_checkpoints_is_one_line_and_writes_nothing(flow: Flow) -> None:
    rows = len(flow.drkit.drill_history(1000).drills)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "drkit.cli.app",
            "drill",
            "probe",
            "--flow",
            FLOW,
            "--group",
            "nobody",
            "-c",
            str(flow.toml),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "has no checkpoints" in lines[0] and "drkit checkpoint" in lines[0], proc.stderr
    assert len(flow.drkit.drill_history(1000).drills) == rows and drill_groups(flow.clusters["B"]) == []


def test_a_flow_whose_mirror_stopped_is_refused_and_nothing_is_written(flow: Flow) -> None:
    flow.stop()  # a clean stop gives the lease back
    rows = len(flow.drkit.drill_history(1000).drills)
    with pytest.raises(RefusedError, match="no mirror holds its lease"):
        flow.drkit.drill_probe(FLOW, GROUP)
    assert len(flow.drkit.drill_history(1000).drills) == rows and drill_groups(flow.clusters["B"]) == []
