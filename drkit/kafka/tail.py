"""Reading back a target partition's records past the synced end, with the origin each copies.

One reader for the operations (failover's RPO and placement, failback; through ``KafkaAdmin.read_tail``)
and for the exactly-once mirror, which reads back what an earlier writer committed before it copies
(drkit.core.exactly_once), in the driver or in a copy task. Reads are ``read_committed``: a copy in a
transaction that was aborted, or is still open (a crashed mirror's, until it is fenced or times out), is
not on the target for anyone who reads it as the target's consumers should, so it is neither mirrored nor
a place to resume.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from drkit.core.origin import TAIL_READ_LIMIT, TailRecord, TargetTail, origin_of
from drkit.errors import AccessDenied, ClusterError
from drkit.kafka.authz import Operation, denied

#: How long one read of a tail waits for records: a call returns only with a full chunk or at its
#: timeout, and a tail is mostly smaller than a chunk (1 s per partition made a failover's RTO seconds longer).
TAIL_READ_WAIT_SECONDS = 0.05

#: The group id of the operations' tail reader (it never joins the group; librdkafka looks up its coordinator,
#: so the principal needs DESCRIBE on it: docs/security.md).
TAIL_GROUP = "_drkit-tail"

#: The consumer settings a tail reader needs (with a group id the caller names). The broker holds a fetch at
#: the partition's end for ``fetch.wait.max.ms`` before it answers empty, and the end is known only then: 500 ms
#: by default, per partition read.
TAIL_CONSUMER_SETTINGS: dict[str, Any] = {
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 10,
}


def read_tail(
    consumer: Any,
    alias: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    origin_alias: str,
    timeout: float,
    group: str | None = None,
) -> TargetTail:
    """The committed records of ``topic/partition`` in ``[start, end)`` on cluster ``alias``, with the origin
    each carries from cluster ``origin_alias`` (at most TAIL_READ_LIMIT of them: ``end`` of the result says
    where reading stopped: there, or the partition's last stable offset). ``consumer`` is assigned here;
    ``group``: its group id, named when the cluster refuses it."""
    stop = min(end, start + TAIL_READ_LIMIT)
    records: list[TailRecord] = []
    if stop <= start:
        return TargetTail(start, start, ())
    deadline = time.monotonic() + timeout
    reached = start
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        while reached < stop:
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"cluster {alias}: {topic}/{partition}: reading offsets {start}-{stop} did not "
                    f"reach {stop} within {timeout:.0f}s (stopped at {reached})"
                )
            for message in consumer.consume(1000, timeout=TAIL_READ_WAIT_SECONDS):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        # Everything below the partition's end (its last stable offset) was delivered
                        # (markers and aborted records are not).
                        stop = min(stop, max(start, message.offset() or start))
                        reached = max(reached, stop)
                        continue
                    refused = refusal(alias, error, topic, group)
                    raise refused or ClusterError(f"cluster {alias}: cannot read {topic}/{partition}: {error}")
                offset = message.offset()
                if offset is None:
                    continue
                if offset >= stop:
                    reached = stop
                    break
                records.append(TailRecord(offset, origin_of(header_list(message.headers()), origin_alias)))
                reached = offset + 1
    except KafkaException as exc:
        refused = refusal(alias, exc, topic, group)
        raise refused or ClusterError(f"cluster {alias}: cannot read {topic}/{partition}: {exc.args[0]}") from None
    return TargetTail(start, stop, tuple(records))


def refusal(alias: str, error: Any, topic: str | None, group: str | None) -> AccessDenied | None:
    """A refusal met by a reader that never joins its group: on the group, it is the coordinator's lookup
    (DESCRIBE on the group); otherwise the fetch (READ on the topic)."""
    err = error.args[0] if isinstance(error, KafkaException) else error
    if group is not None and isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return denied(alias, err, Operation.DESCRIBE, group=group)
    return denied(alias, error, Operation.READ, topic)


def header_list(headers: object) -> list[tuple[str, bytes | str | None]]:
    """confluent-kafka gives a record's headers as a list of pairs (or None); never a dict when read."""
    return list(headers) if isinstance(headers, list) else []


def read_copies(
    consumer: Any,
    alias: str,
    wanted: dict[tuple[str, int], tuple[int, int]],
    origin_alias: str,
    timeout: float,
) -> tuple[dict[tuple[str, int], list[tuple[int | None, int]]], frozenset[tuple[str, int]]]:
    """The committed records of several target partitions at once, as (origin on ``origin_alias`` or None,
    target offset), in target order; and the partitions whose read ended at a copy of their end origin,
    before the partition's end (more may follow). ``wanted``: per (target topic, partition), where to start
    and the source offset whose copy ends the read (the read also ends at the partition's last stable
    offset). A partition with nothing at or after its start (its high watermark) is not fetched at all."""
    out: dict[tuple[str, int], list[tuple[int | None, int]]] = {key: [] for key in wanted}
    cut: set[tuple[str, int]] = set()
    pending: dict[tuple[str, int], int] = {}
    try:
        for (topic, partition), (start, stop_origin) in wanted.items():
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
            if high > start:
                pending[(topic, partition)] = stop_origin
        if not pending:
            return out, frozenset()
        consumer.assign([TopicPartition(t, p, wanted[(t, p)][0]) for t, p in pending])
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                t, p = next(iter(pending))
                raise ClusterError(f"cluster {alias}: {t}/{p}: reading its records back took over {timeout:.0f}s")
            for message in consumer.consume(1000, timeout=TAIL_READ_WAIT_SECONDS):
                key = (message.topic(), message.partition())
                if key not in pending:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        del pending[key]
                        continue
                    refused = denied(alias, error, Operation.READ, key[0])
                    raise refused or ClusterError(f"cluster {alias}: cannot read {key[0]}/{key[1]}: {error}")
                offset = message.offset()
                if offset is None:
                    continue
                origin = origin_of(header_list(message.headers()), origin_alias)
                out[key].append((origin, offset))
                if origin is not None and origin >= pending[key]:
                    del pending[key]
                    cut.add(key)
    except KafkaException as exc:
        t, p = next(iter(wanted))
        refused = denied(alias, exc, Operation.READ, t)
        raise refused or ClusterError(f"cluster {alias}: cannot read {t}/{p}: {exc.args[0]}") from None
    return out, frozenset(cut)
