"""Must-show (issue 38): a failback after writes on both sides, while 20 groups commit every 100 ms on the
cluster they leave, re-reads per group no more than the commits it made while the plan was read; once the
groups stop, none at all.

On the session's clusters. The topic has 3,000 records on A and 3,000 of its own on B; the flow A->B copies
A's to B (``A.<topic>``), the reverse flow B->A copies B's to A (``B.<topic>``), both with the same offsets
as their originals (checked by the origin headers), so a group's offset on B is the offset it must have on
A. On B, every group commits both topics' partitions 5 records further every 100 ms (the admin API; each
acknowledged commit recorded). Three failback dry runs are planned at seeded random moments meanwhile, then
the groups stop and the failback is applied. Counted by this test, per group and partition:

- nothing lost: a planned offset is never past the group's last commit sent when the plan ended;
- bounded re-reads: never before its last commit acknowledged when the plan began, so the commits it
  re-reads (last acknowledged after the plan minus planned, in commits) are at most those it made while the
  plan read its offsets; their distribution is printed;
- the applied failback, after the groups stopped, puts each group on A exactly at its last commit (0
  re-read), and two groups' consumers on A read exactly the records past it, record by record, on both topics.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from support.committers import Committers, distribution
from support.kafka_io import Rec, committed_on, consume_as_group, create_topic, produce, read_all, unique
from support.waiting import wait_until

from drkit.core.outcome import OperationStatus
from drkit.service import Drkit

PARTITIONS, PER_PARTITION = 2, 1500
GROUPS, STEP, COMMIT_EVERY = 20, 5, 0.1
DRY_RUNS = 3
FLOW = "A->B"


def test_a_failback_while_groups_commit_re_reads_at_most_the_commits_in_flight_and_none_once_they_stop(
    clusters: dict[str, str], spark: Any, make_config: Any
) -> None:
    topic = unique("fbc")
    local, copy = topic, f"A.{topic}"  # on B: B's own topic and the copy of A's
    groups = [f"{topic}-g{i:02d}" for i in range(GROUPS)]
    flows = [
        {"source": "A", "target": "B", "topics": {"include": [topic]}},
        {"source": "B", "target": "A", "topics": {"include": [topic]}},
    ]
    service = Drkit(make_config(flows), spark)
    now = int(time.time() * 1000)
    for alias in ("A", "B"):
        create_topic(clusters[alias], topic, PARTITIONS)
        records = [
            {"partition": i % PARTITIONS, "value": f"{alias}{i}".encode(), "timestamp": now + i}
            for i in range(PARTITIONS * PER_PARTITION)
        ]
        produce(clusters[alias], topic, records)
    service.mirror("A->B", once=True)
    service.mirror("B->A", once=True)
    on_a, on_b = read_all(clusters["A"], topic), read_all(clusters["B"], topic)
    a_copy, b_copy = read_all(clusters["B"], copy), read_all(clusters["A"], f"B.{topic}")
    assert len(a_copy) == len(b_copy) == PARTITIONS * PER_PARTITION
    assert all(r.origin("A") == r.offset for r in a_copy), "A's copy on B does not keep A's offsets"
    assert all(r.origin("B") == r.offset for r in b_copy), "B's copy on A does not keep B's offsets"

    committers = Committers(
        clusters["B"],
        groups,
        [(t, p) for t in (copy, local) for p in range(PARTITIONS)],
        STEP,
        COMMIT_EVERY,
        limit=PER_PARTITION,
    )
    seed = random.randrange(1 << 30)
    draw = random.Random(seed)
    runs: list[dict[str, Any]] = []
    committers.start()
    try:
        wait_until(lambda: len(committers.acked) == GROUPS, 60, "every group's first commit acknowledged")
        for _ in range(DRY_RUNS):
            time.sleep(draw.uniform(0.0, 1.0))
            before = dict(committers.acked)
            started = time.monotonic()
            plan = service.failback(FLOW, groups).plan
            took = time.monotonic() - started
            sent, after = dict(committers.sent), dict(committers.acked)
            assert committers.is_alive(), f"the groups stopped committing during the dry runs: {committers.failure}"
            assert not plan.refusals, plan.refusals
            planned = {(m.group, m.from_topic, m.partition): m.new for m in plan.moves}
            assert set(planned) == {(g, t, p) for g in groups for t in (copy, local) for p in range(PARTITIONS)}
            rereads: dict[str, int] = {}
            in_flight: dict[str, int] = {}
            for (group, from_topic, partition), offset in sorted(planned.items()):
                where = f"{group} {from_topic}/{partition}"
                assert offset is not None, f"{where}: not translated"
                assert offset <= sent[group], f"{where}: planned {offset}, past its last commit {sent[group]}: lost"
                assert offset >= before[group], (
                    f"{where}: planned {offset}, before the commit {before[group]} acknowledged when the plan began"
                )
                rereads[group] = max(rereads.get(group, 0), (after[group] - offset) // STEP)
                in_flight[group] = (after[group] - before[group]) // STEP
            runs.append(
                {
                    "plan_seconds": round(took, 2),
                    "commits_per_group_during_plan": distribution(in_flight),
                    "reread_commits": distribution(rereads),
                }
            )
    finally:
        committers.stop.set()
        committers.join(30)
    assert committers.failure is None, committers.failure
    assert committers.acked == committers.sent, "a commit was never answered"
    last = committers.acked

    # The groups stopped (as their consumers would be, before a failback): applied, each group is on A exactly
    # at its last commit on B: nothing to re-read.
    result = service.failback(FLOW, groups, apply=True)
    assert result.status is OperationStatus.APPLIED, result.plan.refusals
    for group in groups:
        want = {p: last[group] for p in range(PARTITIONS)}
        assert committed_on(clusters["A"], group, topic) == want, group
        assert committed_on(clusters["A"], group, f"B.{topic}") == want, group
    # Counted one by one for two groups: what each reads on A is exactly what it had not processed on B.
    for group in (groups[0], groups[-1]):
        got_a = consume_as_group(clusters["A"], group, topic, 10**6, idle_polls=3)
        got_b = consume_as_group(clusters["A"], group, f"B.{topic}", 10**6, idle_polls=3)
        assert contents(got_a) == contents([r for r in on_a if r.offset >= last[group]]), group
        assert contents(got_b) == contents([r for r in on_b if r.offset >= last[group]]), group
        assert len(got_a) == len(got_b) == PARTITIONS * (PER_PARTITION - last[group])
    print(json.dumps({"seed": seed, "commits_per_group": last[groups[0]] // STEP, "dry_runs": runs}, indent=1))


def contents(records: list[Rec]) -> list[tuple[object, ...]]:
    return sorted(r.content() for r in records)
