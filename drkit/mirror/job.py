"""The mirror job of one flow: a Spark Structured Streaming query with a ``foreachBatch`` sink.

Per micro-batch, on the driver:

1. If this stream's batch is already in ``offset_syncs`` (the process died after recording it but
   before Spark committed the batch), its records are on the target: skip it, produce nothing.
2. List the source topics the flow selects and make sure their target topics exist.
3. Copy the batch with one task per source partition (drkit.mirror.deliver); each returns the
   exact offset ranges the target acknowledged.
4. Append those ranges to ``offset_syncs`` (idempotent per stream and batch id).

Only then does Spark commit the batch. Any failure in 2-4 fails the query before the commit, so
after a restart the batch runs again: no record is lost; records delivered by the failed attempt
exist twice on the target, and only the copies of the successful attempt are in the syncs.

Exactly-once (a later mode) fits here without a rewrite: tasks produce with transactional
producers whose ids derive from (stream id, source partition), fenced on restart; a commit record
written inside the same Kafka transaction tells a restarted job what was committed, since the
transaction commits before the syncs are recorded. See docs/design/mirror.md.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from drkit import metrics
from drkit.config import DrkitConfig, FlowConfig
from drkit.core.offsets import SyncRange
from drkit.core.reports import MirrorSummary
from drkit.core.selection import NameSelector
from drkit.core.status import EndsObservation
from drkit.errors import DrkitError, MirrorError
from drkit.kafka import clients
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.topics import TopicPair, ensure_target_topics
from drkit.layout import JobKind, StateLayout, flow_dir_name
from drkit.mirror.deliver import FAILURE_MARKER, RANGE_SCHEMA, deliver_batches
from drkit.store.offset_syncs import OffsetSyncStore, SyncRow
from drkit.store.runs import RunFiles

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

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
    created_topics: list[str] = field(default_factory=list)
    seconds: float = 0.0


class MirrorJob:
    """Wires the Spark Kafka source, the delivery tasks and the offset-sync store for one flow."""

    def __init__(self, config: DrkitConfig, flow: FlowConfig, spark: SparkSession) -> None:
        self.config = config
        self.flow = flow
        self.spark = spark
        self.source = config.clusters[flow.source]
        self.target = config.clusters[flow.target]
        self.policy = flow.policy()
        self.selector: NameSelector = config.topic_selector(flow)
        self.layout = StateLayout(config.state_root())
        self.syncs = OffsetSyncStore(spark, self.layout)
        self.stream_checkpoint = self.layout.stream_checkpoint(flow.name)
        self.runs = RunFiles(self.layout)
        self.source_admin = KafkaAdmin(self.source, flow.source)
        self.target_admin = KafkaAdmin(self.target, flow.target)
        self._stream_id: str | None = None
        self._first_batch_done = False
        self._next_offset: dict[tuple[str, int], int] = {}
        self._known_targets: dict[str, str] = {}
        self.reports: list[BatchReport] = []

    def summary(self) -> MirrorSummary:
        reports = list(self.reports)
        return MirrorSummary(self.flow.name, len(reports), sum(1 for r in reports if r.skipped),
                             sum(r.records for r in reports), sum(r.bytes for r in reports),
                             sum(r.ranges for r in reports),
                             tuple(sorted({t for r in reports for t in r.created_topics})))

    # -- the stream -------------------------------------------------------------------------

    def source_stream(self) -> DataFrame:
        m = self.flow.mirror
        reader = (
            self.spark.readStream.format("kafka")
            .options(**clients.java_client_options(self.source))
            .option("subscribePattern", self.selector.pattern)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .option("failOnDataLoss", "true" if m.fail_on_data_loss else "false")
            .option("kafka.isolation.level", "read_committed")
        )
        if m.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(m.max_offsets_per_trigger))
        for key, value in m.consumer.items():
            reader = reader.option(f"kafka.{key}", value)
        return reader.load().selectExpr(
            "topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "headers"
        )

    def start(self, once: bool) -> StreamingQuery:
        self.syncs.ensure()
        self.stream_checkpoint.parent.mkdir(parents=True, exist_ok=True)
        writer = (
            self.source_stream().writeStream.queryName(f"drkit-mirror-{flow_dir_name(self.flow.name)}")
            .option("checkpointLocation", str(self.stream_checkpoint))
            .foreachBatch(self._process_batch)
        )
        if once:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.flow.mirror.trigger_interval_seconds} seconds")
        return writer.start()

    # -- one micro-batch --------------------------------------------------------------------

    def stream_id(self) -> str:
        if self._stream_id is None:
            metadata = json.loads((self.stream_checkpoint / "metadata").read_text())
            self._stream_id = str(metadata["id"])
        return self._stream_id

    def _process_batch(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        report = BatchReport(batch_id)
        stream_id = self.stream_id()
        # Spark replays at most one batch after a restart: the first one this process runs. Later
        # batches are new, so the (full-table) check is done once per run, not once per batch.
        first_of_run, self._first_batch_done = not self._first_batch_done, True
        if first_of_run and self.syncs.batch_written(stream_id, batch_id):
            log.warning("flow %s: batch %d was recorded before the restart; not producing it again",
                        self.flow.name, batch_id)
            report.skipped = True
            self.reports.append(report)
            return
        topic_map, report.created_topics = self._prepare_targets()
        producer_conf = self._producer_conf()
        task: Any = deliver_batches(producer_conf, topic_map)
        ranges = batch.mapInArrow(task, RANGE_SCHEMA).collect()
        rows = [
            SyncRow(r.source_topic, r.target_topic, r.partition,
                    SyncRange(r.upstream_first, r.upstream_last, r.downstream_first, r.downstream_last))
            for r in ranges
        ]
        report.records = sum(r.record_count for r in ranges)
        report.bytes = sum(r.bytes for r in ranges)
        write_started = time.monotonic()
        report.ranges = self.syncs.write(self.flow.name, stream_id, batch_id, rows)
        metrics.SYNC_WRITE_SECONDS.labels(self.flow.name).observe(time.monotonic() - write_started)
        report.seconds = time.monotonic() - started
        metrics.MIRROR_RECORDS.labels(self.flow.name).inc(report.records)
        metrics.MIRROR_BYTES.labels(self.flow.name).inc(report.bytes)
        metrics.MIRROR_BATCH_SECONDS.labels(self.flow.name).observe(report.seconds)
        metrics.MIRROR_LAST_BATCH.labels(self.flow.name).set_to_current_time()
        self._update_lag(topic_map, rows)
        self.reports.append(report)
        log.info("flow %s: batch %d mirrored %d records in %d ranges (%.2fs)", self.flow.name, batch_id,
                 report.records, report.ranges, report.seconds)

    def _update_lag(self, topic_map: dict[str, str], rows: list[SyncRow]) -> None:
        """Lag gauge per partition: source end (read_committed) minus the next offset to mirror; the ends
        are recorded as the mirror's observation of the source."""
        for r in rows:
            key = (r.source_topic, r.partition)
            self._next_offset[key] = max(self._next_offset.get(key, 0), r.range.upstream_last + 1)
        try:
            counts = self.source_admin.partition_counts()
            ends = self.source_admin.end_offsets({t: counts[t] for t in topic_map if t in counts})
        except DrkitError as exc:  # metrics must never fail a batch
            log.warning("flow %s: lag not measured: %s", self.flow.name, exc)
            return
        # After this batch's syncs are written: should the source be lost before the next one, this is
        # the freshest knowledge of what it held (the RPO's lower bound, and with the previous one a rate).
        try:
            self.runs.observe_source_ends(JobKind.MIRROR, self.flow.name,
                                          EndsObservation(int(time.time() * 1000), ends))
        except OSError as exc:
            log.warning("flow %s: source ends not recorded: %s", self.flow.name, exc)
        for (topic, partition), end in ends.items():
            lag = max(0, end - self._next_offset.get((topic, partition), 0))
            metrics.MIRROR_LAG.labels(self.flow.name, topic, str(partition)).set(lag)

    def _prepare_targets(self) -> tuple[dict[str, str], list[str]]:
        counts = self.source_admin.partition_counts()
        selected = self.selector.select(counts)
        pairs = [TopicPair(t, self.policy.target_topic(self.flow.source, t), counts[t]) for t in selected]
        created: list[str] = []
        if any(p.source not in self._known_targets for p in pairs):
            created = ensure_target_topics(self.source_admin.client, self.target_admin.client, pairs,
                                           self.flow.mirror.target_replication_factor, self.flow.target)
            self._known_targets.update({p.source: p.target for p in pairs})
        return {p.source: p.target for p in pairs}, created

    def _producer_conf(self) -> dict[str, Any]:
        conf = clients.client_config(self.target, self.flow.target)
        conf.pop("logger", None)  # not picklable; tasks log through librdkafka's default
        conf.update(PRODUCER_DEFAULTS)
        conf.update(self.flow.mirror.producer)
        conf.update(PRODUCER_FIXED)
        return conf


def failure_message(exc: BaseException) -> str:
    """The operator-facing reason inside a Spark/Py4J exception chain."""
    text = str(exc)
    match = re.search(re.escape(FAILURE_MARKER) + r"([^\n]*)", text)
    if match:
        return match.group(1).strip()
    from drkit.errors import DrkitError

    for line in text.splitlines():
        for name in ("MirrorError", "ClusterError", "StoreError"):
            if f"{name}: " in line:
                return line.split(f"{name}: ", 1)[1].strip()
    if isinstance(exc, DrkitError):
        return text
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return first[:500]


class MirrorRunner:
    """Runs the jobs of one or more flows until done (``once``) or stopped by SIGINT/SIGTERM."""

    def __init__(self, config: DrkitConfig, flows: list[FlowConfig], spark: SparkSession) -> None:
        self.jobs = [MirrorJob(config, f, spark) for f in flows]
        self._stop = threading.Event()

    def run(self, once: bool, poll_seconds: float = 0.5,
            on_progress: Callable[[list[MirrorSummary]], None] | None = None) -> list[MirrorSummary]:
        queries = [job.start(once) for job in self.jobs]
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        if threading.current_thread() is threading.main_thread():
            for s in previous:
                signal.signal(s, lambda *_: self._stop.set())
        try:
            while any(q.isActive for q in queries):
                if self._stop.is_set():
                    self._stop_after_current_batch(queries)
                    break
                if on_progress is not None:
                    on_progress([job.summary() for job in self.jobs])
                time.sleep(poll_seconds)
            for query, job in zip(queries, self.jobs, strict=True):
                error = query.exception()
                if error is not None:
                    metrics.ERRORS.labels(job.flow.name, "mirror").inc()
                    raise MirrorError(f"mirror of flow {job.flow.name} stopped: {failure_message(error)}")
        finally:
            for q in queries:
                if q.isActive:
                    q.stop()
            if threading.current_thread() is threading.main_thread():
                for s, handler in previous.items():
                    signal.signal(s, handler)
        return [job.summary() for job in self.jobs]

    def stop(self) -> None:
        self._stop.set()

    @staticmethod
    def _stop_after_current_batch(queries: list[StreamingQuery], timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        for q in queries:
            while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.1)
            q.stop()
