"""Failover fences an exactly-once mirror that died with its transactions open (real brokers and Spark).

The mirror of a flow with ``delivery = "exactly_once"`` copies a first part and commits it; a second run is
killed (SIGKILL) with the copies of the next part acknowledged by B and their transactions still open: B's
last stable offset (what a ``read_committed`` consumer may read up to) stays below its end, and would until the
broker's transaction timeout (300 s with drkit's defaults). ``drkit failover --apply`` (the CLI, in a process that
cannot start a JVM) fences the flow's transactional ids before it commits: the audit row names them, the last
stable offset of every partition is its end at once, the group's offsets on B are the copies of its next
records (read on B, by their origin headers), and a ``read_committed`` consumer of the group reads exactly the
committed copies from there and reaches the partitions' end, none of the aborted ones.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from support import faulty_mirror
from support.flow_toml import flow_toml
from support.kafka_io import Rec, commit, committed_on, create_topic, produce, read_all, unique
from support.processes import no_java_env

from drkit.config import DrkitConfig
from drkit.mirror.faults import KillAt, KillPoint
from drkit.service import Drkit

PARTITIONS, FIRST, SECOND = 2, 200, 100
#: The slots of an exactly-once flow by default (drkit.core.exactly_once.TRANSACTION_SLOTS), by their ids.
SLOTS = 4
#: Well below the broker's transaction timeout: a group blocked by the open transaction would still be.
UNBLOCKED_WITHIN_SECONDS = 20.0


def write_toml(path: Path, clusters: dict[str, str], state: Path, topic: str) -> Path:
    mirror = {"delivery": "exactly_once", "trigger_interval_seconds": 0.5}
    return flow_toml(path, clusters, state, topic, mirror, {"max_age_seconds": 3600}, master="local[1]")


def ends(bootstrap: str, topic: str, isolation: IsolationLevel) -> dict[int, int]:
    """Per partition: the end (read_uncommitted) or the last stable offset (read_committed), from the broker."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    futures = admin.list_offsets(asked, isolation_level=isolation, request_timeout=30)
    return {tp.partition: f.result(30).offset for tp, f in futures.items()}


def every_record(bootstrap: str, topic: str) -> Counter[tuple[object, ...]]:
    """Every record on ``topic``, aborted or not (read_uncommitted), by partition, offset and content."""
    return Counter(
        (r.partition, r.offset, r.key, r.value, r.headers) for r in read_all(bootstrap, topic, "read_uncommitted")
    )


def consume_to_the_end(bootstrap: str, group: str, topic: str, seconds: float) -> tuple[list[Rec], dict[int, int]]:
    """A read_committed consumer of ``group`` reads from its committed offsets until the end of every partition
    (for read_committed: the last stable offset); what it read and its positions. Fails at the deadline."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",  # the group has offsets: a reset would be a failure to see
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    out: list[Rec] = []
    try:
        consumer.subscribe([topic])
        at_end: set[int] = set()
        deadline = time.monotonic() + seconds
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"the group reached the end of partitions {sorted(at_end)} only"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            headers = tuple((k, v) for k, v in (msg.headers() or []))
            out.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
        positions = {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}
        return out, positions
    finally:
        consumer.close()


def test_failover_fences_a_dead_exactly_once_mirror_and_the_group_reads_on_at_once(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    topic, group = unique("eos-fence"), unique("eos-fence-g")
    target = f"A.{topic}"
    create_topic(clusters["A"], topic, PARTITIONS)

    def records(base: int, n: int) -> list[dict[str, object]]:
        return [{"partition": i % PARTITIONS, "key": b"k%d" % i, "value": b"v%d" % i} for i in range(base, base + n)]

    produce(clusters["A"], topic, records(0, FIRST))
    processed = {0: 30, 1: 40}
    commit(clusters["A"], group, {(topic, p): o for p, o in processed.items()})
    flow = {"source": "A", "target": "B", "topics": {"include": [topic]}, "mirror": {"delivery": "exactly_once"}}
    config = make_config([flow])
    service = Drkit(config, spark)
    service.mirror(None, once=True)  # the first part, committed
    service.translate(None, once=True)
    assert ends(clusters["B"], target, IsolationLevel.READ_COMMITTED) == ends(
        clusters["B"], target, IsolationLevel.READ_UNCOMMITTED
    ), "a transaction is open on B before the kill"

    # The second part: copied, acknowledged, its transactions open when the mirror dies.
    produce(clusters["A"], topic, records(FIRST, SECOND))
    toml = write_toml(tmp_path / "drkit.toml", clusters, config.state_root(), topic)
    log = tmp_path / "mirror.log"
    with log.open("wb") as out:
        mirror = subprocess.Popen(
            faulty_mirror.command(
                "--verbose", "mirror", "-c", str(toml), "--flow", "A->B", kill_at=KillAt(KillPoint.ACKNOWLEDGED)
            ),  # the fault: a plan the test injects
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            mirror.wait(300)
        finally:
            if mirror.poll() is None:
                os.killpg(mirror.pid, signal.SIGKILL)
                mirror.wait(30)
    text = log.read_text(errors="replace")
    assert mirror.returncode == -signal.SIGKILL and "killed at acknowledged" in text, text[-3000:]
    stable = ends(clusters["B"], target, IsolationLevel.READ_COMMITTED)
    end = ends(clusters["B"], target, IsolationLevel.READ_UNCOMMITTED)
    # The kill lands at the first slot's commit: its partitions' copies are in an open transaction (the others'
    # slots may not have copied yet).
    held = {p for p in range(PARTITIONS) if stable[p] < end[p]}
    assert held and all(stable[p] <= end[p] for p in range(PARTITIONS)), f"no open transaction: {stable}, {end}"

    # The group's place on B, read on B: the committed copy of the record it would read next on A.
    copies = [r for r in read_all(clusters["B"], target, "read_uncommitted") if r.offset < stable[r.partition]]
    translated = {r.partition: r.offset for r in copies if r.origin("A") == processed[r.partition]}
    assert sorted(translated) == list(range(PARTITIONS)), "a partition lacks the copy of the group's next record"

    before_fence = every_record(clusters["B"], target)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "drkit.cli.app",
            "failover",
            "-c",
            str(toml),
            "--flow",
            "A->B",
            "--group",
            group,
            "--apply",
            "--yes",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=no_java_env(),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert json.loads(proc.stdout)["status"] == "applied", proc.stdout[-2000:]
    [row] = [o.as_dict() for o in service.history("A->B", limit=5).operations]
    assert row["result"]["status"] == "applied" and "fence_error" not in row["result"], row["result"]
    assert row["result"]["fenced"] == [f"drkit-mirror.A->B.{slot}" for slot in range(SLOTS)], row["result"]

    # Not blocked: every partition's last stable offset is its end now (the aborts' markers written).
    after = ends(clusters["B"], target, IsolationLevel.READ_UNCOMMITTED)
    assert ends(clusters["B"], target, IsolationLevel.READ_COMMITTED) == after, "a transaction is still open"
    # One abort marker on each partition an open transaction held records on; at most one on the others (a slot
    # killed after adding its partition to a transaction and before its first copy landed holds it with no
    # record: its abort writes a marker there too); no record written anywhere.
    assert all(after[p] == end[p] + 1 for p in held), (end, after, held)
    assert all(end[p] <= after[p] <= end[p] + 1 for p in range(PARTITIONS)), (end, after, held)
    assert every_record(clusters["B"], target) == before_fence
    assert committed_on(clusters["B"], group, target) == translated

    got, positions = consume_to_the_end(clusters["B"], group, target, UNBLOCKED_WITHIN_SECONDS)
    assert positions == after, f"the group stopped short of the end: {positions}, end {after}"
    source = read_all(clusters["A"], topic)
    expected = Counter(r.content() for r in source if processed[r.partition] <= r.offset < FIRST // PARTITIONS)
    assert Counter(r.content() for r in got) == expected, "the group did not read exactly the committed copies"
    print(
        f"fenced {row['result']['fenced']}; last stable offsets {stable} -> {after} (end before {end}); the group read "
        f"{len(got)} records from {translated}"
    )
