"""The ``__consumer_offsets`` tail against a real broker: its fold equals what the admin API reports for every
group, after plain commits, an offset deletion, a group deletion and committed and aborted transactional
offset commits."""

from __future__ import annotations

import socket
import struct
import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.kafka_io import commit, create_topic, produce, unique

from drkit.config import ClusterConfig
from drkit.core.group_commits import CommitLog
from drkit.kafka.consumer_offsets import ConsumerOffsetsTail

PARTITIONS = 3


def _admin_offsets(admin: AdminClient, group: str, topic: str) -> dict[tuple[str, int], int]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def _delete_offset(bootstrap: str, group: str, topic: str, partition: int) -> None:
    """One OffsetDelete request (API key 47, v0) to the single broker, the group's coordinator: confluent-kafka
    2.16 has no ``delete_consumer_group_offsets`` and the broker libs carry no kafka-consumer-groups tool."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)

    def string(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    body = string(group) + struct.pack(">i", 1) + string(topic) + struct.pack(">ii", 1, partition)
    request = struct.pack(">hhi", 47, 0, 1) + string("drkit-test") + body
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _exactly(sock, 4))[0]
        response = _exactly(sock, size)
    # correlation id, error code, throttle, topics: 1, name, partitions: 1, partition, error code
    (top_error,) = struct.unpack(">h", response[4:6])
    assert top_error == 0, f"OffsetDelete failed: error {top_error}"
    assert struct.unpack(">h", response[-2:])[0] == 0, "OffsetDelete failed on the partition"


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "broker closed the connection"
        out += chunk
    return out


def _transactional_commit(bootstrap: str, topic: str, group: str, offsets: dict[int, int], commit_it: bool) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn")})
    meta_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, key=b"k", value=b"v", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, p, o) for p, o in offsets.items()], meta_consumer.consumer_group_metadata(), 30
        )
        if commit_it:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    finally:
        meta_consumer.close()


def test_tail_fold_equals_the_admin_api(clusters: dict[str, str]) -> None:
    alias, bootstrap = next(iter(clusters.items()))
    topic = unique("offs")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    produce(
        bootstrap, topic, [{"key": b"k", "value": b"v", "partition": p} for p in range(PARTITIONS) for _ in range(20)]
    )
    plain = [unique("g-plain") for _ in range(3)]
    for i, group in enumerate(plain):
        commit(bootstrap, group, {(topic, p): 3 + i + p for p in range(PARTITIONS)})
        commit(bootstrap, group, {(topic, p): 10 + i + p for p in range(PARTITIONS)})
    trimmed, deleted, txn_ok, txn_abort = unique("g-trim"), unique("g-del"), unique("g-txn"), unique("g-abort")
    commit(bootstrap, trimmed, {(topic, p): 5 + p for p in range(PARTITIONS)})
    commit(bootstrap, deleted, {(topic, p): 7 for p in range(PARTITIONS)})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _delete_offset(bootstrap, trimmed, topic, 1)
    admin.delete_consumer_groups([deleted])[deleted].result(30)
    _transactional_commit(bootstrap, topic, txn_ok, {0: 4, 2: 6}, commit_it=True)
    _transactional_commit(bootstrap, topic, txn_abort, {0: 9, 1: 9}, commit_it=False)
    groups = [*plain, trimmed, deleted, txn_ok, txn_abort]
    expected = {g: _admin_offsets(admin, g, topic) for g in groups}
    # The admin API's view of the scenario itself, so a broker that ignored a step would not pass unnoticed.
    assert (topic, 1) not in expected[trimmed] and len(expected[trimmed]) == PARTITIONS - 1
    assert expected[deleted] == {} and expected[txn_abort] == {}
    assert expected[txn_ok] == {(topic, 0): 4, (topic, 2): 6}

    log = CommitLog()
    folded: dict[str, dict[tuple[str, int], int]] = {}
    deadline = time.monotonic() + 60
    with ConsumerOffsetsTail(ClusterConfig(bootstrap_servers=bootstrap), alias) as tail:
        while time.monotonic() < deadline:
            log.apply_all(tail.read(0.5))
            folded = {g: {tp: c.offset for tp, c in log.offsets(g).items() if tp[0] == topic} for g in groups}
            if folded == expected:
                break
    assert folded == expected
