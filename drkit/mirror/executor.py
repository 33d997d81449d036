"""The copy task of a micro-batch, run by Spark on an executor: whole partitions, read and produced there.

The driver plans the batch's ranges (drkit.core.batch), splits its partitions into tasks
(drkit.core.copying.copy_groups) and runs one Spark job, one task per group. Each task reads its
partitions' ranges with its own librdkafka consumer (drkit.mirror.reader.BatchReader: no JVM rows, no
Arrow for the record bytes) and produces them with the process's cached idempotent producer
(drkit.mirror.deliver.Copier). It returns only a :class:`TaskResult`: the exact ranges the target
acknowledged (the ``offset_syncs`` rows), where each partition's read ended, what it skipped, and where
it ran (:class:`drkit.core.copying.CopySite`).

A failure the reader or the copier detects (records removed, a permanent read error, a stalled source,
a delivery failure) is returned, not raised: Spark would retry the task for nothing (the same records,
the same refusal), and the driver raises the same error the driver's own copy raises. Anything else (a
worker killed, an executor lost) fails the attempt and Spark runs the task again, up to
``spark.task.maxFailures``: only the result of the attempt that succeeded reaches the driver, so the
copies of a failed attempt are orphans (duplicates without syncs, whose origin header still names their
source offset).

Everything a task gets is pickled into the job's closure: settings only (no logger, no client), the
task process makes its own; a test's faults too (drkit.mirror.faults), so an executor looks nothing up.
Never a secret: the clients' secret settings travel in a file the driver adds to the session, and the task
names only that file (:attr:`CopyTask.secrets`, drkit.runtime.task_secrets); the task's own process puts
them back (:meth:`CopyTask.consumer_settings`...). Neither is ever printed or logged.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pyarrow as pa

from drkit.core.copying import CopySite, executor_id
from drkit.core.offsets import BatchRanges
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.deliver import Copier
from drkit.mirror.faults import NO_FAULTS, FaultPlan
from drkit.mirror.producers import DeliveryFailed, Fenced, cached_producer, new_producer
from drkit.mirror.reader import BatchReader, ReadFailed, RecordsRemoved, SourceStalled
from drkit.runtime.task_secrets import SecretRef, settings


class TaskFailure(StrEnum):
    """A failure a copy task detected and returns to the driver (which raises it as the driver's copy would)."""

    DELIVERY = "delivery"
    RECORDS_REMOVED = "records_removed"
    READ_FAILED = "read_failed"
    STALLED = "stalled"
    FENCED = "fenced"


_RAISED: dict[TaskFailure, type[Exception]] = {
    TaskFailure.DELIVERY: DeliveryFailed,
    TaskFailure.RECORDS_REMOVED: RecordsRemoved,
    TaskFailure.READ_FAILED: ReadFailed,
    TaskFailure.STALLED: SourceStalled,
    TaskFailure.FENCED: Fenced,
}


@dataclass(frozen=True)
class ExactlyOnceTask:
    """What an exactly-once copy task needs besides the batch's settings (drkit.mirror.transactions)."""

    flow: str
    slots: int
    target_conf: dict[str, Any]  # the target's client settings, for reading copies back (public part)
    tail_from: dict[tuple[str, int], int]  # per source partition: the target offset after its last sync

    def __repr__(self) -> str:  # the target's settings hold secrets
        return f"ExactlyOnceTask({self.flow}, {self.slots} slots)"


@dataclass(frozen=True)
class CopyTask:
    """What every copy task of one batch gets: picklable settings, never a live client or a logger."""

    consumer_conf: dict[str, Any]
    producer_conf: dict[str, Any]
    topic_map: dict[str, str]
    source_alias: str
    target_alias: str
    stall_seconds: float
    skip_removed: bool
    local: bool
    faults: FaultPlan = NO_FAULTS  # the driver's plan (drkit.mirror.faults): a test's, or none
    exactly_once: ExactlyOnceTask | None = None
    #: Where the secret part of the settings above is (sections consumer, producer, target); None: they are whole.
    secrets: SecretRef | None = None
    #: The driver's lease epoch, written on every copy (drkit.core.mirror_lease); 0: no lease.
    epoch: int = 0

    def __repr__(self) -> str:  # never in a trace or a log line: settings a test made whole may hold secrets
        return f"CopyTask({self.source_alias} -> {self.target_alias}, {len(self.topic_map)} topics)"

    def consumer_settings(self) -> dict[str, Any]:
        return settings(self.consumer_conf, self.secrets, "consumer")

    def producer_settings(self) -> dict[str, Any]:
        return settings(self.producer_conf, self.secrets, "producer")

    def target_settings(self) -> dict[str, Any]:
        """The target's client settings of an exactly-once task (for reading copies back)."""
        assert self.exactly_once is not None
        return settings(self.exactly_once.target_conf, self.secrets, "target")


@dataclass(frozen=True)
class TaskResult:
    """What a copy task hands back to the driver: compact, never a record."""

    site: CopySite
    rows: list[dict[str, Any]]  # COPY_SCHEMA rows: the exact ranges the target acknowledged
    reached: dict[tuple[str, int], int]
    removed: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    skipped: int = 0
    failure: TaskFailure | None = None
    message: str = ""

    def table(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows, schema=COPY_SCHEMA)

    def error(self) -> Exception:
        """The failure as the driver's own copy raises it."""
        assert self.failure is not None
        return _RAISED[self.failure](self.message)


#: One source reader per process and source settings: Spark reuses its Python workers, so a running
#: mirror keeps warm connections to the source between batches (as it keeps its producers).
_READERS: dict[str, BatchReader] = {}


def _reader(task: CopyTask) -> BatchReader:
    key = json.dumps([task.consumer_conf, task.secrets and task.secrets.name], sort_keys=True, default=str)
    reader = _READERS.get(key)
    if reader is None:
        conf, alias = task.consumer_settings(), task.source_alias

        def new_consumer() -> Any:
            from confluent_kafka import Consumer

            from drkit.kafka.clients import kafka_logger

            return Consumer({**conf, "logger": kafka_logger(alias, conf)})

        reader = _READERS[key] = BatchReader(new_consumer, task.stall_seconds)
    reader.skip_removed = task.skip_removed
    return reader


def _attempt() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return int(context.attemptNumber()) if context is not None else 0


def copy_partitions(task: CopyTask) -> Callable[[Iterable[BatchRanges]], Iterator[TaskResult]]:
    """The ``mapPartitions`` function of a batch's copy job: each element is one task's partitions."""

    def run(groups: Iterable[BatchRanges]) -> Iterator[TaskResult]:
        for ranges in groups:
            yield copy_ranges(task, ranges, _attempt())

    return run


def copy_ranges(task: CopyTask, ranges: BatchRanges, attempt: int) -> TaskResult:
    """Read ``ranges`` whole and copy them; the result, or the failure detected."""
    site = CopySite(executor_id(os.environ, os.getcwd(), task.local), socket.gethostname(), os.getpid(), attempt, 0, 0)
    found = COPY_SCHEMA.empty_table()
    reached: dict[tuple[str, int], int] = {}
    planned = ranges
    copier: Copier | None = None
    try:
        if task.exactly_once is not None:
            copier, ranges, found, reached = _transactional(task, task.exactly_once, ranges)
        else:
            copier = Copier(
                task.producer_settings(),
                task.topic_map,
                task.source_alias,
                task.target_alias,
                epoch=task.epoch,
            )
        read = _reader(task).read(ranges, copier.copy)
        copied = pa.concat_tables([found, copier.finish()])
    except (DeliveryFailed, RecordsRemoved, ReadFailed, SourceStalled) as exc:
        if copier is not None:
            copier.abort()
        kind = next(k for k, cls in _RAISED.items() if type(exc) is cls)
        return TaskResult(site, [], {}, failure=kind, message=str(exc))
    except BaseException:
        if copier is not None:
            copier.abort()
        raise
    if task.faults.fails_copy_task(f"{site.pid} attempt {attempt}"):
        raise RuntimeError(f"fault plan: copy task failed on purpose after copying (attempt {attempt})")
    records = sum(int(r["record_count"]) for r in copied.to_pylist())
    site = CopySite(site.executor_id, site.host, site.pid, attempt, len(planned), records)
    return TaskResult(site, copied.to_pylist(), {**reached, **read.reached}, dict(read.removed), copier.skipped)


def _transactional(
    task: CopyTask, eo: ExactlyOnceTask, ranges: BatchRanges
) -> tuple[Copier, BatchRanges, pa.Table, dict[tuple[str, int], int]]:
    """An exactly-once task's copier: a fresh producer of its slot's transactional id (a task holds the
    partitions of one slot), initialised before the task reads back its partitions' committed copies; the
    ranges left to copy, the copies found, and where the reads of the partitions they complete ended."""
    from confluent_kafka import Consumer

    from drkit.core.exactly_once import slot_of
    from drkit.kafka.clients import kafka_logger
    from drkit.kafka.tail import TAIL_CONSUMER_SETTINGS
    from drkit.mirror.context import tail_group_id
    from drkit.mirror.transactions import make_transactional, read_back, slot_conf

    topic, partition = next(iter(sorted(ranges)))
    conf = slot_conf(task.producer_settings(), eo.flow, slot_of(topic, partition, eo.slots))
    producer = make_transactional(new_producer, conf, task.target_alias)
    target_conf = task.target_settings()
    consumer = Consumer(
        {
            **target_conf,
            **TAIL_CONSUMER_SETTINGS,
            "group.id": tail_group_id(eo.flow),
            "logger": kafka_logger(task.target_alias, target_conf),
        }
    )
    try:
        found, rows = read_back(consumer, ranges, eo.tail_from, task.topic_map, task.source_alias, task.target_alias)
    finally:
        consumer.close()
    copier = Copier(
        conf,
        task.topic_map,
        task.source_alias,
        task.target_alias,
        producer=producer,
        epoch=task.epoch,
    )
    return copier, dict(found.ranges), rows, found.reached(ranges)


def warm(task: CopyTask) -> Callable[[Iterable[int]], Iterator[int]]:
    """The tasks of the warm-up job a mirror runs as its query starts: Spark starts the Python workers,
    which import this module (so drkit and its clients) and make the cached source consumer and target
    producer the first batch's tasks use (connected, the producer's idempotence id acquired, both holding
    the metadata of the flow's topics: a client learning a topic at its first use waits for it)."""

    def run(parts: Iterable[int]) -> Iterator[int]:
        for _ in parts:
            _, producer = cached_producer(task.producer_settings(), task.target_alias)
            _reader(task).connect(task.topic_map)
            with contextlib.suppress(Exception):  # best effort: the first batch reports a target that is down
                producer.list_topics(timeout=5.0)
            yield os.getpid()

    return run
