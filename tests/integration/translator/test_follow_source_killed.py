"""Must-show: the source SIGKILLed while 20 groups commit every 100 ms under a steady load. With
``follow_commits``, failover places each group at the newest commit the follower wrote before the kill, so a
group re-reads only the commits made after that write (the commits in flight); the translator's Delta rows
alone (one run every 10 s) would re-read up to an interval of commits.

A producer writes to A, the mirror and the translator (follower on) run continuously; each group commits every
partition 5 records further every 100 ms (the admin API's offset commits, each acknowledged one recorded). A
is SIGKILLed at a seeded random moment while they commit; then the jobs stop and a failover dry run plans
every group. Per group and partition, counted by this test:

- nothing lost: the plan's offset is never past the group's last commit sent (acknowledged or in flight);
- the plan is the newer of the group's live checkpoint (read on B after the kill) and the Delta row (by offset:
  here a group only moves forward), so a commit the follower wrote is never left for an older row;
- re-read = last acknowledged commit - planned offset; its distribution (in commits) is printed next to the
  Delta-only one, and it is at most ``MAX_REREAD_COMMITS`` (the follower writes every 100 ms; the interval is
  100 commits).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.committers import Committers, distribution
from support.kafka_io import commit, create_topic, produce, read_all
from support.load import Job, SteadyProducer
from support.ports import FOLLOW_KILLED
from support.waiting import wait_until

from drkit.config import load_config
from drkit.core.live_checkpoints import decode_value
from drkit.kafka.admin import KafkaAdmin
from drkit.localdev.clusters import LocalKafka
from drkit.mirror.runner import MirrorRunner
from drkit.service import Drkit
from drkit.translator.job import TranslatorRunner

TOPIC, PARTITIONS, RATE, FLOW = "orders", 2, 100, "A->B"
GROUPS = 20
#: Records each commit moves a group on, per partition; the records before the commits start.
STEP, PRELOADED = 5, 4000
COMMIT_EVERY = 0.1
#: The translator's Delta interval and the follower's.
INTERVAL_SECONDS, FOLLOW_MS = 10, 100
#: Commits before the kill window (so a Delta run came after the commits began), and the window's length.
COMMITTING_SECONDS, KILL_WINDOW_SECONDS = 12.0, 2.0
#: The most commits a group may re-read: the follower writes every 100 ms and its age p99 is a few hundred
#: ms on this machine; a loaded CI run gets 2 s of slack. Delta alone: up to the interval, 100 commits.
MAX_REREAD_COMMITS = 20


@pytest.fixture(scope="module")
def kill_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, dict[str, str]]]:
    kafka = LocalKafka(tmp_path_factory.mktemp("follow-kill-kafka"), base_port=FOLLOW_KILLED.base, heap="384m")
    try:
        kafka.up(["A", "B"])
        yield kafka, {c.alias: c.bootstrap_servers for c in kafka.status()}
    finally:
        kafka.down()


def test_a_source_killed_while_groups_commit_leaves_each_group_only_its_commits_in_flight_to_re_read(
    kill_clusters: tuple[LocalKafka, dict[str, str]], spark: Any, tmp_path: Path
) -> None:
    kafka, clusters = kill_clusters
    groups = [f"g{i:02d}" for i in range(GROUPS)]
    toml = tmp_path / "drkit.toml"
    toml.write_text(
        f"[state]\nroot = {json.dumps(str(tmp_path / 'state'))}\n\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = ["{TOPIC}"] }}\n'
        "heartbeats = { interval_seconds = 0 }\nmirror = { trigger_interval_seconds = 1 }\n"
        f"checkpoint = {{ interval_seconds = {INTERVAL_SECONDS}, max_age_seconds = 3600, follow_commits = true, "
        f"follow_interval_ms = {FOLLOW_MS} }}\n"
    )
    config = load_config(toml)
    service = Drkit(config, spark)
    create_topic(clusters["A"], TOPIC, PARTITIONS)
    produce(clusters["A"], TOPIC, [{"partition": i % PARTITIONS, "value": b"p"} for i in range(PRELOADED)])
    for group in groups:  # each group exists (at offset 0) before the translator lists the groups
        commit(clusters["A"], group, {(TOPIC, p): 0 for p in range(PARTITIONS)})
    producer = SteadyProducer(clusters["A"], TOPIC, PARTITIONS, RATE)
    producer.start()

    mirroring = MirrorRunner(service.mirror_context(), config.flows)
    mirror = Job("the mirror", lambda: mirroring.run(False))
    translating = TranslatorRunner(service.translator_context(), config.flows)
    translator = Job("the translator", lambda: translating.run(False))
    mirror.start()
    translator.start()
    committers = Committers(clusters["A"], groups, [(TOPIC, p) for p in range(PARTITIONS)], STEP, COMMIT_EVERY)
    seed = random.randrange(1 << 30)
    kill_after = random.Random(seed).uniform(0, KILL_WINDOW_SECONDS)
    try:

        def ready() -> bool:
            assert mirror.is_alive() and translator.is_alive(), (mirror.error, translator.error)
            followed = bool(translating.followers) and translating.followers[0].caught_up
            return followed and len(read_all(clusters["B"], f"A.{TOPIC}")) >= PRELOADED

        wait_until(ready, 240, "the preloaded records copied and the follower caught up", interval=1.0)
        committers.start()
        wait_until(lambda: len(committers.acked) == GROUPS, 60, "every group's first commit acknowledged")
        time.sleep(COMMITTING_SECONDS + kill_after)  # the commits go on meanwhile: the kill lands among them
        assert committers.is_alive(), committers.failure
        kafka.stop("A", kill=True)
        killed_at = time.monotonic()
        committers.join(60)  # its next commit fails: A is gone
        assert not committers.is_alive(), "the committers still run 60 s after A was killed"
    finally:
        committers.stop.set()
        producer.stop.set()
        mirroring.stop()
        translating.stopped.set()
    mirror.finish(180)
    translator.finish(120)
    producer.join(60)

    # What the follower had written to B, read after the kill, and the Delta rows.
    target = KafkaAdmin(config.clusters["B"], "B")
    followed = {
        (c.checkpoint.group, c.checkpoint.partition): c.checkpoint.upstream_offset
        for g, value in (target.live_checkpoint_values(FLOW) or {}).items()
        if g in groups
        for c in decode_value(FLOW, g, value)
    }
    rows = {
        (r.checkpoint.group, r.checkpoint.partition): r.checkpoint.upstream_offset
        for r in service.context.checkpoints.latest(FLOW, groups)
    }
    plan = service.failover(FLOW, groups).plan
    assert not plan.refusals, plan.refusals
    planned = {(m.group, m.partition): m.committed for m in plan.moves if m.from_topic == TOPIC}
    assert set(planned) == {(g, p) for g in groups for p in range(PARTITIONS)}

    rereads: dict[str, int] = {}
    delta_only: dict[str, int] = {}
    for (group, partition), offset in sorted(planned.items()):
        sent, acked = committers.sent[group], committers.acked[group]
        assert offset <= sent, f"{group}/{partition}: planned {offset}, past its last commit {sent}: records lost"
        newest = max(followed.get((group, partition), -1), rows[(group, partition)])
        assert offset == newest, (
            f"{group}/{partition}: planned {offset}, but the follower wrote {followed.get((group, partition))} "
            f"and the Delta row holds {rows[(group, partition)]}"
        )
        rereads[group] = max(rereads.get(group, 0), max(0, acked - offset) // STEP)
        delta_only[group] = max(delta_only.get(group, 0), max(0, acked - rows[(group, partition)]) // STEP)
    measured, without = distribution(rereads), distribution(delta_only)
    print(
        json.dumps(
            {
                "seed": seed,
                "kill_after_seconds": round(COMMITTING_SECONDS + kill_after, 2),
                "committers_stopped_seconds_after_kill": round(time.monotonic() - killed_at, 1),
                "commits_per_group": committers.acked[groups[0]] // STEP,
                "reread_commits_with_follower": measured,
                "reread_commits_delta_only": without,
            },
            indent=1,
        )
    )
    assert measured["max"] <= MAX_REREAD_COMMITS, measured
