"""The checkpoint topic against a real broker (drkit.kafka.checkpoint_topic): created compacted with one
partition (a second ``ensure`` changes nothing), appends answered on ``poll``, and the reader's fold: each
group's newest value in the order appended, a tombstone removing its group, another flow's keys left out."""

from __future__ import annotations

import time

from confluent_kafka.admin import ConfigResource
from support.kafka_io import unique

from drkit.config import ClusterConfig
from drkit.core.live_checkpoints import CHECKPOINT_TOPIC, record_key
from drkit.errors import Refusal
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.checkpoint_topic import CheckpointWriter

APPENDS = 300  # values of one group appended back to back: the newest must be the last one sent


def test_appends_in_order_and_the_reader_keeps_each_groups_newest(clusters: dict[str, str]) -> None:
    cluster = ClusterConfig(bootstrap_servers=clusters["B"])
    flow, other = f"{unique('A')}->B", f"{unique('C')}->B"
    writer = CheckpointWriter(cluster, "B")
    writer.ensure()
    writer.ensure()  # exists: used as it is
    admin = KafkaAdmin(cluster, "B")
    assert admin.partition_counts()[CHECKPOINT_TOPIC] == 1
    resource = ConfigResource(ConfigResource.Type.TOPIC, CHECKPOINT_TOPIC)
    configs = admin.client.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact"

    answers: list[Refusal | None] = []
    sent = [
        (flow, "g1", b"g1-first"),
        (flow, "g2", b"g2-first"),
        (flow, "g1", b"g1-second"),
        (flow, "g2", None),  # the group deleted: a tombstone
        (other, "g1", b"another flow's"),
        (flow, "g3", b"g3-only"),
        *[(flow, "g4", f"g4-{i}".encode()) for i in range(APPENDS)],
    ]
    try:
        for f, group, value in sent:
            writer.append(record_key(f, group), value, answers.append)
        deadline = time.monotonic() + 60
        while len(answers) < len(sent) and time.monotonic() < deadline:
            writer.poll(0.1)
    finally:
        writer.close()
    assert answers == [None] * len(sent), [a for a in answers if a is not None][:3]

    newest = admin.live_checkpoint_values(flow)
    assert newest == {"g1": b"g1-second", "g3": b"g3-only", "g4": f"g4-{APPENDS - 1}".encode()}
    assert admin.live_checkpoint_values(other) == {"g1": b"another flow's"}
    assert admin.live_checkpoint_values(f"{unique('D')}->B") == {}
