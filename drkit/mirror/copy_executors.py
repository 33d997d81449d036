"""A batch copied by one Spark job of copy tasks (drkit.mirror.executor): no record flows through the driver.

The driver splits the batch's partitions into groups (one task each), runs the job, and gets back each
task's ranges, where its reads ended and where it ran. Invariant: a failure a task detected is raised as
the driver's own copy raises it; a job cancelled because the mirror is stopping gives the batch up; a
task's closure holds no secret (the clients' secrets are sealed apart: drkit.runtime.task_secrets).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from drkit.config import ClusterConfig, FlowConfig
from drkit.core.batch import MirrorState
from drkit.core.offsets import BatchRanges
from drkit.kafka import clients
from drkit.layout import flow_dir_name
from drkit.mirror.context import reader_group_id, source_consumer_settings
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.copy_path import CopyRequest, ProducerConf
from drkit.mirror.executor import CopyTask, ExactlyOnceTask, TaskResult, copy_partitions, warm
from drkit.mirror.failure import failure_message
from drkit.mirror.faults import FaultPlan
from drkit.mirror.lease import LeaseStamp
from drkit.mirror.reader import ABANDONED_MARKER, BatchAbandoned
from drkit.mirror.report import BatchReport
from drkit.mirror.settle import ReadSettler
from drkit.runtime.task_secrets import TaskSecrets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: A batch's partitions split into the tasks of its copy job.
Groups = Callable[[BatchRanges], tuple[BatchRanges, ...]]


class CopyTasks:
    """What each copy task of a flow's batches gets: settings, and the driver's fault plan (none unless injected)."""

    def __init__(
        self,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        stall_seconds: float,
        skip_removed: bool,
        local: bool,
        faults: FaultPlan,
        secrets: TaskSecrets,
        lease: LeaseStamp | None = None,
    ) -> None:
        self.flow, self.source, self.target = flow, source, target
        self.stall_seconds, self.skip_removed, self.local, self.faults = stall_seconds, skip_removed, local, faults
        self.secrets = secrets
        self.lease = lease

    def task(
        self, producer_conf: dict[str, Any], topic_map: dict[str, str], exactly_once: ExactlyOnceTask | None = None
    ) -> CopyTask:
        consumer_conf = clients.client_config(
            self.source,
            self.flow.source,
            **{
                "group.id": reader_group_id(self.flow),
                "enable.auto.commit": False,
                **source_consumer_settings(),
            },
        )
        consumer_conf.pop("logger", None)  # not picklable; the task process makes its own
        sections = {"consumer": consumer_conf, "producer": {k: v for k, v in producer_conf.items() if k != "logger"}}
        if exactly_once is not None:
            sections["target"] = exactly_once.target_conf
        public, ref = self.secrets.seal(sections)
        if exactly_once is not None:
            exactly_once = dataclasses.replace(exactly_once, target_conf=public["target"])
        lease = self.lease
        return CopyTask(
            public["consumer"],
            public["producer"],
            dict(topic_map),
            self.flow.source,
            self.flow.target,
            self.stall_seconds,
            self.skip_removed,
            self.local,
            self.faults,
            exactly_once,
            ref,
            0 if lease is None else lease.epoch,
        )

    def target_conf(self) -> dict[str, Any]:
        """The target's client settings, picklable (an exactly-once task reads its copies back); :meth:`task`
        seals their secrets."""
        conf = clients.client_config(self.target, self.flow.target)
        conf.pop("logger", None)
        return conf


class ExecutorCopy:
    """A batch's copy job: one task per group of whole partitions (``groups``), each task as ``task`` makes it."""

    def __init__(
        self,
        flow: FlowConfig,
        spark: SparkSession,
        groups: Groups,
        task: Callable[[dict[str, Any], dict[str, str]], CopyTask],
        settle: ReadSettler,
        stopping: Callable[[], bool],
    ) -> None:
        self.flow, self.spark, self._groups, self.task = flow, spark, groups, task
        self._settle, self._stopping = settle, stopping

    def copy(self, request: CopyRequest, state: MirrorState, report: BatchReport) -> tuple[pa.Table, MirrorState]:
        ranges = request.ranges
        groups = self._groups(ranges)
        report.sites = ()
        if not groups:
            return COPY_SCHEMA.empty_table(), state
        task = copy_partitions(self.task(request.producer_conf, request.topic_map))
        sc = self.spark.sparkContext
        sc.setJobDescription(f"drkit mirror {self.flow.name}: copy of batch {request.batch_id}")
        try:
            results: list[TaskResult] = sc.parallelize(list(groups), len(groups)).mapPartitions(task).collect()
        except Exception:
            # Stopping the query cancels its running jobs (the copy job runs in the query's thread).
            if self._stopping():
                raise BatchAbandoned(f"{ABANDONED_MARKER}the mirror is stopping") from None
            raise
        failed = [r for r in results if r.failure is not None]
        if failed:
            raise failed[0].error()
        reached: dict[tuple[str, int], int] = {}
        removed: dict[tuple[str, int], tuple[int, int]] = {}
        for r in results:
            reached.update(r.reached)
            removed.update(r.removed)
        self._settle.removed(removed)
        self._settle.skipped(sum(r.skipped for r in results))
        state = self._settle.short_reads(ranges, reached, state)
        report.sites = tuple(r.site for r in results)
        return pa.concat_tables([r.table() for r in results]), state


def slots(spark: SparkSession) -> int:
    """Copy tasks a batch may run at once: the cores of the executors (of the driver in local mode), as Spark
    counts them when no ``spark.default.parallelism`` is set."""
    return max(1, int(spark.sparkContext.defaultParallelism))


def warm_workers(
    flow: str, spark: SparkSession, task: Callable[[dict[str, Any], dict[str, str]], CopyTask]
) -> Callable[[ProducerConf, dict[str, str]], None]:
    """Start the executors' Python workers while the query starts, in the background: a worker's start (a fork
    and drkit's imports) would otherwise be paid inside the first batch. A failure here only costs that (the
    first batch reports what is wrong)."""

    def start(producer_conf: ProducerConf, topic_map: dict[str, str]) -> None:
        sc, n = spark.sparkContext, slots(spark)
        tasks = warm(task(producer_conf(), topic_map))

        def run() -> None:
            started = time.monotonic()
            try:
                pids = sc.parallelize(range(n), n).mapPartitions(tasks).collect()
                log.info(
                    "flow %s: copy workers ready in %.2fs (%d process(es))",
                    flow,
                    time.monotonic() - started,
                    len(set(pids)),
                )
            except Exception as exc:
                log.debug("flow %s: the copy workers' warm-up failed: %s", flow, failure_message(exc))

        threading.Thread(target=run, name=f"drkit-warm-{flow_dir_name(flow)}", daemon=True).start()

    return start


def no_warm_up(producer_conf: ProducerConf, topic_map: dict[str, str]) -> None:
    """Batches never go to copy tasks here (drkit.core.copying.may_copy_on_executors): no worker to start."""
    return None
