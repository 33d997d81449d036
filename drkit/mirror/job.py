"""The mirror job of one flow: a Spark Structured Streaming query with a ``foreachBatch`` sink.

Per micro-batch, on the driver:

1. If this stream's batch is already in ``offset_syncs`` (the process died after recording it but
   before Spark committed the batch), its records are on the target: skip it, produce nothing.
2. List the source topics the flow selects and make sure their target topics exist.
3. Plan the batch's ranges per source partition (drkit.core.batch) from Spark's offset log: Spark's Kafka
   source only plans, its DataFrame is never read.
4. Copy the ranges (drkit.core.copying decides where): with a cluster master, one Spark job whose tasks
   each read whole partitions with their own librdkafka consumer and produce them with a cached
   idempotent producer (drkit.mirror.executor), so no record flows through the driver; in local mode a
   small batch is read and produced by the driver itself (no Spark job). Either way the same reader
   (drkit.mirror.reader) and ``Copier`` (drkit.mirror.deliver) return the exact offset ranges the target
   acknowledged, and where each part was copied.
5. Append those ranges to ``offset_syncs`` (idempotent per stream and batch id).

Only then does Spark commit the batch. Any failure in 2-5 fails the query before the commit, so
after a restart the batch runs again: no record is lost; records delivered by the failed attempt
exist twice on the target, and only the copies of the successful attempt are in the syncs.

Copy tasks: one per group of whole partitions, each partition in exactly one task and read in offset
order, so a target partition gets its records in order from one producer. Speculation is refused
(a second running copy of a task). A task is retried by Spark after a failure it did not detect itself
(a worker or executor lost: ``spark.task.maxFailures`` > 1 is safe): only the attempt that succeeded
returns its ranges to the driver, so what an earlier attempt delivered is an orphan, a duplicate without
a sync, as after a failed batch. Failures a task detects (a delivery refused, records removed, a stalled
source) are returned, not retried, and fail the batch as the driver's own copy would.

With ``[flows.mirror] delivery = "exactly_once"`` every batch copies its own records, each partition's
copies in one Kafka transaction of its slot's transactional id (drkit.core.exactly_once,
drkit.mirror.transactions), committed before step 5; a producer is initialised (fencing older writers)
before it reads back the committed copies past the last sync, which the batch keeps instead of copying
them again. A fenced producer means another mirror of the flow took over: the mirror stops in one line.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from drkit import metrics
from drkit.config import FlowConfig
from drkit.core.batch import (
    BatchPlan,
    MirrorState,
    ShortRead,
    hold_short_reads,
    lost_message,
    plan_batch,
    renewed_topics,
    short_read_message,
    short_reads,
    state_before,
)
from drkit.core.consistency import divergence_message, synced_partitions, target_divergences, topics_to_read
from drkit.core.continuous import CopyMode, copy_mode
from drkit.core.copying import (
    DRIVER_ID,
    CopyPlace,
    CopySite,
    ReadFailure,
    ReadFailureAction,
    copy_groups,
    copy_place,
    is_local_master,
    may_copy_on_executors,
    read_failure_action,
    speculation_refusal,
)
from drkit.core.exactly_once import Delivery, Partition, slot_groups
from drkit.core.incarnation import Renewal
from drkit.core.offsets import BatchRanges, SourceOffsets
from drkit.core.outage import FailedBatch, OutageAction, outage_action
from drkit.core.reports import MirrorSummary
from drkit.core.selection import NameSelector
from drkit.core.topology import producer_limits
from drkit.errors import ClusterError, DrkitError, MirrorError, RefusedError
from drkit.kafka import clients
from drkit.kafka.topology import TopologyReconciler
from drkit.layout import StatePath, flow_dir_name
from drkit.mirror.context import (
    SOURCE_FETCH_MAX_WAIT_MS,
    SOURCE_ISOLATION,
    MirrorContext,
    reader_group_id,
    source_consumer_settings,
)
from drkit.mirror.continuous import ContinuousCopier
from drkit.mirror.copied import COPY_SCHEMA, RANGE_COLUMNS, totals
from drkit.mirror.deliver import Copier
from drkit.mirror.executor import CopyTask, ExactlyOnceTask, TaskResult, copy_partitions, warm
from drkit.mirror.failure import explain, failure_message, looks_like_outage, source_unreachable
from drkit.mirror.faults import KillPoint
from drkit.mirror.heartbeat import HeartbeatWriter
from drkit.mirror.lanes import Taken, ahead_limit
from drkit.mirror.observer import SourceObserver
from drkit.mirror.offset_log import batch_start_offsets, logged_offsets
from drkit.mirror.outage import PROBE_SECONDS, ClusterWatch, wait_until_reachable
from drkit.mirror.producers import FENCED_MARKER, DeliveryFailed, Fenced
from drkit.mirror.reader import (
    ABANDONED_MARKER,
    BatchAbandoned,
    BatchReader,
    ReadFailed,
    RecordsRemoved,
    SourceStalled,
)
from drkit.mirror.topology import TopologyFollower
from drkit.mirror.transactions import SlotProducers, read_back
from drkit.store import files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Spark's Kafka source retries a failed read of the source's offsets (the planning of a batch) this many
#: times, this far apart, each attempt bounded by the client's ``default.api.timeout.ms``: a continuous
#: mirror waits out a source outage of any length there too, instead of failing its query.
PLANNING_RETRIES = 2**31 - 1
PLANNING_RETRY_INTERVAL_MS = 10_000


#: Producer settings no config may weaken: no loss, no reordering, exact offsets per record.
PRODUCER_FIXED = {
    "acks": "all",
    "enable.idempotence": True,
    "max.in.flight.requests.per.connection": 5,
}
PRODUCER_DEFAULTS = {
    "linger.ms": 5,
    "compression.type": "lz4",
    "message.timeout.ms": 120_000,
    "queue.buffering.max.messages": 500_000,
    "log_level": 3,  # errors only: retriable warnings would flood the job log
}


@dataclass
class BatchReport:
    batch_id: int
    records: int = 0
    bytes: int = 0
    ranges: int = 0
    skipped: bool = False
    seconds: float = 0.0
    plan_seconds: float = 0.0  # the batch's ranges from Spark's offset log, its topics prepared, the plan
    copy_seconds: float = 0.0  # read and produced, every attempt (outages waited out included)
    syncs_seconds: float = 0.0
    in_driver: bool = False
    #: taken from the continuous copier (drkit.mirror.continuous): copied as the records arrived
    ahead: bool = False
    #: where the batch's records were copied: one site per task (the attempt that succeeded), or the driver
    sites: tuple[CopySite, ...] = ()

    def where(self) -> str:
        """The batch log's words for where it was copied."""
        if self.ahead:
            return "copied by the driver as the records arrived"
        if self.in_driver:
            return "copied by the driver"
        if not self.sites:
            return "nothing to copy"
        return f"copied by {len(self.sites)} task(s): " + ", ".join(site.label() for site in self.sites)


def query_name(flow: str, stream_checkpoint: StatePath | Path) -> str:
    """The streaming query's name: the flow, and a digest of its checkpoint (so of its state root).

    Spark refuses a second active query of one name in a session, and a query stopped while its source
    is down stays registered until Spark's Kafka source has closed its admin client, which waits on the
    dead broker (``Admin.close()`` without a timeout): minutes. The same flow under another state root is
    another mirror and must be able to start meanwhile."""
    remote = isinstance(stream_checkpoint, StatePath) and stream_checkpoint.remote
    where = str(stream_checkpoint) if remote else str(Path(stream_checkpoint).absolute())
    digest = hashlib.sha256(where.encode()).hexdigest()[:8]
    return f"drkit-mirror-{flow_dir_name(flow)}-{digest}"


def registration_refusal(flow: str, source: str, name: str, registered: Iterable[tuple[str, bool]]) -> str | None:
    """Why a mirror cannot start while a query of its name is in the Spark session (``registered``: each
    query's name and whether it is active), or None. Spark would refuse it too, naming neither cause."""
    for other, active in registered:
        if other != name:
            continue
        if active:
            return f"flow {flow}: its mirror is already running in this Spark session; stop it before starting another"
        return (
            f"flow {flow}: its previous mirror was stopped but Spark has not released it yet (its Kafka client "
            f"still waits on source cluster {source}); start it from a new process, or wait and retry"
        )
    return None


class FencedMirrorError(MirrorError):
    """Another writer of the flow's transactional ids started: this mirror stops (never retries: a retry
    would fence the other one in turn)."""


def fenced_message(flow: str, target: str, cause: str) -> str:
    """The operator's line for a mirror fenced by a newer one."""
    return (
        f"flow {flow}: another mirror of this flow started writing to cluster {target} with the flow's "
        f"transactional ids and fenced this one ({cause.removeprefix(FENCED_MARKER)[:200]}); this mirror "
        "stops. Run one mirror per flow"
    )


class MirrorJob:
    """Wires the Spark Kafka source, the delivery tasks and the offset-sync store for one flow."""

    def __init__(self, context: MirrorContext, flow: FlowConfig) -> None:
        config = context.config
        self.context = context
        self.config = config
        self.flow = flow
        self.spark = context.spark
        self.source = config.clusters[flow.source]
        self.target = config.clusters[flow.target]
        self.policy = flow.policy()
        self.selector: NameSelector = config.topic_selector(flow)
        self.layout = context.layout
        self.syncs = context.syncs
        self.stream_checkpoint = self.layout.stream_checkpoint(flow.name)
        self.query_name = query_name(flow.name, self.stream_checkpoint)
        self.runs = context.runs
        self.source_admin = context.clusters.admin(flow.source)
        self.target_admin = context.clusters.admin(flow.target)
        self._stream_id: str | None = None
        self._once = False
        self._first_batch_done = False
        #: Set by the runner when it stops waiting for a running batch: the driver's read gives it up.
        self.abandon = threading.Event()
        self._query: StreamingQuery | None = None
        self.skip_removed = (
            read_failure_action(ReadFailure.RECORDS_REMOVED, flow.mirror.fail_on_data_loss)
            is ReadFailureAction.SKIP_REMOVED
        )
        self.reader = BatchReader(self._new_source_consumer, self._read_stall_seconds(), self.skip_removed)
        #: the copier ahead of the batches (drkit.core.continuous.copy_mode): made by ``start``
        self.copier: ContinuousCopier | None = None
        #: exactly-once: the driver's transactional producers, and per source partition the target offset
        #: after its last sync (where reading back starts), from the syncs once, then from each batch
        self.transactions = (
            SlotProducers(flow.name, flow.mirror.transaction_slots, flow.target)
            if flow.mirror.delivery is Delivery.EXACTLY_ONCE
            else None
        )
        self._synced_next: dict[Partition, int] | None = None
        self._batch_id = -1
        #: a test's faults (drkit.mirror.faults), handed to the copy tasks too; none unless injected
        self.faults = context.faults
        self.reports: list[BatchReport] = []
        self.source_watch = ClusterWatch(flow.name, "source", flow.source)
        self.target_watch = ClusterWatch(flow.name, "target", flow.target)
        self.observer = SourceObserver(flow, self.source_admin, self.runs, self.source_watch)
        self.files = context.files
        reconciler = TopologyReconciler(
            flow,
            self.selector,
            self.source_admin,
            self.target_admin,
            owned=lambda: self.files.created_topics(flow.name),
            on_created=lambda names: self.files.add_created_topics(flow.name, names),
        )
        self.topology = TopologyFollower(
            flow.name, reconciler, self.files, flow.topology.refresh_interval_seconds, self.source_admin
        )
        self.heartbeats = HeartbeatWriter(flow, self.source, context.clusters.admin(flow.source), self.target_admin)

    def summary(self) -> MirrorSummary:
        reports = list(self.reports)
        return MirrorSummary(
            self.flow.name,
            len(reports),
            sum(1 for r in reports if r.skipped),
            sum(r.records for r in reports),
            sum(r.bytes for r in reports),
            sum(r.ranges for r in reports),
            tuple(sorted(self.topology.created)),
            frozenset(s.executor_id for r in reports for s in r.sites if not s.in_driver),
            sum(1 for r in reports if r.in_driver and r.records),
        )

    # -- the stream -------------------------------------------------------------------------

    def source_stream(self, once: bool = False) -> DataFrame:
        m = self.flow.mirror
        reader = (
            self.spark.readStream.format("kafka")
            .options(**clients.java_client_options(self.source))
            .option("subscribePattern", self.selector.pattern)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            # Spark's own data-loss check would stop every topic of the flow when one topic is deleted, and
            # copy a re-created topic from the old incarnation's offsets: drkit decides (drkit.core.batch).
            .option("failOnDataLoss", "false")
            .option("kafka.isolation.level", SOURCE_ISOLATION)
            # A batch reads up to ends planned beforehand; where a partition's range ends at its last
            # record, Spark's consumer still polls once more and the broker holds that fetch for
            # fetch.max.wait.ms (500 ms) before answering empty: per partition, so 3 s per batch on a
            # 12-partition topic whenever its producers pause. Configurable ([flows.mirror] consumer).
            .option("kafka.fetch.max.wait.ms", str(SOURCE_FETCH_MAX_WAIT_MS))
        )
        if m.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(m.max_offsets_per_trigger))
        if not once:  # drkit.core.outage: a continuous mirror waits for its source, a one-shot run stops
            reader = reader.option("fetchOffset.numRetries", str(PLANNING_RETRIES)).option(
                "fetchOffset.retryIntervalMs", str(PLANNING_RETRY_INTERVAL_MS)
            )
        for key, value in m.consumer.items():
            reader = reader.option(f"kafka.{key}", value)
        return reader.load().selectExpr(
            "topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "headers"
        )

    def check_targets(self) -> None:
        """Refuse to run on a target that no longer holds what the flow's offset-syncs say it does.

        Checked before any target topic is created: a deleted target topic would otherwise be recreated
        empty, the stream would resume after what it had copied, and the old syncs would translate onto
        records that are gone while the lag reads 0. Only the topics the flow still selects: the others
        are not mirrored any more (``drkit status`` reports them all)."""
        progress = self.syncs.progress(self.flow.name)
        if not progress:
            return
        synced = synced_partitions(progress, self.syncs.target_topics(self.flow.name), self.selector.matches)
        counts = self.target_admin.partition_counts()
        found = target_divergences(synced, counts, self.target_admin.end_offsets(topics_to_read(synced, counts)))
        if found:
            raise RefusedError(divergence_message(self.flow.name, self.flow.target, found))

    def check_not_registered(self) -> None:
        """Refuse to start while this mirror's query is still in the Spark session (running, or stopped
        and not yet released): Spark would refuse it anyway, with a message naming neither."""
        registered = [(q.name, bool(q.isActive)) for q in self.spark.streams.active]
        refusal = registration_refusal(self.flow.name, self.flow.source, self.query_name, registered)
        if refusal is not None:
            raise RefusedError(refusal)

    def start(self, once: bool) -> StreamingQuery:
        refusal = speculation_refusal(self.spark.sparkContext.getConf().get("spark.speculation"))
        if refusal is not None:
            raise RefusedError(f"flow {self.flow.name}: {refusal}")
        self._once = once
        m = self.flow.mirror
        mode = copy_mode(
            is_local_master(self._master()),
            m.continuous_copy and self.transactions is None,
            once,
            m.driver_copy_max_records,
        )
        if mode is CopyMode.CONTINUOUS:
            self.copier = ContinuousCopier(
                self.flow.name,
                self._new_source_consumer,
                self.flow.source,
                self.flow.target,
                ahead=ahead_limit(m.max_offsets_per_trigger),
            )
        log.info("flow %s: copy mode %s, delivery %s", self.flow.name, mode, m.delivery)
        self.syncs.ensure()
        self.observer.start()
        try:
            self.topology.refresh()  # target topics and configs before the first batch
        except DrkitError as exc:  # the batches report an unreachable cluster, with what to do
            log.warning("flow %s: topology not reconciled at start: %s", self.flow.name, exc)
        self.topology.start()
        self._fence_writers()
        self._warm_copy_workers()  # after the topology: the producer settings follow the target topics' limits
        self.heartbeats.start()
        files.make_dirs(self.stream_checkpoint.parent)
        writer = (
            self.source_stream(once)
            .writeStream.queryName(self.query_name)
            .option("checkpointLocation", str(self.stream_checkpoint))
            .foreachBatch(self._process_batch)
        )
        if once:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.flow.mirror.trigger_interval_seconds} seconds")
        self._query = writer.start()
        return self._query

    def _fence_writers(self) -> None:
        """Exactly-once: initialise every transactional id of the flow before the first batch, so an older
        writer (another mirror of the flow, a previous process's zombie) is fenced now and stops."""
        if self.transactions is None:
            return
        try:
            self.transactions.fence_all(self._producer_conf())
            log.info(
                "flow %s: exactly-once: %d transactional id(s) initialised on %s; older writers are fenced",
                self.flow.name,
                self.transactions.slots,
                self.flow.target,
            )
        except DeliveryFailed as exc:  # the first batch initialises what it uses, and reports what is wrong
            self.transactions.drop()
            log.warning("flow %s: transactional ids not initialised at start: %s", self.flow.name, exc)

    def _warm_copy_workers(self) -> None:
        """Start the executors' Python workers while the query starts, in the background, where batches may
        go to copy tasks: a worker's start (a fork and drkit's imports) would otherwise be paid inside the
        first batch. A failure here only costs that (the first batch reports what is wrong)."""
        m = self.flow.mirror
        if not may_copy_on_executors(self._master(), m.driver_copy_max_records, m.max_offsets_per_trigger):
            return
        sc, slots = self.spark.sparkContext, self._slots()
        topic_map = {t: target for t, target in self.topology.routes.items() if t not in self.topology.refused}
        tasks = warm(self.copy_task(self._producer_conf(), topic_map))

        def run() -> None:
            started = time.monotonic()
            try:
                pids = sc.parallelize(range(slots), slots).mapPartitions(tasks).collect()
                log.info(
                    "flow %s: copy workers ready in %.2fs (%d process(es))",
                    self.flow.name,
                    time.monotonic() - started,
                    len(set(pids)),
                )
            except Exception as exc:
                log.debug("flow %s: the copy workers' warm-up failed: %s", self.flow.name, failure_message(exc))

        threading.Thread(target=run, name=f"drkit-warm-{flow_dir_name(self.flow.name)}", daemon=True).start()

    def _stopping(self) -> bool:
        """Whether a batch the driver is reading should be given up: the runner stopped waiting for it, or
        its query was stopped (which marks the query inactive at once but cannot interrupt this thread)."""
        if self.abandon.is_set():
            return True
        query = self._query
        try:
            return query is not None and not query.isActive
        except Exception:  # the JVM side is gone: so is the query
            return True

    # -- one micro-batch --------------------------------------------------------------------

    def stream_id(self) -> str:
        if self._stream_id is None:
            metadata = json.loads(files.read_text(self.stream_checkpoint / "metadata") or "{}")
            self._stream_id = str(metadata["id"])
        return self._stream_id

    def _process_batch(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        report = BatchReport(batch_id)
        self._batch_id = batch_id
        stream_id = self.stream_id()
        # Spark replays at most one batch after a restart: the first one this process runs. Later
        # batches are new, so the check (Delta's transaction record, read from the log) is done once per run.
        first_of_run, self._first_batch_done = not self._first_batch_done, True
        if first_of_run and self.syncs.batch_written(stream_id, batch_id):
            log.warning(
                "flow %s: batch %d was recorded before the restart; not producing it again", self.flow.name, batch_id
            )
            report.skipped = True
            self.reports.append(report)
            return
        producer_conf = self._producer_conf()
        start = batch_start_offsets(self.stream_checkpoint, batch_id)
        end = logged_offsets(self.stream_checkpoint, batch_id)
        if start is None or end is None:  # Spark's offset log always holds both: a damaged checkpoint
            raise MirrorError(
                f"flow {self.flow.name}: batch {batch_id}: Spark's offset log under {self.stream_checkpoint} does not "
                "give the batch's offsets; the checkpoint is damaged: restore it, or start the flow's mirror anew"
            )
        plan, state = self._through_outages(batch_id, lambda: self._plan(stream_id, batch_id, start, end))
        topic_map = {t: target for t, target in self.topology.routes.items() if t not in self.topology.refused}
        copy_started = time.monotonic()
        report.plan_seconds = copy_started - started
        taken = self._take(batch_id, plan, end, topic_map, producer_conf, report)
        if taken is not None and taken.rows is not None and not taken.rest:
            copied = taken.rows
        else:
            # What the batch copies itself: all of it, or what a stopping mirror's copier did not read.
            own = plan if taken is None else replace(plan, ranges=taken.rest)
            # Every attempt starts from the state the plan left (a retried copy starts the batch over).
            copied, state = self._through_outages(
                batch_id, functools.partial(self._copy, batch_id, own, producer_conf, topic_map, report, state)
            )
            if taken is not None and taken.rows is not None:
                copied = pa.concat_tables([taken.rows, copied])
                report.ahead = True
        report.copy_seconds = time.monotonic() - copy_started
        self._kill_here(KillPoint.COPIED, batch_id)
        # What the mirror knows after this batch, recorded before its syncs: a batch replayed after a crash
        # decides again from the state before it (drkit.core.batch.state_before).
        self.files.record_state(self.flow.name, state)
        copy = totals(copied)
        report.records, report.bytes = copy.records, copy.bytes
        write_started = time.monotonic()
        report.ranges = self.syncs.write(self.flow.name, stream_id, batch_id, copied.select(RANGE_COLUMNS.names))
        report.syncs_seconds = time.monotonic() - write_started
        self._kill_here(KillPoint.SYNCED, batch_id)
        self._note_synced(copied)
        metrics.SYNC_WRITE_SECONDS.labels(self.flow.name).observe(report.syncs_seconds)
        report.seconds = time.monotonic() - started
        metrics.MIRROR_RECORDS.labels(self.flow.name).inc(report.records)
        metrics.MIRROR_BYTES.labels(self.flow.name).inc(report.bytes)
        metrics.MIRROR_BATCH_SECONDS.labels(self.flow.name).observe(report.seconds)
        metrics.MIRROR_LAST_BATCH.labels(self.flow.name).set_to_current_time()
        # The syncs of this batch are durable: observe the source's ends now, in the background (a
        # round trip to the source must not hold the next batch back).
        self.observer.after_batch(topic_map, copy.next_offsets, copy.newest_ms, report.records)
        self.reports.append(report)
        log.info(
            "flow %s: batch %d mirrored %d records in %d ranges (%.2fs, plan %.2fs, copy %.2fs, syncs %.2fs, %s)",
            self.flow.name,
            batch_id,
            report.records,
            report.ranges,
            report.seconds,
            report.plan_seconds,
            report.copy_seconds,
            report.syncs_seconds,
            report.where(),
        )

    def _take(
        self,
        batch_id: int,
        plan: BatchPlan,
        end: SourceOffsets,
        topic_map: dict[str, str],
        producer_conf: dict[str, Any],
        report: BatchReport,
    ) -> Taken | None:
        """The batch's copies from the continuous copier (and, when the mirror stops, what the batch copies
        itself), or None: the batch copies its own records (no copier, or it could not give them:
        drkit.mirror.continuous)."""
        if self.copier is None:
            return None
        ends = {(t, int(p)): offset for t, parts in end.items() for p, offset in parts.items()}
        taken = self.copier.take(plan.ranges, ends, topic_map, producer_conf, self._stopping)
        if taken.rows is None:
            log.warning(
                "flow %s: batch %d copies its own records (%s: %s); the copies made ahead of it are orphans on "
                "the target (duplicates with no sync)",
                self.flow.name,
                batch_id,
                taken.failure,
                taken.reason[:300],
            )
            return None
        self._log_skipped(taken.skipped)
        report.in_driver = report.ahead = True
        copied = totals(taken.rows).records
        report.sites = (CopySite(DRIVER_ID, socket.gethostname(), os.getpid(), -1, len(plan.ranges), copied),)
        return taken

    def _kill_here(self, point: KillPoint, batch_id: int) -> None:
        """A test's fault plan only: die by SIGKILL at ``point`` of the chosen batch."""
        if self.faults.kills_at(point, batch_id):
            log.warning("flow %s: killed at %s of batch %d (fault plan)", self.flow.name, point, batch_id)
            for handler in logging.getLogger().handlers:
                handler.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    def stop_reading(self) -> None:
        """The mirror is stopping: the copier reads no more, so the next batches take every copy it made."""
        if self.copier is not None:
            self.copier.stop_reading()

    def holds_copies(self) -> bool:
        """Whether the copier holds copies no batch took yet (orphans if the mirror stopped now)."""
        return self.copier is not None and self.copier.held() > 0

    def close_copy(self) -> None:
        """Close the driver's reader and the continuous copier (their copies no batch took are orphans)."""
        if self.copier is not None:
            self.copier.close()
        self.reader.close()

    def _through_outages(self, batch_id: int, attempt: Callable[[], T]) -> T:
        """``attempt`` until it succeeds; after a failure, wait for a cluster that does not answer and try
        again (drkit.core.outage decides). Each attempt starts the batch over: what a failed one delivered
        stays on the target (a re-copy of a batch Spark did not commit: at-least-once, never a loss)."""
        quick = 0
        while True:
            try:
                return attempt()
            except (BatchAbandoned, FencedMirrorError):
                raise
            except Exception as exc:
                if self._once:
                    raise
                source_up = self.context.clusters.reachable(self.flow.source, PROBE_SECONDS)
                target_up = not source_up or self.context.clusters.reachable(self.flow.target, PROBE_SECONDS)
                failed = FailedBatch(False, source_up, target_up, looks_like_outage(str(exc)), quick)
                action = outage_action(failed)
                if action is OutageAction.FAIL:
                    raise
                cause = failure_message(exc)
                if action is OutageAction.RETRY:
                    quick += 1
                    log.warning(
                        "flow %s: batch %d failed (%s); both clusters answer: copying it again",
                        self.flow.name,
                        batch_id,
                        cause[:300],
                    )
                    continue
                watch = self.source_watch if action is OutageAction.WAIT_FOR_SOURCE else self.target_watch
                if not wait_until_reachable(
                    watch, functools.partial(self.context.clusters.reachable, watch.alias), self._stopping, cause
                ):
                    raise BatchAbandoned(f"{ABANDONED_MARKER}the mirror is stopping") from None
                quick = 0
                log.info("flow %s: batch %d is copied again", self.flow.name, batch_id)

    def _copy(
        self,
        batch_id: int,
        plan: BatchPlan,
        producer_conf: dict[str, Any],
        topic_map: dict[str, str],
        report: BatchReport,
        state: MirrorState,
    ) -> tuple[pa.Table, MirrorState]:
        """One attempt at copying the batch: the exact ranges the target acknowledged, and the mirror's
        state after it (partitions held where a read ended short)."""
        place = copy_place(self._master(), plan.records(), self.flow.mirror.driver_copy_max_records)
        report.in_driver = place is CopyPlace.DRIVER
        try:
            try:
                if report.in_driver:
                    return self._copy_in_driver(plan.ranges, producer_conf, topic_map, state, report)
                return self._copy_on_executors(batch_id, plan.ranges, producer_conf, topic_map, state, report)
            except RecordsRemoved as exc:
                raise MirrorError(
                    f"flow {self.flow.name}: records were removed from the source before they were mirrored "
                    f"({exc}); they are lost to the target. To go on past them, set "
                    "[flows.mirror] fail_on_data_loss = false"
                ) from None
            except ReadFailed as exc:
                raise MirrorError(
                    f"flow {self.flow.name}: batch {batch_id} cannot be read exactly ({exc}); it is not committed "
                    "and is copied again when the mirror restarts"
                ) from None
            except SourceStalled as exc:  # a copy task's read (the driver's own says so itself)
                raise ClusterError(source_unreachable(self.flow, self.source.bootstrap_servers, str(exc))) from None
            except Fenced as exc:
                raise FencedMirrorError(fenced_message(self.flow.name, self.flow.target, str(exc))) from None
        except FencedMirrorError:
            raise
        except Exception as exc:
            raise explain(self.flow, self.source.bootstrap_servers, exc) from None

    def _copy_on_executors(
        self,
        batch_id: int,
        ranges: BatchRanges,
        producer_conf: dict[str, Any],
        topic_map: dict[str, str],
        state: MirrorState,
        report: BatchReport,
    ) -> tuple[pa.Table, MirrorState]:
        """The batch copied by one Spark job (drkit.mirror.executor): no record flows through the driver,
        which gets back each task's ranges, where its reads ended and where it ran."""
        if self.transactions is not None:
            # One task per slot (its transactional id); the tasks' producers fence the driver's.
            groups = tuple(g for _, g in slot_groups(ranges, self.transactions.slots))
            self.transactions.drop()
        else:
            groups = copy_groups(ranges, self._slots())
        report.sites = ()
        if not groups:
            return COPY_SCHEMA.empty_table(), state
        task = copy_partitions(self.copy_task(producer_conf, topic_map))
        sc = self.spark.sparkContext
        sc.setJobDescription(f"drkit mirror {self.flow.name}: copy of batch {batch_id}")
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
        self._log_removed(removed)
        self._log_skipped(sum(r.skipped for r in results))
        state = self._settle_short_reads(short_reads(ranges, reached), state)
        report.sites = tuple(r.site for r in results)
        return pa.concat_tables([r.table() for r in results]), state

    def copy_task(self, producer_conf: dict[str, Any], topic_map: dict[str, str]) -> CopyTask:
        """What each copy task of a batch gets: settings, and the driver's fault plan (none unless injected)."""
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
        producer_conf = {k: v for k, v in producer_conf.items() if k != "logger"}
        exactly_once = None
        if self.transactions is not None:
            target_conf = clients.client_config(self.target, self.flow.target)
            target_conf.pop("logger", None)
            exactly_once = ExactlyOnceTask(
                self.flow.name, self.transactions.slots, target_conf, dict(self._tail_from())
            )
        return CopyTask(
            consumer_conf,
            producer_conf,
            dict(topic_map),
            self.flow.source,
            self.flow.target,
            self.reader.stall_seconds,
            self.skip_removed,
            is_local_master(self._master()),
            self.faults,
            exactly_once,
        )

    def _log_removed(self, removed: dict[tuple[str, int], tuple[int, int]]) -> None:
        for (topic, partition), (since, until) in sorted(removed.items()):
            log.warning(
                "flow %s: offsets %d to %d of source partition %s/%d were removed from the source before they "
                "were mirrored (fail_on_data_loss = false: going on past them)",
                self.flow.name,
                since,
                until - 1,
                topic,
                partition,
            )

    def _log_skipped(self, skipped: int) -> None:
        if skipped:
            metrics.MIRROR_SKIPPED.labels(self.flow.name).inc(skipped)
            log.info(
                "flow %s: %d records not copied: they came from %s (their origin header names it)",
                self.flow.name,
                skipped,
                self.flow.target,
            )

    def _copy_in_driver(
        self,
        ranges: BatchRanges,
        producer_conf: dict[str, Any],
        topic_map: dict[str, str],
        state: MirrorState,
        report: BatchReport | None = None,
    ) -> tuple[pa.Table, MirrorState]:
        """The batch read by the driver's own consumer (drkit.mirror.reader) and copied by the same
        ``Copier`` the tasks use: no Spark job, whose fixed cost is most of a steady-state batch's time.

        A partition whose read ended before the end Spark planned is never committed as copied: the batch
        fails (``fail_on_data_loss``), or the partition is held from where its read stopped."""
        if self.transactions is not None:
            return self._copy_in_transactions(ranges, producer_conf, topic_map, state, report)
        copier = Copier(producer_conf, topic_map, self.flow.source, self.flow.target)
        try:
            result = self.reader.read(ranges, copier.copy, self._stopping)
            self._log_removed(dict(result.removed))
            state = self._settle_short_reads(short_reads(ranges, result.reached), state)
            rows = copier.finish()
            self._log_skipped(copier.skipped)
            if report is not None:
                copied = totals(rows).records
                report.sites = (CopySite(DRIVER_ID, socket.gethostname(), os.getpid(), -1, len(ranges), copied),)
            return rows, state
        except SourceStalled as exc:
            copier.abort()
            raise ClusterError(source_unreachable(self.flow, self.source.bootstrap_servers, str(exc))) from None
        except BaseException:
            copier.abort()
            raise

    def _copy_in_transactions(
        self,
        ranges: BatchRanges,
        producer_conf: dict[str, Any],
        topic_map: dict[str, str],
        state: MirrorState,
        report: BatchReport | None,
    ) -> tuple[pa.Table, MirrorState]:
        """Exactly-once in the driver: each slot's producer (initialised first) reads back the partitions it
        has not read since, the batch keeps the committed copies found and copies the rest, one transaction
        per slot, committed before the syncs. Any failure forgets every producer: the retry fences and reads
        back again (a slot committed before another failed is found, not copied twice)."""
        assert self.transactions is not None
        producers = self.transactions
        try:
            unread = producers.unread(ranges, producer_conf)
            found_rows = COPY_SCHEMA.empty_table()
            left = ranges
            if unread:
                consumer = self.context.clusters.target_tail_consumer(self.flow)
                try:
                    found, found_rows = read_back(
                        consumer, unread, self._tail_from(), topic_map, self.flow.source, self.flow.target
                    )
                finally:
                    consumer.close()
                producers.mark_read(found, unread)
                left = {**{k: v for k, v in ranges.items() if k not in unread}, **found.ranges}
                if found.found:
                    log.info(
                        "flow %s: %d record(s) of %d partition(s) were already committed on %s past the last "
                        "sync: kept, not copied again",
                        self.flow.name,
                        sum(len(p) for p in found.found.values()),
                        len(found.found),
                        self.flow.target,
                    )
            copier = producers.copier(left, producer_conf, topic_map, self.flow.source)
            try:
                result = self.reader.read(left, copier.copy, self._stopping)
                self._log_removed(dict(result.removed))
                reached = {**{k: until for k, (_, until) in ranges.items() if k not in left}, **result.reached}
                state = self._settle_short_reads(short_reads(ranges, reached), state)
                rows = pa.concat_tables([found_rows, copier.finish(self._before_commit)])
            except BaseException:
                copier.abort()
                raise
            self._log_skipped(copier.skipped)
        except SourceStalled as exc:
            producers.drop()
            raise ClusterError(source_unreachable(self.flow, self.source.bootstrap_servers, str(exc))) from None
        except BaseException:
            producers.drop()
            raise
        if report is not None:
            copied = totals(rows).records
            report.sites = (CopySite(DRIVER_ID, socket.gethostname(), os.getpid(), -1, len(ranges), copied),)
        return rows, state

    def _before_commit(self) -> None:
        self._kill_here(KillPoint.ACKNOWLEDGED, self._batch_id)

    def _tail_from(self) -> dict[Partition, int]:
        """Per source partition, the target offset after its last sync: where reading back starts."""
        if self._synced_next is None:
            progress = self.syncs.progress(self.flow.name)
            self._synced_next = {key: p.last_downstream + 1 for key, p in progress.items()}
        return self._synced_next

    def _note_synced(self, copied: pa.Table) -> None:
        if self.transactions is None or self._synced_next is None or not copied.num_rows:
            return
        for r in copied.select(["source_topic", "partition", "downstream_last"]).to_pylist():
            key = (r["source_topic"], r["partition"])
            self._synced_next[key] = max(self._synced_next.get(key, 0), r["downstream_last"] + 1)

    def _settle_short_reads(self, shorts: tuple[ShortRead, ...], state: MirrorState) -> MirrorState:
        """Partitions read short of the planned end are never committed as copied: the batch fails in one
        line (``fail_on_data_loss``, the default), or each is held from where its read stopped."""
        if shorts and self.flow.mirror.fail_on_data_loss:
            raise MirrorError(
                short_read_message(self.flow.name, shorts[0])
                + (f" ({len(shorts) - 1} more partition(s) alike)" if len(shorts) > 1 else "")
                + "; the batch is not committed. To go on past them, set [flows.mirror] fail_on_data_loss = false"
            )
        for short in shorts:
            log.warning(
                "%s; the partition is copied from offset %d on in the next batch",
                short_read_message(self.flow.name, short),
                short.reached,
            )
        return replace(state, held=hold_short_reads(state.held, shorts)) if shorts else state

    def _new_source_consumer(self) -> Any:
        return self.context.clusters.source_consumer(self.flow)

    def _read_stall_seconds(self) -> float:
        """As long as Spark's Kafka consumer would wait (its ``default.api.timeout.ms``, 60 s by default)."""
        try:
            return int(self.flow.mirror.consumer.get("default.api.timeout.ms", 60_000)) / 1000
        except ValueError:
            return 60.0

    def _slots(self) -> int:
        """Copy tasks a batch may run at once: the cores of the executors (of the driver in local mode),
        as Spark counts them when no ``spark.default.parallelism`` is set."""
        return max(1, int(self.spark.sparkContext.defaultParallelism))

    def _master(self) -> str:
        return str(self.spark.sparkContext.master)

    def source_reachable(self, timeout: float = 2.0) -> bool:
        return self.context.clusters.reachable(self.flow.source, timeout)

    def _plan(
        self, stream_id: str, batch_id: int, start: SourceOffsets, end: SourceOffsets
    ) -> tuple[BatchPlan, MirrorState]:
        """What this batch copies (drkit.core.batch), after making sure its topics have their targets."""
        before = state_before(self.files.states(self.flow.name), stream_id, batch_id)
        current = self.topology.prepare((t, int(p)) for t, parts in end.items() for p in parts)
        renewed = renewed_topics(before.topic_ids, current)
        for topic in sorted(renewed):
            log.warning(
                "flow %s: source topic %s was deleted and created again (topic id %s, was %s): its new incarnation "
                "is copied from its start",
                self.flow.name,
                topic,
                current[topic],
                before.topic_ids[topic],
            )
        if renewed:
            self._record_renewals(renewed, current, end)
        plan = plan_batch(start, end, before.held, self.topology.refused, renewed)
        for lost in plan.lost:
            message = lost_message(self.flow.name, lost)
            if self.flow.mirror.fail_on_data_loss:
                raise MirrorError(message + "; to go on, set [flows.mirror] fail_on_data_loss = false")
            log.warning("%s; going on from offset %d", message, lost.until)
        ids = {**before.topic_ids, **{t: i for t, i in current.items() if t in end}}
        return plan, MirrorState(stream_id, batch_id, ids, plan.held)

    def _record_renewals(self, renewed: frozenset[str], ids: dict[str, str], end: SourceOffsets) -> None:
        """Where each renewed topic's new copies start on the target (its partitions' ends now): the
        translation of a group's offsets never crosses it (drkit.core.incarnation). Recorded before anything
        of the new incarnation is copied."""
        routes = self.topology.routes
        partitions = {routes[t]: len(end[t]) for t in renewed if t in routes and t in end}
        ends = self.target_admin.end_offsets(partitions)
        at = int(time.time() * 1000)
        back = {target: source for source, target in routes.items()}
        self.files.add_renewals(
            self.flow.name,
            [Renewal(back[t], p, ids[back[t]], at, offset) for (t, p), offset in sorted(ends.items())],
        )

    def _producer_conf(self) -> dict[str, Any]:
        conf = clients.client_config(self.target, self.flow.target)
        conf.pop("logger", None)  # not picklable; the producing process adds its own (drkit.mirror.deliver)
        conf.update(PRODUCER_DEFAULTS)
        # Records above librdkafka's 1 MB default on topics that allow them (the producer would refuse them
        # itself), and batches never above a topic's limit (drkit.core.topology.producer_limits).
        routed = set(self.topology.routes.values())
        conf.update(producer_limits(v for t, v in self.topology.record_limits.items() if t in routed))
        conf.update(self.flow.mirror.producer)
        conf.update(PRODUCER_FIXED)
        return conf
