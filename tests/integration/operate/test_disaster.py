"""A full disaster and the way back, on clusters of its own (the source broker is killed).

1. Producers write to A; a group processes part of it; mirror and translator run; more records
   reach A that the mirror never copies; the translator observes A's end offsets; A is killed.
2. `drkit failover --apply --yes` (the CLI, in a subprocess) moves the group to B with A gone: a
   consumer on B reads exactly the mirrored records the group had not processed, and the reported
   RPO equals the records really not mirrored. A second --apply gives the same offsets.
3. Producers write to B; the group processes some on B; A comes back; `drkit recover` names the records
   the failover left on A (unknown while A was gone, exactly the unmirrored ones once it answers); the
   mirror A->B, run again, copies each of them once to B, and `drkit recover` says so; the reverse flow
   B->A catches up; `drkit failback` moves the group to A: it reads exactly what it had not processed,
   both records from A (including the ones never mirrored before the failover) and records produced on B;
   after it, nothing is left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kafka_io import Rec, commit, committed_on, consume_as_group, create_topic, produce, read_all
from support.mirror_checks import by_partition
from support.ports import DISASTER
from support.processes import no_java_env
from support.terminal import Terminal

from drkit.config import DrkitConfig, load_config
from drkit.localdev.clusters import LocalKafka
from drkit.service import Drkit

TOPIC, GROUP, PARTITIONS = "orders", "billing", 2


@pytest.fixture(scope="module")
def dr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, dict[str, str]]]:
    kafka = LocalKafka(tmp_path_factory.mktemp("dr-kafka"), base_port=DISASTER.base, heap="384m")
    try:
        kafka.up(["A", "B"])
        yield kafka, {c.alias: c.bootstrap_servers for c in kafka.status()}
    finally:
        kafka.down()


def write_config(path: Path, clusters: dict[str, str], state: Path) -> DrkitConfig:
    path.write_text(
        f'[state]\nroot = {json.dumps(str(state))}\n\n[spark]\nmaster = "local[2]"\n\n'
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + '[[flows]]\nsource = "A"\ntarget = "B"\ntopics = { include = ["orders"] }\n\n'
        '[[flows]]\nsource = "B"\ntarget = "A"\ntopics = { include = ["orders"] }\n'
    )
    return load_config(path)


def cli(config: Path, *args: str) -> tuple[int, dict[str, Any]]:
    # No JVM can start in this environment: the operator commands read and write the tables without Spark.
    proc = subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", *args, "-c", str(config), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=no_java_env(),
    )
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(
            f"not JSON (exit {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-3000:]}"
        ) from None


def contents(records: list[Rec]) -> dict[int, list[tuple[object, ...]]]:
    return {p: [r.content() for r in rs] for p, rs in by_partition(records).items()}


def test_disaster_failover_then_failback(dr: tuple[LocalKafka, dict[str, str]], spark: Any, tmp_path: Path) -> None:
    kafka, clusters = dr
    toml = tmp_path / "drkit.toml"
    config = write_config(toml, clusters, tmp_path / "state")
    service = Drkit(config, spark)

    # -- 1. normal operation, then the disaster -------------------------------------------------
    create_topic(clusters["A"], TOPIC, PARTITIONS)
    now = int(time.time() * 1000)
    produce(
        clusters["A"],
        TOPIC,
        [
            {"partition": i % PARTITIONS, "key": f"k{i}".encode(), "value": f"a{i}".encode(), "timestamp": now + i}
            for i in range(400)
        ],
    )
    processed_on_a = {(TOPIC, 0): 120, (TOPIC, 1): 35}
    commit(clusters["A"], GROUP, processed_on_a)
    service.mirror("A->B", once=True)
    service.translate("A->B", once=True)
    produce(
        clusters["A"],
        TOPIC,
        [
            {"partition": i % PARTITIONS, "key": b"late", "value": f"late{i}".encode(), "timestamp": now + 400 + i}
            for i in range(30)
        ],
    )
    service.translate("A->B", once=True)  # observes A's end offsets: 30 records not mirrored
    source_before = read_all(clusters["A"], TOPIC)
    kafka.stop("A", kill=True)
    # What B holds, read from B: per partition, one past the newest source offset copied (origin headers),
    # and the copy of the record the group would have read next on A. The offsets below are these, never the
    # ones this test committed.
    copies = read_all(clusters["B"], f"A.{TOPIC}")
    origins = {(r.partition, r.offset): r.origin("A") for r in copies}
    assert None not in origins.values(), "a record on B has no origin header"
    mirrored_end = {p: 1 + max(o or 0 for (q, _), o in origins.items() if q == p) for p in range(PARTITIONS)}
    assert mirrored_end == {p: 200 for p in range(PARTITIONS)}  # 400 records over 2 partitions were mirrored
    translated = {r.partition: r.offset for r in copies if r.origin("A") == processed_on_a[(TOPIC, r.partition)]}
    assert sorted(translated) == list(range(PARTITIONS)), "a partition lacks the copy of the group's next record"
    unmirrored = Counter(r.partition for r in source_before if r.offset >= mirrored_end[r.partition])

    # -- 2. failover with the source gone ---------------------------------------------------------
    code, dry = cli(toml, "failover", "--flow", "A->B", "--group", GROUP)
    assert code == 0 and dry["status"] == "dry_run", dry
    assert committed_on(clusters["B"], GROUP, f"A.{TOPIC}") == {}, "a dry run changed the target"

    code, out = cli(toml, "failover", "--flow", "A->B", "--group", GROUP, "--apply", "--yes")
    assert code == 0 and out["status"] == "applied", out
    assert out["rpo"]["source_reachable"] is False
    assert out["rpo"]["unmirrored_offsets"] == sum(unmirrored.values()) == 30, (out["rpo"], unmirrored)
    assert {r["partition"]: r["unmirrored_offsets"] for r in out["rpo"]["partitions"]} == dict(unmirrored)
    assert committed_on(clusters["B"], GROUP, f"A.{TOPIC}") == translated

    expected = [
        r
        for r in source_before
        if r.offset >= processed_on_a[(TOPIC, r.partition)] and r.offset < mirrored_end[r.partition]
    ]
    got = consume_as_group(clusters["B"], GROUP, f"A.{TOPIC}", 10**6, idle_polls=5)
    assert contents(got) == contents(expected), "the group did not resume exactly on B"
    assert len(got) == 400 - 155

    # Running --apply again gives the same offsets: from where the read above left the group (its ends on B),
    # it moves the group back to the translation, read on B.
    read_to = committed_on(clusters["B"], GROUP, f"A.{TOPIC}")
    assert read_to == {p: mirrored_end[p] for p in range(PARTITIONS)} != translated
    code, again = cli(toml, "failover", "--flow", "A->B", "--all-groups", "--apply", "--yes")
    assert code == 0 and again["status"] == "applied"
    moves = {(m["group"], m["partition"]): (m["current"], m["new"]) for m in again["plan"]["moves"]}
    assert moves == {(GROUP, p): (read_to[p], translated[p]) for p in range(PARTITIONS)}, again["plan"]["moves"]
    assert committed_on(clusters["B"], GROUP, f"A.{TOPIC}") == translated
    ops = [o.as_dict() for o in service.history("A->B", limit=50).operations]
    assert [(o["action"], o["dry_run"], o["result"]["status"]) for o in reversed(ops)] == [
        ("failover", True, "dry_run"),
        ("failover", False, "applied"),
        ("failover", False, "applied"),
    ]

    # The records A took that the mirror never copied, as drkit recover tells them: unknown while A is gone.
    code, gap = cli(toml, "recover", "--flow", "A->B")
    assert (code, gap["verdict"], gap["unrecovered"]) == (33, "unknown", None), gap

    # -- 3. life on B, A comes back, failback -----------------------------------------------------
    create_topic(clusters["B"], TOPIC, PARTITIONS)
    produce(
        clusters["B"],
        TOPIC,
        [
            {
                "partition": i % PARTITIONS,
                "key": f"b{i}".encode(),
                "value": f"b{i}".encode(),
                "timestamp": now + 1000 + i,
            }
            for i in range(60)
        ],
    )
    processed_on_b = {(f"A.{TOPIC}", 0): 150, (f"A.{TOPIC}", 1): 200, (TOPIC, 0): 10, (TOPIC, 1): 0}
    commit(clusters["B"], GROUP, processed_on_b)
    kafka.start("A")
    # A answers: the gap is exactly the records read from A above past what B held, per partition.
    code, gap = cli(toml, "recover", "--flow", "A->B")
    assert (code, gap["verdict"], gap["end_from"], gap["unrecovered"]) == (32, "pending", "on_return", 30), gap
    assert {r["partition"]: r["remaining"] for r in gap["partitions"]} == {
        p: [mirrored_end[p], mirrored_end[p] + unmirrored[p]] for p in range(PARTITIONS)
    }
    # A failback planned now names them: they would be read on A, where the group resumes before them.
    _, dry = cli(toml, "failback", "--flow", "A->B", "--group", GROUP)
    notes = [w for w in dry["plan"]["warnings"] if "left on A" in w]
    assert len(notes) == 1 and notes[0].startswith("30 offsets failover ") and "are not on B (" in notes[0], dry
    a_copy_on_b = read_all(clusters["B"], f"A.{TOPIC}")
    # The flow's mirror, run again, copies them (after whatever B's copy holds): each once, by its content.
    service.mirror("A->B", once=True)
    code, gap = cli(toml, "recover", "--flow", "A->B")
    assert (code, gap["verdict"], gap["unrecovered"]) == (0, "recovered", 0), gap
    recovered = read_all(clusters["B"], f"A.{TOPIC}")
    assert Counter(r.content() for r in recovered) == Counter(r.content() for r in source_before)
    assert {(r.partition, r.origin("A")) for r in recovered if r.offset >= 200} == {
        (r.partition, r.offset) for r in source_before if r.offset >= 200
    }
    service.mirror("B->A", once=True)  # copies B's orders to A as B.orders, never A.orders back
    code, back = cli(toml, "failback", "--flow", "A->B", "--group", GROUP, "--apply", "--yes")
    assert code == 0 and back["status"] == "applied", back
    assert not [w for w in back["plan"]["warnings"] if "left on A" in w], back  # all recovered: nothing to name
    b_records = read_all(clusters["B"], TOPIC)

    # What the group had not processed: on B's copy of A's topic from its B offsets, plus A's
    # records the mirror never copied; and B's own records from its B offsets.
    expected_a = [r for r in a_copy_on_b if r.offset >= processed_on_b[(f"A.{TOPIC}", r.partition)]]
    expected_a += [r for r in source_before if r.offset >= mirrored_end[r.partition]]
    expected_b = [r for r in b_records if r.offset >= processed_on_b[(TOPIC, r.partition)]]
    got_a = consume_as_group(clusters["A"], GROUP, TOPIC, 10**6, idle_polls=5)
    got_b = consume_as_group(clusters["A"], GROUP, f"B.{TOPIC}", 10**6, idle_polls=5)
    assert contents(got_a) == contents(sorted(expected_a, key=lambda r: (r.partition, r.timestamp)))
    assert contents(got_b) == contents(expected_b)
    assert len(got_a) == (200 - 150) + (200 - 200) + 30 and len(got_b) == 60 - 10
    # Failed back: the records are where the group is; nothing is left behind any more.
    code, gap = cli(toml, "recover", "--flow", "A->B")
    assert (code, gap["verdict"]) == (0, "no_failover"), gap
    print(
        f"failover: {len(got)} records resumed on B, RPO {out['rpo']['unmirrored_offsets']} records; "
        f"failback: {len(got_a)} + {len(got_b)} records resumed on A"
    )


def test_refusals_change_nothing(clusters: dict[str, str], spark: Any, make_config: Any, tmp_path: Path) -> None:
    from confluent_kafka import Consumer
    from support.kafka_io import unique

    topic, group, busy, empty_group = unique("ref"), unique("g"), unique("busy"), unique("empty")
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(20)])
    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    service = Drkit(config, spark)
    service.mirror(None, once=True)
    # Records on partition 1 the mirror has not copied: an offset there cannot be translated (an empty
    # partition could: there would be nothing to mirror, see test_empty_partitions.py).
    produce(clusters["A"], topic, [{"partition": 1, "value": f"late{i}".encode()} for i in range(3)])
    commit(clusters["A"], group, {(topic, 0): 5})
    commit(clusters["A"], busy, {(topic, 0): 7})
    commit(clusters["A"], empty_group, {(topic, 1): 0})  # partition 1 has nothing mirrored
    service.translate(None, once=True)
    target = f"A.{topic}"

    unknown = service.failover("A->B", ["no-such-group"], apply=True)
    assert unknown.status == "refused" and unknown.plan.refusals[0].reason == "unknown_group"

    untranslatable = service.failover("A->B", [empty_group], apply=True)
    assert untranslatable.status == "refused"
    assert [r.reason for r in untranslatable.plan.refusals] == ["untranslatable"]
    assert committed_on(clusters["B"], empty_group, target) == {}

    consumer = Consumer(
        {
            "bootstrap.servers": clusters["B"],
            "group.id": busy,
            "client.id": "busy-consumer",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([target])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.5)
    try:
        active = service.failover("A->B", [busy], apply=True)
        assert active.status == "refused"
        refusal = next(r for r in active.plan.refusals if r.reason == "active_group")
        assert "busy-consumer" in refusal.detail
        assert committed_on(clusters["B"], busy, target) == {}
    finally:
        consumer.close()

    # The same state with a freshness limit the checkpoints cannot meet: stale.
    strict = make_config(
        [{"source": "A", "target": "B", "topics": {"include": [topic]}, "checkpoint": {"max_age_seconds": 0.001}}]
    )
    strict_drkit = Drkit(strict, spark)
    stale = strict_drkit.failover("A->B", [group], apply=True)
    assert stale.status == "refused" and {r.reason for r in stale.plan.refusals} == {"stale"}
    assert committed_on(clusters["B"], group, target) == {}
    allowed = strict_drkit.failover("A->B", [group], allow_stale=True, apply=True)
    assert allowed.status == "applied" and committed_on(clusters["B"], group, target) == {0: 5}
    # --apply without --yes asks; answering no changes nothing (the CLI, with a real prompt).
    toml = tmp_path / "refusals.toml"
    toml.write_text(
        f"[state]\nroot = {json.dumps(str(config.state_root()))}\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
    )
    commit(clusters["A"], group, {(topic, 0): 9})
    Drkit(config, spark).translate(None, once=True)
    terminal = Terminal()  # the prompt needs a terminal (a pipe is refused)
    terminal.type("n\n")
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
        ],
        stdin=terminal.fd,
        capture_output=True,
        text=True,
        timeout=300,
        env=no_java_env(),
    )
    terminal.close()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Apply" in proc.stdout + proc.stderr
    assert committed_on(clusters["B"], group, target) == {0: 5}
    statuses = [o.as_dict()["result"]["status"] for o in service.history("A->B", limit=50).operations]
    assert sorted(statuses) == sorted(["refused", "refused", "refused", "refused", "applied", "declined"])
