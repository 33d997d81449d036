"""Active-active with identity naming: flows A->B and B->A at once on one topic name (real brokers, Spark).

Records produced on both sides; after the mirrors ran (twice, so that every copy had its chance to come
back), every record exists exactly once on each side, counted by a unique id: nothing loops.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from support.kafka_io import create_topic, produce, read_all, unique

from drkit.config import DrkitConfig
from drkit.service import Drkit


def test_identity_both_ways_copies_every_record_once_to_each_side_and_nothing_loops(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig]
) -> None:
    topic = unique("aa")
    for side in ("A", "B"):
        create_topic(clusters[side], topic, 2)
    produce(clusters["A"], topic, [{"partition": i % 2, "value": f"A-{i}".encode()} for i in range(300)])
    produce(clusters["B"], topic, [{"partition": i % 2, "value": f"B-{i}".encode()} for i in range(200)])
    flow = {"replication_policy": "identity", "topics": {"include": [topic]}}
    config = make_config([{"source": "A", "target": "B", **flow}, {"source": "B", "target": "A", **flow}])
    expected = Counter([f"A-{i}".encode() for i in range(300)] + [f"B-{i}".encode() for i in range(200)])

    first = Drkit(config, spark).mirror(None, once=True)
    second = Drkit(config, spark).mirror(None, once=True)  # the copies of the first pass come round

    for side in ("A", "B"):
        values = Counter(r.value for r in read_all(clusters[side], topic))
        assert values == expected, f"{side}: {sum(values.values())} records, expected each of 500 ids once"
    copied = {s.flow: s.records for s in first}
    assert copied == {"A->B": 300, "B->A": 200}
    assert all(s.records == 0 for s in second), [(s.flow, s.records) for s in second]
    # The copies keep their partition: A's record i is in partition i % 2 on B too.
    assert all(r.partition == int(r.value.split(b"-")[1]) % 2 for r in read_all(clusters["B"], topic) if r.value)
