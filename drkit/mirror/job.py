"""The mirror job of one flow: the lifecycle of a Spark Structured Streaming query with a ``foreachBatch`` sink.

Per micro-batch, on the driver:

1. If this stream's batch is already in ``offset_syncs`` (the process died after recording it but
   before Spark committed the batch), its records are on the target: skip it, produce nothing.
2. List the source topics the flow selects and make sure their target topics exist.
3. Plan the batch's ranges per source partition (drkit.core.batch) from Spark's offset log: Spark's Kafka
   source only plans, its DataFrame is never read (drkit.mirror.query).
4. Copy the ranges through the run's copy path (drkit.mirror.copy_path: at-least-once, exactly-once or
   continuous, chosen once by drkit.mirror.wiring), which returns the exact offset ranges the target
   acknowledged, and where each part was copied.
5. Append those ranges to ``offset_syncs`` (idempotent per stream and batch id).

Only then does Spark commit the batch. Any failure in 2-5 fails the query before the commit, so
after a restart the batch runs again: no record is lost; records delivered by the failed attempt
exist twice on the target, and only the copies of the successful attempt are in the syncs. A failed
copy is tried again after a cluster that does not answer is back (drkit.core.outage decides).

Invariant: the job builds no client and no copy path; it is given them (drkit.mirror.wiring), and never
asks how a batch is copied.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from drkit import metrics
from drkit.config import FlowConfig
from drkit.core.batch import BatchPlan, MirrorState, lost_message, plan_batch, renewed_topics, state_before
from drkit.core.consistency import divergence_message, synced_partitions, target_divergences, topics_to_read
from drkit.core.copying import speculation_refusal
from drkit.core.incarnation import Renewal
from drkit.core.offsets import SourceOffsets
from drkit.core.reports import MirrorSummary
from drkit.core.topology import producer_limits
from drkit.errors import DrkitError, MirrorError, RefusedError
from drkit.kafka import clients
from drkit.kafka.admin import KafkaAdmin
from drkit.mirror import offset_log
from drkit.mirror.context import MirrorContext
from drkit.mirror.copied import RANGE_COLUMNS, totals
from drkit.mirror.copy_path import CopyPath, CopyRequest
from drkit.mirror.failure import copy_failure
from drkit.mirror.faults import KillPoint, kill_here
from drkit.mirror.heartbeat import HeartbeatWriter
from drkit.mirror.lease import MirrorLease
from drkit.mirror.observer import SourceObserver
from drkit.mirror.offset_log import batch_start_offsets, logged_offsets
from drkit.mirror.outage import ClusterWatch, through_outages
from drkit.mirror.query import open_checkpoint_store, query_name, registration_refusal, source_stream
from drkit.mirror.reader import ABANDONED_MARKER, BatchAbandoned, BatchReader
from drkit.mirror.report import BatchReport
from drkit.mirror.stopping import Stopping
from drkit.mirror.topology import TopologyFollower

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Producer settings no config may weaken: no loss, no reordering, exact offsets per record.
PRODUCER_FIXED = {
    "acks": "all",
    "enable.idempotence": True,
    "max.in.flight.requests.per.connection": 5,
}
#: How long a batch's copy waits for a lapsed lease to be renewed before it fails (and is retried as an outage).
LAPSE_WAIT_SECONDS = 60.0

#: The target producer's defaults, each overridable per flow (``[flows.mirror] producer``). The copy's records
#: already waited once, on the source producer's linger; librdkafka holds each partition's batch for its own
#: ``linger.ms`` (Kafka's Java producer sends every batch for a broker once one is due) and leaves Nagle's
#: algorithm on (the Java client sets TCP_NODELAY). 1 ms and Nagle off brought the steady p50 to MirrorMaker
#: 2's in three runs; what they cost the backlog rate is not settled (docs/performance.md).
PRODUCER_DEFAULTS = {
    "linger.ms": 1,
    "socket.nagle.disable": True,
    "compression.type": "lz4",
    "message.timeout.ms": 120_000,
    "queue.buffering.max.messages": 500_000,
    "log_level": 3,  # errors only: retriable warnings would flood the job log
}


class MirrorJob:
    """One flow's streaming query: started, fed batch by batch through its copy path, summed up."""

    def __init__(
        self,
        context: MirrorContext,
        flow: FlowConfig,
        path: CopyPath,
        reader: BatchReader,
        stopping: Stopping,
        observer: SourceObserver,
        topology: TopologyFollower,
        heartbeats: HeartbeatWriter,
        watches: tuple[ClusterWatch, ClusterWatch],
        target_admin: KafkaAdmin,
        lease: MirrorLease,
    ) -> None:
        self.context, self.flow, self.path, self.reader, self.stopping = context, flow, path, reader, stopping
        self.observer, self.topology, self.heartbeats, self.target_admin = observer, topology, heartbeats, target_admin
        self.source_watch, self.target_watch = watches
        self.spark, self.syncs, self.files, self.faults = context.spark, context.syncs, context.files, context.faults
        self.source = context.config.clusters[flow.source]
        self.target = context.config.clusters[flow.target]
        self.selector = context.config.topic_selector(flow)
        #: Held (or waited for) by the runner before the query starts; every copy and sync append checks it.
        self.lease = lease
        #: The checkpoint of this process's lease epoch, known once it holds the lease (:meth:`start`).
        self.stream_checkpoint = context.layout.stream_checkpoint(flow.name)
        #: the query's source made ahead by :meth:`stand_by` (for a one-shot run or not)
        self._stream: tuple[bool, DataFrame] | None = None
        # The name is the flow's under this state root, whatever the epoch: one query per flow in a session.
        self.query_name = query_name(flow.name, self.stream_checkpoint)
        #: Set by the runner when it stops waiting for a running batch: the driver's read gives it up.
        self.abandon = stopping.abandon
        self.reports: list[BatchReport] = []
        self._stream_id: str | None = None
        self._once = False
        self._first_batch_done = False

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

    def stand_by(self, once: bool = False) -> None:
        """What a standby prepares while it waits, so that a takeover does not (nothing here writes): Spark's
        file system of the checkpoint, the offset_syncs table held open, both clusters' admin clients, the
        query's Kafka source (Spark analyses it in about a second; it names no checkpoint)."""
        try:
            open_checkpoint_store(self.spark, self.stream_checkpoint)
            offset_log.open_store(self.context.layout, self.flow.name)
            self.syncs.progress(self.flow.name)
            self.target_admin.partition_counts()
            self.topology.warm()
            self._stream = (once, source_stream(self.spark, self.flow, self.source, self.selector, once))
        except Exception as exc:  # the takeover does it again; a store or cluster that does not answer fails there
            log.info("flow %s: not all was prepared ahead: %s", self.flow.name, exc)

    def start(self, once: bool) -> StreamingQuery:
        refusal = speculation_refusal(self.spark.sparkContext.getConf().get("spark.speculation"))
        if refusal is not None:
            raise RefusedError(f"flow {self.flow.name}: {refusal}")
        self._once = once
        log.info("flow %s: copy mode %s, delivery %s", self.flow.name, self.path.mode, self.flow.mirror.delivery)
        began = time.monotonic()
        self.syncs.ensure()
        self.observer.start()
        try:
            self.topology.refresh()  # target topics and configs before the first batch
        except DrkitError as exc:  # the batches report an unreachable cluster, with what to do
            log.warning("flow %s: topology not reconciled at start: %s", self.flow.name, exc)
        self.topology.start()
        # After the topology: the producer settings follow the target topics' limits.
        self.path.prepare(self._producer_conf, self._topic_map())
        self.heartbeats.start()
        prepared = time.monotonic()
        self.stream_checkpoint = offset_log.adopt(self.context.layout, self.flow.name, self.lease.epoch)
        self._stream_id = None
        # Spare the query a batch cycle at its start: a replay whose syncs are durable (drkit.core.replay).
        offset_log.settle_replay(self.flow.name, self.stream_checkpoint, self.syncs.batch_written)
        offset_log.make_parent(self.stream_checkpoint)
        stream = self._stream[1] if self._stream is not None and self._stream[0] == once else None
        writer = (
            (stream if stream is not None else source_stream(self.spark, self.flow, self.source, self.selector, once))
            .writeStream.queryName(self.query_name)
            .option("checkpointLocation", str(self.stream_checkpoint))
            .foreachBatch(self._process_batch)
        )
        if once:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.flow.mirror.trigger_interval_seconds} seconds")
        adopted = time.monotonic()
        self.stopping.query = writer.start()
        log.info(
            "flow %s: started in %.1fs (topology and clients %.1fs, checkpoint %.1fs, Spark's query %.1fs)",
            self.flow.name,
            time.monotonic() - began,
            prepared - began,
            adopted - prepared,
            time.monotonic() - adopted,
        )
        # The checkpoints no holder goes on from again, deleted in the background: never on a takeover's path.
        threading.Thread(
            target=offset_log.retire,
            args=(self.context.layout, self.flow.name, self.lease.epoch),
            name="drkit-retire-checkpoints",
            daemon=True,
        ).start()
        return self.stopping.query

    # -- one micro-batch --------------------------------------------------------------------

    def stream_id(self) -> str:
        if self._stream_id is None:
            self._stream_id = offset_log.stream_id(self.stream_checkpoint)
        return self._stream_id

    def _process_batch(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        report = BatchReport(batch_id)
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
        topic_map = self._topic_map()
        copy_started = time.monotonic()
        report.plan_seconds = copy_started - started
        ends = {(t, int(p)): offset for t, parts in end.items() for p, offset in parts.items()}
        request = CopyRequest(batch_id, plan.ranges, plan.records(), producer_conf, topic_map)
        taken = self.path.take(request, ends, report)
        if taken is not None and taken.rows is not None and not taken.rest:
            copied = taken.rows
        else:
            # What the batch copies itself: all of it, or what a stopping mirror's copier did not read.
            own = plan if taken is None else replace(plan, ranges=taken.rest)
            own_request = CopyRequest(batch_id, own.ranges, own.records(), producer_conf, topic_map)
            # Every attempt starts from the state the plan left (a retried copy starts the batch over).
            copied, state = self._through_outages(batch_id, functools.partial(self._copy, own_request, report, state))
            if taken is not None and taken.rows is not None:
                copied = pa.concat_tables([taken.rows, copied])
                report.ahead = True
        report.copy_seconds = time.monotonic() - copy_started
        kill_here(self.faults, self.flow.name, KillPoint.COPIED, batch_id)
        # What the mirror knows after this batch, recorded before its syncs: a batch replayed after a crash
        # decides again from the state before it (drkit.core.batch.state_before).
        self.files.record_state(self.flow.name, state)
        copy = totals(copied)
        report.records, report.bytes = copy.records, copy.bytes
        write_started = time.monotonic()
        report.ranges = self.syncs.write(
            self.flow.name, stream_id, batch_id, copied.select(RANGE_COLUMNS.names), epoch=self.lease.epoch
        )
        report.syncs_seconds = time.monotonic() - write_started
        kill_here(self.faults, self.flow.name, KillPoint.SYNCED, batch_id)
        self.path.synced(copied)
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

    def _copy(self, request: CopyRequest, report: BatchReport, state: MirrorState) -> tuple[pa.Table, MirrorState]:
        """One attempt at copying the batch: the exact ranges the target acknowledged, and the mirror's
        state after it (partitions held where a read ended short). Not before this process holds its lease
        (a lapse is waited out for a lease's time; a lease lost raises ``FencedError``)."""
        # A lapse is the target not answering the renewals (an outage the copy would meet too): waited out.
        if not self.lease.wait_held(self.stopping, max(LAPSE_WAIT_SECONDS, 3 * self.flow.mirror.lease_seconds)):
            raise BatchAbandoned(f"{ABANDONED_MARKER}the mirror is stopping while its lease is not renewed")
        try:
            return self.path.copy(request, state, report)
        except Exception as exc:
            raise copy_failure(self.flow, self.source.bootstrap_servers, request.batch_id, exc) from None

    def _through_outages(self, batch_id: int, attempt: Callable[[], T]) -> T:
        """``attempt`` until it succeeds, outages waited out (drkit.mirror.outage.through_outages)."""
        watches = (self.source_watch, self.target_watch)
        return through_outages(
            self.flow.name, batch_id, attempt, self._once, self.context.clusters, watches, self.stopping
        )

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

    def _topic_map(self) -> dict[str, str]:
        return {t: target for t, target in self.topology.routes.items() if t not in self.topology.refused}

    def _producer_conf(self) -> dict[str, Any]:
        conf = clients.client_config(self.target, self.flow.target)
        conf.pop("logger", None)  # not picklable; the producing process adds its own (drkit.mirror.producers)
        conf.update(PRODUCER_DEFAULTS)
        # Records above librdkafka's 1 MB default on topics that allow them (the producer would refuse them
        # itself), and batches never above a topic's limit (drkit.core.topology.producer_limits).
        routed = set(self.topology.routes.values())
        conf.update(producer_limits(v for t, v in self.topology.record_limits.items() if t in routed))
        conf.update(self.flow.mirror.producer)
        conf.update(PRODUCER_FIXED)
        return conf

    # -- the stop ---------------------------------------------------------------------------

    def source_reachable(self, timeout: float = 2.0) -> bool:
        return self.context.clusters.reachable(self.flow.source, timeout)

    def stop_reading(self) -> None:
        """The mirror is stopping: a continuous copier reads no more, so the next batches take its copies."""
        self.path.stop_reading()

    def holds_copies(self) -> bool:
        """Whether copies were made that no batch took yet (orphans if the mirror stopped now)."""
        return self.path.holds_copies()

    def close_copy(self) -> None:
        """Close the copy path and the driver's reader (copies no batch took are orphans)."""
        self.path.close()
        self.reader.close()
