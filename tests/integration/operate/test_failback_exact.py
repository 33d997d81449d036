"""Failback never re-reads what the group processed on the origin, unless it was set back (issue 14, item 1).

On clusters of its own (the source broker is killed). orders/0..2 hold 250 records each on A; the mirror
copied 0..199 of each. The group had processed on A: 240 of partition 0 (ahead of the mirror; the last
checkpoint saw 230), 150 of partition 1, 80 of partition 2. A dies; failover puts the group on B (200,
150, 80); there it reads everything copied, then is reset to 20 on partition 2 by its operator. A comes
back; failback moves it to A at 240 (not 200: the 40 records it had processed on A are not read again),
200, and 20 with a warning. Counted record by record: on partitions 0 and 1 every record of A is
processed exactly once over the whole disaster; on partition 2 the records from 20 on are read again,
as the reset asked.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kafka_io import Rec, commit, committed_on, consume_as_group, create_topic, produce, read_all
from support.ports import FAILBACK

from drkit.config import DrkitConfig, load_config
from drkit.core.resume import Basis
from drkit.localdev.clusters import LocalKafka
from drkit.service import Drkit

TOPIC, GROUP, PARTITIONS = "orders", "billing", 3
COPY = f"A.{TOPIC}"


@pytest.fixture(scope="module")
def dr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, dict[str, str]]]:
    kafka = LocalKafka(tmp_path_factory.mktemp("failback-kafka"), base_port=FAILBACK.base, heap="384m")
    try:
        kafka.up(["A", "B"])
        yield kafka, {c.alias: c.bootstrap_servers for c in kafka.status()}
    finally:
        kafka.down()


def write_config(path: Path, clusters: dict[str, str], state: Path) -> DrkitConfig:
    path.write_text(
        f'[state]\nroot = {json.dumps(str(state))}\n\n[spark]\nmaster = "local[2]"\n\n'
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + '[[flows]]\nsource = "A"\ntarget = "B"\ntopics = { include = ["orders"] }\n'
    )
    return load_config(path)


def key(r: Rec) -> tuple[object, ...]:
    """A record's identity across clusters (the copy keeps partition, key, value and timestamp)."""
    return (r.partition, r.key, r.value, r.timestamp)


def test_failback_resumes_exactly_after_the_group_went_past_the_mirror(
    dr: tuple[LocalKafka, dict[str, str]], spark: Any, tmp_path: Path
) -> None:
    kafka, clusters = dr
    service = Drkit(write_config(tmp_path / "drkit.toml", clusters, tmp_path / "state"), spark)

    # -- on A: 200 records per partition mirrored, 50 more never -----------------------------------
    create_topic(clusters["A"], TOPIC, PARTITIONS)
    now = int(time.time() * 1000)
    produce(
        clusters["A"],
        TOPIC,
        [
            {"partition": i % PARTITIONS, "key": f"k{i}".encode(), "value": f"a{i}".encode(), "timestamp": now + i}
            for i in range(200 * PARTITIONS)
        ],
    )
    service.mirror("A->B", once=True)
    produce(
        clusters["A"],
        TOPIC,
        [
            {"partition": i % PARTITIONS, "key": b"late", "value": f"late{i}".encode(), "timestamp": now + 1000 + i}
            for i in range(50 * PARTITIONS)
        ],
    )
    commit(clusters["A"], GROUP, {(TOPIC, 0): 230, (TOPIC, 1): 150, (TOPIC, 2): 80})
    service.translate("A->B", once=True)
    commit(clusters["A"], GROUP, {(TOPIC, 0): 240})  # after the last checkpoint: only A knows it
    on_a = read_all(clusters["A"], TOPIC)
    assert len(on_a) == 250 * PARTITIONS
    processed_on_a = {0: 240, 1: 150, 2: 80}
    kafka.stop("A", kill=True)

    # -- failover with A gone; the group reads everything copied, then is reset on partition 2 ------
    over = service.failover("A->B", [GROUP], apply=True)
    assert over.status == "applied", over.plan.as_dict()
    assert committed_on(clusters["B"], GROUP, COPY) == {0: 200, 1: 150, 2: 80}
    copy = {key(r): r for r in read_all(clusters["B"], COPY)}
    read_on_b = consume_as_group(clusters["B"], GROUP, COPY, 10**6, idle_polls=5)
    assert Counter(r.partition for r in read_on_b) == {1: 50, 2: 120}
    assert committed_on(clusters["B"], GROUP, COPY) == {0: 200, 1: 200, 2: 200}
    commit(clusters["B"], GROUP, {(COPY, 2): 20})  # the operator's reset: partition 2 is read again from 20

    # -- A comes back; failback -------------------------------------------------------------------
    kafka.start("A")
    back = service.failback("A->B", [GROUP], apply=True)
    assert back.status == "applied", back.plan.as_dict()
    assert committed_on(clusters["A"], GROUP, TOPIC) == {0: 240, 1: 200, 2: 20}
    moves = {m.partition: m for m in back.plan.moves}
    assert (moves[0].basis, moves[0].known, moves[0].current) == (Basis.ORIGIN_OFFSET, 240, 240)
    assert (moves[1].basis, moves[2].basis) == (Basis.TRANSLATION, Basis.TRANSLATION)
    assert back.plan.warnings == (
        f"group {GROUP} {TOPIC}/2: moves back to 20, before offset 80 (the offset it holds there) up to which it "
        f"had processed on A: its offset on B ({COPY}/2 20) was set back before that point "
        "(60 offsets will be read again)",
        # The 50 per partition never mirrored: the group reads on A those it had not processed (10 of partition 0).
        f"150 offsets failover {over.operation_id} left on A are not on B ({TOPIC}/0 200-249, {TOPIC}/1 200-249, "
        f"{TOPIC}/2 200-249): the groups moved back read on A those of them they had not processed there",
    )

    read_back = consume_as_group(clusters["A"], GROUP, TOPIC, 10**6, idle_polls=5)
    expected = [r for r in on_a if r.offset >= {0: 240, 1: 200, 2: 20}[r.partition]]
    assert sorted(map(key, read_back)) == sorted(map(key, expected))
    assert Counter(r.partition for r in read_back) == {0: 10, 1: 50, 2: 230}

    # Over the whole disaster, partitions 0 and 1: every record of A processed exactly once (on A before,
    # as copies on B, on A after); partition 2: once, and again from 20 on because the group was reset.
    processed = Counter(key(r) for r in on_a if r.offset < processed_on_a[r.partition])
    processed.update(key(copy[key(r)]) for r in read_on_b)
    processed.update(key(r) for r in read_back)
    for r in on_a:
        want = 2 if r.partition == 2 and 20 <= r.offset < 200 else 1
        assert processed[key(r)] == want, f"{r.partition}/{r.offset} processed {processed[key(r)]} times"
    print(
        f"failback: {len(read_back)} records read on A; {sum(processed.values())} processings of "
        f"{len(on_a)} records, the extra {sum(processed.values()) - len(on_a)} only where the group was reset"
    )
