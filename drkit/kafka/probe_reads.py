"""A probe drill's reads: a source range with its records' content, and a target read as a drill group would.

Both read ``read_committed``, as the target's consumers should (drkit.kafka.tail). The drill group's read takes
its start from the group's committed offsets, as a consumer of it does once it joined, and starts at the
partition's earliest record where that offset is gone (``auto.offset.reset=earliest``: a consumer reset to the
latest would skip more). Nothing is committed: the drill group's offsets stay what the probe committed. Every
broker error names the cluster; an authorization refusal names the ACL missing (drkit.kafka.authz).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, TopicPartition

from drkit.config import ClusterConfig
from drkit.core.origin import origin_of
from drkit.core.probe import ReadRecord, SourceRecord, record_digest
from drkit.errors import ClusterError
from drkit.kafka.clients import client_config
from drkit.kafka.tail import TAIL_GROUP, header_list, refusal

#: How long one poll waits: short, so that the time of the first record is measured to tens of milliseconds.
POLL_SECONDS = 0.05
_SETTINGS: dict[str, Any] = {
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 10,
}

Key = tuple[str, int]


def _headers(message: Any) -> list[tuple[str, bytes | str | None]]:
    return header_list(message.headers())


def _fail(alias: str, error: Any, what: str, topic: str | None = None, group: str | None = None) -> Exception:
    return refusal(alias, error, topic, group) or ClusterError(f"cluster {alias}: {what}: {_error_of(error)}")


def _error_of(error: Any) -> Any:
    return error.args[0] if isinstance(error, KafkaException) else error


def read_source(
    cluster: ClusterConfig,
    alias: str,
    ranges: Mapping[Key, tuple[int, int]],
    timeout: float,
    origin_alias: str | None = None,
) -> dict[Key, list[SourceRecord]]:
    """The records of each (topic, partition) in ``[start, end)`` with their content and timestamp, and with
    ``origin_alias`` the source offset their origin header names (a range whose records are gone, by
    retention or compaction, yields what is there)."""
    out: dict[Key, list[SourceRecord]] = {key: [] for key in ranges}
    pending = {key: end for key, (start, end) in ranges.items() if end > start}
    if not pending:
        return out
    consumer = Consumer(client_config(cluster, alias, **{**_SETTINGS, "group.id": TAIL_GROUP}))
    try:
        consumer.assign([TopicPartition(t, p, ranges[(t, p)][0]) for t, p in pending])
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                (t, p), end = next(iter(pending.items()))
                raise ClusterError(f"cluster {alias}: {t}/{p}: reading up to offset {end} took over {timeout:.0f}s")
            for m in consumer.consume(1000, timeout=POLL_SECONDS):
                key = (str(m.topic()), int(m.partition() or 0))
                error = m.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.pop(key, None)  # nothing more there: the range's rest is gone or aborted
                        continue
                    raise _fail(alias, error, f"cannot read {key[0]}/{key[1]}", key[0])
                offset = m.offset()
                if key not in pending or offset is None:
                    continue
                if offset >= pending[key]:
                    pending.pop(key)
                    continue
                headers = _headers(m)
                origin = None if origin_alias is None else origin_of(headers, origin_alias)
                out[key].append(
                    SourceRecord(offset, record_digest(m.key(), m.value(), headers), m.timestamp()[1], origin)
                )
                if offset + 1 >= pending[key]:
                    pending.pop(key)
    except KafkaException as exc:
        raise _fail(alias, exc, "cannot read the source's records") from None
    finally:
        consumer.close()
    return out


def read_as_group(
    cluster: ClusterConfig,
    alias: str,
    group: str,
    partitions: Sequence[Key],
    origin_alias: str,
    done: Callable[[Key, Sequence[ReadRecord], bool], bool],
    wait_seconds: float,
    cap: int,
) -> tuple[dict[Key, list[ReadRecord]], float | None]:
    """Read ``partitions`` from ``group``'s committed offsets until ``done(partition, read so far, at its end)``
    holds for every one, ``cap`` records were read from one, or ``wait_seconds`` passed. Returns the records
    read and the seconds from the start to the first one (None: none)."""
    out: dict[Key, list[ReadRecord]] = {key: [] for key in partitions}
    if not partitions:
        return out, None
    consumer = Consumer(client_config(cluster, alias, **{**_SETTINGS, "group.id": group}))
    began = time.monotonic()
    first: float | None = None
    try:
        committed = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=30)
        starts = {(tp.topic, tp.partition): tp.offset for tp in committed}
        missing = [key for key in partitions if starts.get(key, OFFSET_INVALID) < 0]
        if missing:
            t, p = missing[0]
            raise ClusterError(f"cluster {alias}: group {group} holds no offset for {t}/{p}: nothing to read from")
        consumer.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in partitions])
        at_end: set[Key] = set()
        pending = {key for key in partitions if not done(key, out[key], False)}
        deadline = began + wait_seconds
        while pending and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=POLL_SECONDS):
                key = (str(m.topic()), int(m.partition() or 0))
                error = m.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(key)
                        continue
                    raise _fail(alias, error, f"cannot read {key[0]}/{key[1]} as group {group}", key[0], group)
                offset = m.offset()
                if key not in pending or offset is None:  # done: what follows is not part of the account
                    continue
                if first is None:
                    first = time.monotonic() - began
                at_end.discard(key)
                headers = _headers(m)
                digest = record_digest(m.key(), m.value(), headers)
                out[key].append(ReadRecord(offset, origin_of(headers, origin_alias), digest))
            for key in list(pending):
                if done(key, out[key], key in at_end) or len(out[key]) >= cap:
                    pending.discard(key)
    except KafkaException as exc:
        raise _fail(alias, exc, f"cannot read as group {group}", group=group) from None
    finally:
        consumer.close()
    return out, first
