"""The source killed mid-batch: a group past the synced end resumes exactly on the unsynced copies.

The mirror's batch had delivered part of a large backlog to B when A was SIGKILLed, so B holds copies
with no offset-sync (syncs are written only after every task of a batch succeeded). The group had
committed on A inside that unsynced range. Failover must place it at the copy of its committed
offset, read from the records' origin headers: counted record by record, the group re-reads nothing
it had processed and skips no copy it had not.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kafka_io import commit, committed_on, create_topic, end_offsets, produce, read_all
from support.ports import UNSYNCED_TAIL
from support.processes import quietly

from drkit.config import load_config
from drkit.core.origin import ORIGIN_HEADER, origin_of
from drkit.core.translate import Position
from drkit.localdev.clusters import LocalKafka
from drkit.mirror.runner import MirrorRunner
from drkit.service import Drkit

TOPIC, GROUP, PARTITIONS = "ledger", "settlement", 2
SYNCED = 400  # records per partition the first (completed) batch copies
BACKLOG = 150_000  # records per partition the cut-off batch was copying
COMMITTED = SYNCED + 3_000  # where the group stands on A, inside the cut-off batch


@pytest.fixture(scope="module")
def cut_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, dict[str, str]]]:
    kafka = LocalKafka(tmp_path_factory.mktemp("cut-kafka"), base_port=UNSYNCED_TAIL.base, heap="384m")
    try:
        kafka.up(["A", "B"])
        yield kafka, {c.alias: c.bootstrap_servers for c in kafka.status()}
    finally:
        kafka.down()


def _value(partition: int, offset: int) -> bytes:
    return f"{partition}:{offset}".encode()


def test_failover_after_a_batch_cut_off_by_the_disaster_re_reads_nothing(
    cut_clusters: tuple[LocalKafka, dict[str, str]], spark: Any, tmp_path: Path
) -> None:
    kafka, clusters = cut_clusters
    toml = tmp_path / "drkit.toml"
    toml.write_text(
        f"[state]\nroot = {json.dumps(str(tmp_path / 'state'))}\n\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = ["{TOPIC}"] }}\n'
        f"mirror = {{ trigger_interval_seconds = 0.5, max_offsets_per_trigger = {4 * BACKLOG} }}\n"
        "checkpoint = { max_age_seconds = 3600 }\n"
    )
    config = load_config(toml)
    service = Drkit(config, spark)
    create_topic(clusters["A"], TOPIC, PARTITIONS)
    target = f"A.{TOPIC}"

    def fill(first: int, count: int) -> None:
        for p in range(PARTITIONS):
            records = [{"partition": p, "value": _value(p, first + i)} for i in range(count)]
            produce(clusters["A"], TOPIC, records, **{"queue.buffering.max.messages": 1_000_000, "linger.ms": 20})

    fill(0, SYNCED)
    MirrorRunner(Drkit(config, spark).mirror_context(), config.flows).run(once=True)
    assert end_offsets(clusters["B"], target) == {p: SYNCED for p in range(PARTITIONS)}

    fill(SYNCED, BACKLOG)
    commit(clusters["A"], GROUP, {(TOPIC, p): COMMITTED for p in range(PARTITIONS)})
    [run] = service.translate("A->B", once=True)
    assert run.checkpoints == PARTITIONS, run

    # One batch for the whole backlog; A dies once B holds copies past the group's offset.
    runner = MirrorRunner(Drkit(config, spark).mirror_context(), config.flows)
    mirror = threading.Thread(target=lambda: quietly(runner.run, False), daemon=True)
    mirror.start()
    deadline = time.monotonic() + 240
    ends: dict[int, int] = {}
    while time.monotonic() < deadline:
        ends = end_offsets(clusters["B"], target)
        if min(ends.values()) > COMMITTED + 500:
            break
        time.sleep(0.05)
    kafka.stop("A", kill=True)
    assert sum(ends.values()) < PARTITIONS * (SYNCED + BACKLOG), "the batch finished before the disaster"
    runner.stop()
    mirror.join(180)
    for q in spark.streams.active:  # a query still waiting on the dead source
        with contextlib.suppress(Exception):
            q.stop()

    # The scenario: copies past the synced end on B, none of them synced.
    progress = service.context.syncs.progress("A->B")
    assert {p: progress[(TOPIC, p)].last_upstream for p in range(PARTITIONS)} == {
        p: SYNCED - 1 for p in range(PARTITIONS)
    }
    on_target = read_all(clusters["B"], target)
    tail = [r for r in on_target if r.offset >= SYNCED]
    assert min(sum(1 for r in tail if r.partition == p) for p in range(PARTITIONS)) > COMMITTED - SYNCED

    result = service.failover("A->B", [GROUP], apply=True)
    assert result.status.value == "applied", result.as_dict()
    assert {m.position for m in result.plan.moves} == {Position.UNSYNCED}, result.plan.as_dict()
    committed = committed_on(clusters["B"], GROUP, target)

    # Record by record: what the group reads now on B, against every copy B holds past the synced end.
    resumed = read_all(clusters["B"], target, start=committed)
    re_read, skipped = [], []
    for p in range(PARTITIONS):
        read = [origin_of(list(r.headers), "A") for r in resumed if r.partition == p]
        copies = [origin_of(list(r.headers), "A") for r in tail if r.partition == p]
        assert all(o is not None for o in copies), "every mirrored record names its origin"
        re_read += [o for o in read if o is not None and o < COMMITTED]
        skipped += sorted({o for o in copies if o is not None and o >= COMMITTED} - set(read))
        assert read and read[0] == COMMITTED, (p, read[:3])
    assert re_read == [] and skipped == [], (len(re_read), skipped[:10])
    for r in resumed:  # each copy is the record its origin names
        origin = origin_of(list(r.headers), "A")
        assert r.value == _value(r.partition, origin if origin is not None else -1)
        assert [k for k, _ in r.headers].count(ORIGIN_HEADER) == 1
    print(
        f"synced to {SYNCED - 1}, copies on B per partition {ends}, group at {COMMITTED}: resumed at {committed}, "
        f"read {len(resumed)} records, re-read 0 (the synced end alone: {PARTITIONS * (COMMITTED - SYNCED)})"
    )
