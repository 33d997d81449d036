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
from drkit.errors import ClusterError
from drkit.kafka.authz import Operation, denied

#: How long one read of a tail waits for records: a call returns only with a full chunk or at its
#: timeout, and a tail is mostly smaller than a chunk (1 s per partition made a failover's RTO seconds longer).
TAIL_READ_WAIT_SECONDS = 0.05

#: The consumer settings a tail reader needs (with a group id the caller names).
TAIL_CONSUMER_SETTINGS: dict[str, Any] = {
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
}


def read_tail(
    consumer: Any, alias: str, topic: str, partition: int, start: int, end: int, origin_alias: str, timeout: float
) -> TargetTail:
    """The committed records of ``topic/partition`` in ``[start, end)`` on cluster ``alias``, with the origin
    each carries from cluster ``origin_alias`` (at most TAIL_READ_LIMIT of them: ``end`` of the result says
    where reading stopped: there, or the partition's last stable offset). ``consumer`` is assigned here."""
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
                    refused = denied(alias, error, Operation.READ, topic)
                    raise refused or ClusterError(f"cluster {alias}: cannot read {topic}/{partition}: {error}")
                offset = message.offset()
                if offset is None:
                    continue
                if offset >= stop:
                    reached = stop
                    break
                records.append(TailRecord(offset, origin_of(_header_list(message.headers()), origin_alias)))
                reached = offset + 1
    except KafkaException as exc:
        refused = denied(alias, exc, Operation.READ, topic)
        raise refused or ClusterError(f"cluster {alias}: cannot read {topic}/{partition}: {exc.args[0]}") from None
    return TargetTail(start, stop, tuple(records))


def _header_list(headers: object) -> list[tuple[str, bytes | str | None]]:
    """confluent-kafka gives a record's headers as a list of pairs (or None); never a dict when read."""
    return list(headers) if isinstance(headers, list) else []
