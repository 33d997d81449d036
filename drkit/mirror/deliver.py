"""The task that copies one Spark partition (one source topic-partition) to the target.

It runs inside Spark's Python workers (``mapInArrow``). Records are produced in source-offset
order to the same partition number of the target topic by an idempotent ``acks=all`` producer,
and every delivery report gives the exact downstream offset of one upstream offset. Those pairs
are folded into contiguous ranges and returned to the driver, which writes them to
``offset_syncs`` only after every task of the batch succeeded.

How a delivery report is matched to its upstream offset without a Python object per record: the
producer is idempotent, so the target appends a partition's records in produce order, and
librdkafka reports them in that order. The task keeps, per target partition, the upstream offsets
in produce order and the downstream offsets in report order, and pairs them by position. The
pairing is checked, not assumed: the downstream offsets of one partition must strictly increase
in report order (the broker assigns them in append order, so any reordering shows as a decrease)
and every produced record must have been reported; otherwise the task fails (the batch is
retried: at-least-once, never a wrong sync).

The first record that cannot be delivered stops the task: nothing more is produced, the task
raises, the batch fails, and Spark's progress never moves past it (records already delivered in
the failed attempt are re-delivered on retry: at-least-once, never a loss).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from drkit.core.origin import ORIGIN_HEADER, origin_prefix
from drkit.store.tables import RANGE_COLUMNS, ColumnSpec, arrow_schema, column_names, ddl

#: Output rows of a task: one per contiguous range, with the bytes (keys and values) of the partition
#: and the newest source timestamp it delivered on its first range (0 on the others).
OUTPUT_COLUMNS: tuple[ColumnSpec, ...] = (*RANGE_COLUMNS, ("bytes", "BIGINT"), ("max_timestamp", "BIGINT"))
RANGE_SCHEMA = ddl(OUTPUT_COLUMNS, not_null=False)

#: Prefix of the message of a delivery failure, so the driver can find it in a Spark stack trace.
FAILURE_MARKER = "DRKIT-DELIVERY-FAILED: "

INPUT_COLUMNS = ("topic", "partition", "offset", "key", "value", "ts", "headers")

#: Serve delivery reports (``poll(0)``) once per this many produced records: a failure reported by the
#: target stops the task at most this many records later (they are part of the failed attempt).
POLL_EVERY = 32


#: Print each task's timings to stderr (the benchmark's profile): DRKIT_MIRROR_TASK_TIMING=1.
TIMING = bool(os.environ.get("DRKIT_MIRROR_TASK_TIMING"))
_LOADED = time.monotonic()


class DeliveryFailed(RuntimeError):
    pass


#: Producers kept per process (a Spark Python worker, or the driver when it copies a small batch)
#: between micro-batches, by configuration. Spark reuses its Python workers, so a long-running mirror
#: keeps one idempotent producer (one producer id on the target, warm connections) per worker instead
#: of a new one per partition per batch. A producer that saw any failure is dropped, so a retry starts
#: with a fresh one. The task function reaches this cache only through ``_producer`` and ``_drop``:
#: cloudpickle ships module functions by reference but a module global the task names itself by
#: value, which would copy the cache (and fail on the driver's live producer) into every task.
_PRODUCERS: dict[str, Any] = {}


def _producer(conf: dict[str, Any]) -> tuple[str, Any]:
    import json

    from confluent_kafka import Producer

    key = json.dumps(conf, sort_keys=True, default=str)
    producer = _PRODUCERS.get(key)
    if producer is None:
        producer = _PRODUCERS[key] = Producer(conf)
    return key, producer


def _drop(key: str) -> None:
    _PRODUCERS.pop(key, None)


def _describe(err: Any) -> str:
    try:
        return f"{err.name()}: {err.str()}"
    except AttributeError:
        return str(err)


def _runs(topics: list[str], partitions: list[int]) -> list[tuple[int, int]]:
    """[start, end) index runs of equal (topic, partition): one run for a task's usual single partition."""
    n = len(topics)
    if n and len(set(partitions)) == 1 and len(set(topics)) == 1:
        return [(0, n)]
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, n):
        if topics[i] != topics[i - 1] or partitions[i] != partitions[i - 1]:
            runs.append((start, i))
            start = i
    if n:
        runs.append((start, n))
    return runs


def deliver_batches(
    producer_conf: dict[str, Any],
    topic_map: dict[str, str],
    source_alias: str,
    flush_timeout: float = 300.0,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """Build the ``mapInArrow`` function for one micro-batch.

    Every record gets the ``drkit.origin`` header (``<source alias>:<upstream offset>``, after the
    record's own headers): copies delivered by a batch that then failed have no sync, and their
    origin is what places a group exactly on them at failover (drkit.core.origin).
    """
    origin = origin_prefix(source_alias)

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        from confluent_kafka import KafkaException

        from drkit.core.offsets import SyncRange

        began = time.monotonic()
        cache_key, producer = _producer(producer_conf)
        source_of = {target: source for source, target in topic_map.items()}
        upstream: dict[tuple[str, int], list[int]] = {}  # per source partition, in produce order
        downstream: dict[tuple[str, int], list[int]] = {}  # per target partition, in report order
        sizes: dict[tuple[str, int], int] = {}
        newest: dict[tuple[str, int], int] = {}
        failures: list[str] = []

        def on_delivery(err: Any, msg: Any) -> None:
            where = (msg.topic(), msg.partition())
            reported = downstream.setdefault(where, [])
            if err is not None:
                source = source_of.get(where[0], where[0])
                ups = upstream.get((source, where[1]), [])
                at = ups[len(reported)] if len(reported) < len(ups) else "?"
                failures.append(
                    f"record {source}/{where[1]}@{at} could not be delivered to {where[0]}/{where[1]}: {_describe(err)}"
                )
                reported.append(-1)
                return
            reported.append(msg.offset())

        produce, poll = producer.produce, producer.poll
        produced = 0
        waited = 0.0
        try:
            batches = iter(batches)
            while True:
                wait_started = time.monotonic()
                batch = next(batches, None)
                waited += time.monotonic() - wait_started
                if batch is None:
                    break
                if failures:
                    break
                if not batch.num_rows:
                    continue
                topics = batch.column("topic").to_pylist()
                partitions = batch.column("partition").to_pylist()
                offsets = batch.column("offset").to_pylist()
                keys = batch.column("key").to_pylist()
                values = batch.column("value").to_pylist()
                stamps = batch.column("ts").to_pylist()
                header_col = batch.column("headers")
                headers = header_col.to_pylist() if header_col.null_count < batch.num_rows else None
                for start, end in _runs(topics, partitions):
                    topic, partition = topics[start], partitions[start]
                    target = topic_map.get(topic)
                    if target is None:
                        raise DeliveryFailed(f"{FAILURE_MARKER}topic {topic} is not selected by this flow")
                    source_key = (topic, partition)
                    ups = upstream.setdefault(source_key, [])
                    for i in range(start, end):
                        if failures:
                            break
                        ups.append(offsets[i])
                        hdrs = headers[i] if headers is not None else None
                        mark = (ORIGIN_HEADER, origin + b"%d" % offsets[i])
                        record_headers = [(h["key"], h["value"]) for h in hdrs] + [mark] if hdrs else [mark]
                        while True:
                            try:
                                # confluent-kafka's fifth positional is on_delivery's old name:
                                # timestamp and headers must be passed by keyword.
                                produce(
                                    target,
                                    values[i],
                                    keys[i],
                                    partition,
                                    on_delivery,
                                    timestamp=stamps[i],
                                    headers=record_headers,
                                )
                                break
                            except BufferError:
                                poll(0.1)
                            except KafkaException as exc:
                                ups.pop()
                                failures.append(
                                    f"record {topic}/{partition}@{offsets[i]} could not be delivered to "
                                    f"{target}/{partition}: {_describe(exc.args[0])}"
                                )
                                break
                        produced += 1
                        if not produced % POLL_EVERY:
                            poll(0)
                    piece = batch.slice(start, end - start)
                    nbytes = pc.sum(pc.binary_length(piece.column("key"))).as_py() or 0
                    nbytes += pc.sum(pc.binary_length(piece.column("value"))).as_py() or 0
                    sizes[source_key] = sizes.get(source_key, 0) + int(nbytes)
                    top = pc.max(piece.column("ts")).as_py()
                    if top is not None:
                        newest[source_key] = max(newest.get(source_key, top), top)
                    poll(0)
            flush_started = time.monotonic()
            remaining = producer.flush(flush_timeout)
            if TIMING:
                print(
                    f"DRKIT-TASK pid={os.getpid()} worker_age={time.monotonic() - _LOADED:.1f} {sorted(upstream)} "
                    f"records={produced} total={time.monotonic() - began:.3f} "
                    f"waiting_for_input={waited:.3f} flush={time.monotonic() - flush_started:.3f}",
                    file=sys.stderr,
                    flush=True,
                )
            if remaining and not failures:
                failures.append(f"{remaining} records were not acknowledged by the target within {flush_timeout}s")
        except BaseException:
            _drop(cache_key)
            producer.flush(5)
            raise
        if failures:
            _drop(cache_key)
            producer.flush(5)
            raise DeliveryFailed(FAILURE_MARKER + failures[0])

        out: dict[str, list[Any]] = {name: [] for name in column_names(OUTPUT_COLUMNS)}
        for (topic, partition), ups in sorted(upstream.items()):
            if not ups:
                continue
            target = topic_map[topic]
            downs = downstream.get((target, partition), [])
            u, d = np.asarray(ups, dtype=np.int64), np.asarray(downs, dtype=np.int64)
            if len(d) != len(u) or (len(d) > 1 and bool(np.any(np.diff(d) <= 0))):
                _drop(cache_key)
                raise DeliveryFailed(
                    f"{FAILURE_MARKER}delivery reports of {target}/{partition} do not match the records produced "
                    f"({len(u)} produced, {len(d)} reported in order): the batch is retried"
                )
            if len(u) > 1 and bool(np.any(np.diff(u) <= 0)):  # Spark gives offset order; never trust it blindly
                order = np.argsort(u, kind="stable")
                u, d = u[order], d[order]
            breaks = np.flatnonzero((np.diff(u) != 1) | (np.diff(d) != 1)) + 1
            starts = [0, *breaks.tolist()]
            ends = [*(breaks - 1).tolist(), len(u) - 1]
            for n, (s, e) in enumerate(zip(starts, ends, strict=True)):
                r = SyncRange(int(u[s]), int(u[e]), int(d[s]), int(d[e]))
                out["source_topic"].append(topic)
                out["target_topic"].append(target)
                out["partition"].append(partition)
                out["upstream_first"].append(r.upstream_first)
                out["upstream_last"].append(r.upstream_last)
                out["downstream_first"].append(r.downstream_first)
                out["downstream_last"].append(r.downstream_last)
                out["record_count"].append(r.record_count)
                out["bytes"].append(sizes.get((topic, partition), 0) if n == 0 else 0)
                out["max_timestamp"].append(newest.get((topic, partition), 0) if n == 0 else 0)
        yield pa.RecordBatch.from_pydict(out, schema=arrow_schema(RANGE_SCHEMA))

    return run
