"""The wiring of a mirror job: its collaborators and its copy path, built once from the context.

Invariant: the job builds nothing; everything it uses is made here from the context the facade built
(``drkit.service``: clusters, offset-sync log, state files), and its copy path is chosen here once
(drkit.core.copy_path) from the flow's delivery, the Spark master and whether the run is one-shot.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from drkit.config import FlowConfig
from drkit.core.copy_path import CopyPathKind, copy_path_kind
from drkit.core.copying import (
    CopyPlace,
    ReadFailure,
    ReadFailureAction,
    copy_groups,
    copy_place,
    is_local_master,
    may_copy_on_executors,
    read_failure_action,
)
from drkit.core.mirror_lease import Instance
from drkit.kafka.topology import TopologyReconciler
from drkit.mirror.context import MirrorContext
from drkit.mirror.continuous import ContinuousCopier
from drkit.mirror.copier_tasks import CopierTasks
from drkit.mirror.copy_driver import DriverCopy
from drkit.mirror.copy_exactly_once import ExactlyOnceCopy, SyncedTails, TransactionalDriverCopy, slot_task_groups
from drkit.mirror.copy_executors import CopyTasks, ExecutorCopy, no_warm_up, slots, warm_workers
from drkit.mirror.copy_path import AtLeastOnceCopy, ContinuousCopy, CopyPath
from drkit.mirror.executor import CopyTask, ExactlyOnceTask
from drkit.mirror.faults import KillPoint, kill_here
from drkit.mirror.heartbeat import HeartbeatWriter
from drkit.mirror.job import MirrorJob
from drkit.mirror.lane_transactions import LaneTransactions, target_read_back
from drkit.mirror.lanes import ahead_limit
from drkit.mirror.latency_probe import probed
from drkit.mirror.lease import LeaseStamp, MirrorLease
from drkit.mirror.observer import SourceObserver
from drkit.mirror.outage import ClusterWatch
from drkit.mirror.producers import new_producer
from drkit.mirror.reader import BatchReader
from drkit.mirror.settle import ReadSettler
from drkit.mirror.stopping import Stopping
from drkit.mirror.topology import TopologyFollower
from drkit.mirror.transactions import SlotProducers
from drkit.runtime.task_secrets import TaskSecrets, spark_files


def mirror_job(context: MirrorContext, flow: FlowConfig, once: bool, instance: Instance) -> MirrorJob:
    """The job of ``flow`` for one run (``once``: until caught up) of this process (``instance``), with every
    collaborator it needs."""
    config = context.config
    m = flow.mirror
    lease = MirrorLease(
        flow.name,
        context.clusters.lease_entries(flow),
        context.syncs,
        instance,
        lease_settings(context, flow),
        int(m.lease_seconds * 1000),
        int(m.lease_renew_seconds * 1000),
    )
    selector = config.topic_selector(flow)
    source_admin = context.clusters.admin(flow.source)
    heartbeat_source_admin = context.clusters.admin(flow.source)
    target_admin = context.clusters.admin(flow.target)
    source_watch = ClusterWatch(flow.name, "source", flow.source, (source_admin, heartbeat_source_admin))
    files = context.files
    reconciler = TopologyReconciler(
        flow,
        selector,
        source_admin,
        target_admin,
        owned=lambda: files.created_topics(flow.name),
        on_created=lambda names: files.add_created_topics(flow.name, names),
    )
    topology = TopologyFollower(flow.name, reconciler, files, flow.topology.refresh_interval_seconds, source_admin)
    skip_removed = (
        read_failure_action(ReadFailure.RECORDS_REMOVED, flow.mirror.fail_on_data_loss)
        is ReadFailureAction.SKIP_REMOVED
    )
    reader = BatchReader(lambda: context.clusters.source_consumer(flow), read_stall_seconds(flow), skip_removed)
    stopping = Stopping()
    return MirrorJob(
        context,
        flow,
        copy_path(context, flow, once, reader, stopping, lease),
        reader,
        stopping,
        SourceObserver(flow, source_admin, context.runs, source_watch),
        topology,
        HeartbeatWriter(flow, config.clusters[flow.source], heartbeat_source_admin, target_admin),
        (source_watch, ClusterWatch(flow.name, "target", flow.target, (target_admin,))),
        target_admin,
        lease,
    )


def lease_settings(context: MirrorContext, flow: FlowConfig) -> dict[str, str]:
    """What every mirror process of a flow must agree on (a standby that differs is refused): what it copies,
    where to, how, and the state root it records in."""
    m = flow.mirror
    return {
        "topics": json.dumps(flow.topics.model_dump(mode="json"), sort_keys=True),
        "replication_policy": f"{flow.replication_policy} (separator {flow.separator!r})",
        "delivery": str(m.delivery),
        "transaction_slots": str(m.transaction_slots),
        "lease_seconds": f"{m.lease_seconds:g}",
        "state": context.layout.where,
    }


def read_stall_seconds(flow: FlowConfig) -> float:
    """As long as Spark's Kafka consumer would wait (its ``default.api.timeout.ms``, 60 s by default)."""
    try:
        return int(flow.mirror.consumer.get("default.api.timeout.ms", 60_000)) / 1000
    except ValueError:
        return 60.0


def copy_path(
    context: MirrorContext,
    flow: FlowConfig,
    once: bool,
    reader: BatchReader,
    stopping: Stopping,
    lease: LeaseStamp | None = None,
) -> CopyPath:
    """The one copy path of this run (drkit.core.copy_path), with its places: the driver and the copy tasks."""
    m, spark = flow.mirror, context.spark
    master = str(spark.sparkContext.master)
    local = is_local_master(master)
    kind = copy_path_kind(m.delivery, local, m.continuous_copy, once, m.driver_copy_max_records)
    servers = context.config.clusters[flow.source].bootstrap_servers
    settle = ReadSettler(flow)
    tasks = CopyTasks(
        flow,
        context.config.clusters[flow.source],
        context.config.clusters[flow.target],
        reader.stall_seconds,
        reader.skip_removed,
        local,
        context.faults,
        TaskSecrets(spark_files(spark)),
        lease,
    )
    may_use_tasks = may_copy_on_executors(master, m.driver_copy_max_records, m.max_offsets_per_trigger)

    def place(records: int) -> CopyPlace:
        return copy_place(master, records, m.driver_copy_max_records)

    if kind in (CopyPathKind.EXACTLY_ONCE, CopyPathKind.CONTINUOUS_EXACTLY_ONCE):
        producers = SlotProducers(flow.name, m.transaction_slots, flow.target, lease=lease)
        tails = SyncedTails(flow.name, context.syncs)

        def eo_task(producer_conf: dict[str, Any], topic_map: dict[str, str]) -> CopyTask:
            exactly_once = ExactlyOnceTask(flow.name, producers.slots, tasks.target_conf(), dict(tails()))
            return tasks.task(producer_conf, topic_map, exactly_once)

        driver = TransactionalDriverCopy(
            flow,
            servers,
            reader,
            producers,
            tails,
            lambda: context.clusters.target_tail_consumer(flow),
            settle,
            stopping,
            partial(kill_here, context.faults, flow.name, KillPoint.ACKNOWLEDGED),
        )
        executors = ExecutorCopy(flow, spark, slot_task_groups(producers), eo_task, settle, stopping)
        warm = warm_workers(flow.name, spark, eo_task) if may_use_tasks else no_warm_up
        exactly_once = ExactlyOnceCopy(flow, producers, tails, driver, executors, place, warm)
        if kind is CopyPathKind.EXACTLY_ONCE:
            return exactly_once
        read = target_read_back(tails, lambda: context.clusters.target_tail_consumer(flow), flow.source, flow.target)
        transactions = LaneTransactions(
            producers,
            read,
            flow.target,
            before_commit=partial(kill_here, context.faults, flow.name, KillPoint.ACKNOWLEDGED),
        )
        txn_copier = ContinuousCopier(
            flow.name,
            lambda: context.clusters.source_consumer(flow),
            flow.source,
            flow.target,
            ahead=ahead_limit(m.max_offsets_per_trigger),
            lease=lease,
            transactions=transactions,
        )
        return ContinuousCopy(flow.name, txn_copier, exactly_once, settle, stopping)
    own = AtLeastOnceCopy(
        DriverCopy(flow, servers, reader, settle, stopping, lease),
        ExecutorCopy(flow, spark, lambda ranges: copy_groups(ranges, slots(spark)), tasks.task, settle, stopping),
        place,
        warm_workers(flow.name, spark, tasks.task) if may_use_tasks else no_warm_up,
    )
    if kind is CopyPathKind.AT_LEAST_ONCE:
        return own
    if kind is CopyPathKind.CONTINUOUS_TASKS:
        # The copy tasks hold every executor core for as long as the mirror runs: a batch they cannot give its
        # ranges is copied by the driver (a Spark job of copy tasks would wait for a core that never frees).
        in_driver = AtLeastOnceCopy(own.driver, own.executors, lambda records: CopyPlace.DRIVER, no_warm_up)
        conf = spark.sparkContext.getConf()
        connect = conf.get("spark.driver.host") or "127.0.0.1"
        tasks_copier = CopierTasks(
            flow.name,
            spark,
            slots(spark),
            tasks.task,
            tasks.secrets,
            (conf.get("spark.driver.bindAddress") or connect, connect, context.config.spark.copier_port or 0),
            reader.stall_seconds,
            ahead_limit(m.max_offsets_per_trigger),
            lease,
        )
        return ContinuousCopy(flow.name, tasks_copier, in_driver, settle, stopping)
    # The benchmark's latency probe (drkit.mirror.latency_probe): the same two factories when it is off.
    consumer, producer = probed(lambda: context.clusters.source_consumer(flow), new_producer)
    copier = ContinuousCopier(
        flow.name,
        consumer,
        flow.source,
        flow.target,
        new_producer_=producer,
        ahead=ahead_limit(m.max_offsets_per_trigger),
        lease=lease,
    )
    return ContinuousCopy(flow.name, copier, own, settle, stopping)
