"""Partitions with nothing to mirror do not block a group's failover (issue 14, item 2).

On the session's clusters: ``events/0`` had 50 records, all removed by delete-records before the mirror
ran (log start = log end = 50); ``events/1`` was never written (a Java consumer commits 0 there);
``events/2`` was mirrored. The translator records the empty partitions as nothing to mirror (the target
partition's start); failover, with the source gone, applies; after producers write to A again and
the mirror copies those records, a consumer of the group on B reads exactly the records it had not
processed, one by one. A partition whose records exist on A but were never mirrored is still refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from support.kafka_io import (
    Rec,
    commit,
    committed_on,
    consume_as_group,
    create_topic,
    delete_records,
    produce,
    read_all,
    unique,
)

from drkit.config import DrkitConfig
from drkit.service import Drkit


def content(records: list[Rec]) -> dict[int, list[tuple[object, ...]]]:
    """By partition, in order: what a copy must keep (headers left out: the mirror may add its own)."""
    out: dict[int, list[tuple[object, ...]]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append((r.key, r.value, r.timestamp))
    return out


def test_partitions_with_nothing_to_mirror_fail_over_exactly(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic, group, blocked = unique("events"), unique("g"), unique("blocked")
    create_topic(clusters["A"], topic, 4)
    produce(clusters["A"], topic, [{"partition": 0, "key": f"gone{i}".encode(), "value": b"x"} for i in range(50)])
    delete_records(clusters["A"], topic, 50)
    produce(
        clusters["A"], topic, [{"partition": 2, "key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(30)]
    )
    flows = [{"source": "A", "target": "B", "topics": {"include": [topic]}}]
    service = Drkit(make_config(flows), spark)
    service.mirror(None, once=True)  # copies events/2; events/0, /1 and /3 have nothing to copy
    produce(clusters["A"], topic, [{"partition": 3, "value": f"late{i}".encode()} for i in range(5)])  # unmirrored
    commit(clusters["A"], group, {(topic, 0): 50, (topic, 1): 0, (topic, 2): 10})
    commit(clusters["A"], blocked, {(topic, 3): 0})
    service.translate(None, once=True)

    [offsets] = service.offsets(group, "A->B").groups
    rows = {r.partition: (r.checkpointed_offset, r.checkpointed_translation, r.position) for r in offsets.partitions}
    assert rows == {0: (50, 0, "nothing_to_mirror"), 1: (0, 0, "nothing_to_mirror"), 2: (10, 10, "mirrored")}

    # The source is gone for failover (a config whose A answers nobody): the checkpoints are enough.
    gone = make_config(
        flows, clusters={"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": clusters["B"]}}
    )
    result = Drkit(gone, spark).failover("A->B", [group], apply=True)
    assert result.status == "applied", result.plan.as_dict()
    assert result.plan.warnings == ()
    target = f"A.{topic}"
    assert committed_on(clusters["B"], group, target) == {0: 0, 1: 0, 2: 10}

    refused = Drkit(gone, spark).failover("A->B", [blocked], apply=True)
    assert refused.status == "refused"
    assert [(r.reason, r.detail) for r in refused.plan.refusals] == [
        (
            "untranslatable",
            f"{topic}/3: committed offset 0 cannot be translated (nothing of the partition was mirrored)",
        )
    ]
    assert committed_on(clusters["B"], blocked, target) == {}

    # Producers go on on A (a planned move: A is still there); the mirror copies the new records to the
    # start of the empty target partitions; the group on B reads exactly what it had not processed.
    produce(
        clusters["A"],
        topic,
        [
            {"partition": p, "key": f"new{p}-{i}".encode(), "value": f"n{i}".encode()}
            for p in (0, 1)
            for i in range(4 + p)
        ],
    )
    service.mirror(None, once=True)
    source = read_all(clusters["A"], topic, start={0: 50})  # 0..49 of partition 0 are gone
    # From the group's offsets; partition 3, where it has none, from the start (auto.offset.reset).
    expected = [r for r in source if r.offset >= {0: 50, 1: 0, 2: 10, 3: 0}[r.partition]]
    got = consume_as_group(clusters["B"], group, target, 10**6, idle_polls=5)
    assert content(got) == content(expected)
    assert {p: len(rs) for p, rs in content(got).items()} == {0: 4, 1: 5, 2: 20, 3: 5}
    print(f"failover with nothing to mirror: {len(got)} records read on B, one by one as on A")


def test_start_offsets_follow_delete_records_and_leave_absent_partitions_out(clusters: dict[str, str]) -> None:
    from drkit.config import ClusterConfig
    from drkit.kafka.admin import KafkaAdmin

    topic = unique("starts")
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, [{"partition": 0, "value": b"x"} for _ in range(10)])
    delete_records(clusters["A"], topic, 7)
    admin = KafkaAdmin(ClusterConfig(bootstrap_servers=clusters["A"]), "A")
    wanted = [(topic, 0), (topic, 1), (topic, 2), (unique("no-such-topic"), 0)]
    assert admin.start_offsets(wanted) == {(topic, 0): 7, (topic, 1): 0}
    assert admin.start_offsets([]) == {}
