"""The task that copies one Spark partition (one source topic-partition) to the target.

It runs inside Spark's Python workers (``mapInArrow``). Records are produced in source-offset
order to the same partition number of the target topic by an idempotent ``acks=all`` producer,
and every delivery report gives the exact downstream offset of one upstream offset. Those pairs
are folded into contiguous ranges (drkit.core.offsets) and returned to the driver, which writes
them to ``offset_syncs`` only after every task of the batch succeeded.

The first record that cannot be delivered stops the task: nothing more is produced, the task
raises, the batch fails, and Spark's progress never moves past it (records already delivered in
the failed attempt are re-delivered on retry: at-least-once, never a loss).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from drkit.core.offsets import ranges_from_pairs
from drkit.store.tables import RANGE_COLUMNS, ColumnSpec, arrow_schema, column_names, ddl

#: Output rows of a task: one per contiguous range, with the bytes (keys and values) of the partition
#: on its first range.
OUTPUT_COLUMNS: tuple[ColumnSpec, ...] = (*RANGE_COLUMNS, ("bytes", "BIGINT"))
RANGE_SCHEMA = ddl(OUTPUT_COLUMNS, not_null=False)

#: Prefix of the message of a delivery failure, so the driver can find it in a Spark stack trace.
FAILURE_MARKER = "DRKIT-DELIVERY-FAILED: "

INPUT_COLUMNS = ("topic", "partition", "offset", "key", "value", "ts", "headers")


class DeliveryFailed(RuntimeError):
    pass


#: Producers kept per Python worker between micro-batches, by configuration. Spark reuses its
#: Python workers, so a long-running mirror keeps one idempotent producer (one producer id on the
#: target, warm connections) per worker instead of a new one per partition per batch. A producer
#: that saw any failure is dropped, so a retry starts with a fresh one.
_PRODUCERS: dict[str, Any] = {}


def _producer(conf: dict[str, Any]) -> tuple[str, Any]:
    import json

    from confluent_kafka import Producer

    key = json.dumps(conf, sort_keys=True, default=str)
    producer = _PRODUCERS.get(key)
    if producer is None:
        producer = _PRODUCERS[key] = Producer(conf)
    return key, producer


def _describe(err: Any) -> str:
    try:
        return f"{err.name()}: {err.str()}"
    except AttributeError:
        return str(err)


def deliver_batches(
    producer_conf: dict[str, Any], topic_map: dict[str, str], flush_timeout: float = 300.0,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """Build the ``mapInArrow`` function for one micro-batch."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from confluent_kafka import KafkaException

        cache_key, producer = _producer(producer_conf)
        delivered: dict[tuple[str, int], list[tuple[int, int]]] = {}
        sizes: dict[tuple[str, int], int] = {}
        failures: list[str] = []

        def on_delivery(topic: str, partition: int, upstream: int, err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(
                    f"record {topic}/{partition}@{upstream} could not be delivered to "
                    f"{topic_map.get(topic)}/{partition}: {_describe(err)}"
                )
                return
            delivered.setdefault((topic, partition), []).append((upstream, msg.offset()))

        try:
            for batch in batches:
                cols = {name: batch.column(name).to_pylist() for name in INPUT_COLUMNS}
                for i in range(batch.num_rows):
                    if failures:
                        break
                    topic, partition, offset = cols["topic"][i], cols["partition"][i], cols["offset"][i]
                    target = topic_map.get(topic)
                    if target is None:
                        raise DeliveryFailed(f"{FAILURE_MARKER}topic {topic} is not selected by this flow")
                    headers = cols["headers"][i]
                    key, value = cols["key"][i], cols["value"][i]
                    kwargs: dict[str, Any] = {
                        "partition": partition, "key": key, "value": value, "timestamp": cols["ts"][i],
                        "on_delivery": functools.partial(on_delivery, topic, partition, offset),
                    }
                    if headers:
                        kwargs["headers"] = [(h["key"], h["value"]) for h in headers]
                    while True:
                        try:
                            producer.produce(target, **kwargs)
                            break
                        except BufferError:
                            producer.poll(0.1)
                        except KafkaException as exc:
                            failures.append(
                                f"record {topic}/{partition}@{offset} could not be delivered to "
                                f"{target}/{partition}: {_describe(exc.args[0])}"
                            )
                            break
                    sizes[(topic, partition)] = sizes.get((topic, partition), 0) + len(key or b"") + len(value or b"")
                    producer.poll(0)
                if failures:
                    break
            remaining = producer.flush(flush_timeout)
            if remaining and not failures:
                failures.append(f"{remaining} records were not acknowledged by the target within {flush_timeout}s")
        except BaseException:
            _PRODUCERS.pop(cache_key, None)
            producer.flush(5)
            raise
        if failures:
            _PRODUCERS.pop(cache_key, None)
            producer.flush(5)
            raise DeliveryFailed(FAILURE_MARKER + failures[0])

        out: dict[str, list[Any]] = {name: [] for name in column_names(OUTPUT_COLUMNS)}
        for (topic, partition), pairs in sorted(delivered.items()):
            for n, r in enumerate(ranges_from_pairs(sorted(pairs))):
                out["source_topic"].append(topic)
                out["target_topic"].append(topic_map[topic])
                out["partition"].append(partition)
                out["upstream_first"].append(r.upstream_first)
                out["upstream_last"].append(r.upstream_last)
                out["downstream_first"].append(r.downstream_first)
                out["downstream_last"].append(r.downstream_last)
                out["record_count"].append(r.record_count)
                out["bytes"].append(sizes.get((topic, partition), 0) if n == 0 else 0)
        yield pa.RecordBatch.from_pydict(out, schema=arrow_schema(RANGE_SCHEMA))

    return run
