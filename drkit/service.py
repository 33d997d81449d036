"""The one door: every drkit capability is a method of :class:`Drkit` returning a frozen, typed result.

The CLI parses, calls one method and renders; notebooks and drills call the same methods. The
facade wires the real adapters (confluent-kafka, the Delta stores) into an
:class:`~drkit.operate.context.OperateContext` the first time an operation needs them, so a
bad argument is refused before any cluster is contacted. Only the mirror and maintenance start
Spark; the operator commands and the translator read and write the tables through delta-rs. Tests hand it a
context of in-memory fakes instead. Nothing here renders output.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drkit.config import DrkitConfig, load_config
from drkit.core.audit import fold
from drkit.core.ports import utc_now
from drkit.errors import ConfigError
from drkit.layout import JobKind, StateLayout
from drkit.operate.context import OperateContext
from drkit.runtime.process import adopt_legacy_dirs, running_jobs

#: How many of the newest audit rows the status exporter reads for its failover/failback gauges.
OPERATIONS_WINDOW = 200

if TYPE_CHECKING:
    # Result types, named in annotations only: each command's process imports the modules it uses
    # (a frozen dataclass costs about a millisecond to define; drkit.core defines some 150).
    from pyspark.sql import SparkSession

    from drkit.config.mm2 import Mm2Mapping
    from drkit.core.audit import OperationRecord
    from drkit.core.drill import DrillPhase, DrillRecord, DrillReport
    from drkit.core.outcome import OperationResult
    from drkit.core.plan import Plan
    from drkit.core.ports import CheckpointLog, OperationLog, SyncLog
    from drkit.core.reports import MaintenanceReport, MirrorSummary, TranslationRun
    from drkit.core.status import GroupOffsets, StatusReport
    from drkit.core.topology import TopologyPlan
    from drkit.mirror.context import MirrorContext
    from drkit.store.delta import TableVersion
    from drkit.store.offset_syncs import SyncRow
    from drkit.translator.context import TranslatorContext


@dataclass(frozen=True)
class OffsetsReport:
    """A group's offsets in each selected flow."""

    groups: tuple[GroupOffsets, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"flows": [g.as_dict() for g in self.groups]}


@dataclass(frozen=True)
class History:
    """The audit trail, newest first."""

    operations: tuple[OperationRecord, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"operations": [o.as_dict() for o in self.operations]}


class GapKind(StrEnum):
    """What a gap between the offset-sync ranges of a partition means."""

    #: Source offsets never copied: compaction, transaction markers, aborted records (read_committed).
    UPSTREAM = "upstream"
    #: Target offsets no recorded range describes: copies of a failed attempt (a replay after a crash)
    #: or records another writer put on the target partition.
    DOWNSTREAM = "downstream"
    #: Source offsets copied again (a replay from an earlier position, e.g. a new mirror stream).
    REPLAY = "replay"


@dataclass(frozen=True)
class SyncGap:
    """A gap on one side of a partition's offset-syncs: offsets ``first``..``last`` on that side."""

    kind: GapKind
    partition: int
    first: int
    last: int
    written_at: datetime  # when the range after the gap was written
    stream_id: str
    batch_id: int

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"kind": self.kind.value, "size": self.size}


@dataclass(frozen=True)
class SyncHistory:
    """The raw ``offset_syncs`` rows of a source topic's partition (or all its partitions), as written."""

    flow: str
    topic: str
    partition: int | None
    version: int | None  # the Delta version read (None: the latest)
    rows: tuple[SyncRow, ...]

    def gaps(self) -> tuple[SyncGap, ...]:
        """Gaps on either side of each partition's ranges, and source offsets copied more than once."""
        out: list[SyncGap] = []
        partitions = sorted({r.partition for r in self.rows})
        for p in partitions:
            rows = [r for r in self.rows if r.partition == p]
            top: int | None = None
            for r in sorted(rows, key=lambda r: (r.upstream_first, r.downstream_first)):
                if top is not None and r.upstream_first > top + 1:
                    out.append(
                        SyncGap(
                            GapKind.UPSTREAM, p, top + 1, r.upstream_first - 1, r.written_at, r.stream_id, r.batch_id
                        )
                    )
                elif top is not None and r.upstream_first <= top:
                    out.append(
                        SyncGap(
                            GapKind.REPLAY,
                            p,
                            r.upstream_first,
                            min(r.upstream_last, top),
                            r.written_at,
                            r.stream_id,
                            r.batch_id,
                        )
                    )
                top = r.upstream_last if top is None else max(top, r.upstream_last)
            top = None
            for r in sorted(rows, key=lambda r: (r.downstream_first, r.upstream_first)):
                if top is not None and r.downstream_first > top + 1:
                    out.append(
                        SyncGap(
                            GapKind.DOWNSTREAM,
                            p,
                            top + 1,
                            r.downstream_first - 1,
                            r.written_at,
                            r.stream_id,
                            r.batch_id,
                        )
                    )
                top = r.downstream_last if top is None else max(top, r.downstream_last)
        return tuple(sorted(out, key=lambda g: (g.partition, g.kind.value, g.first)))

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "topic": self.topic,
            "partition": self.partition,
            "version": self.version,
            "rows": [r.as_dict() for r in self.rows],
            "gaps": [g.as_dict() for g in self.gaps()],
        }


@dataclass(frozen=True)
class CheckpointRow:
    """One ``checkpoints`` row: the group's committed offset on the source and its translation."""

    group: str
    source_topic: str
    target_topic: str
    partition: int
    upstream_offset: int  # the group's committed offset on the source
    downstream_offset: int | None  # its translation on the target (None: not mirrored yet)
    position: str
    checkpointed_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CheckpointHistory:
    """A group's checkpoint rows in one flow, oldest first (up to ``as_of``, at Delta ``version``)."""

    flow: str
    group: str
    as_of: datetime | None
    version: int | None
    rows: tuple[CheckpointRow, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "group": self.group,
            "as_of": self.as_of,
            "version": self.version,
            "rows": [r.as_dict() for r in self.rows],
        }


@dataclass(frozen=True)
class TableVersions:
    """The commits of one Delta table (``offset_syncs``, ``checkpoints`` or ``operations``), oldest first."""

    table: str
    versions: tuple[TableVersion, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "versions": [v.as_dict() for v in self.versions]}


@dataclass(frozen=True)
class FlowTopology:
    """One flow's reconciliation: the plan, and what was changed on the target (nothing on a dry run)."""

    plan: TopologyPlan
    dry_run: bool
    created: tuple[str, ...] = ()
    grown: tuple[str, ...] = ()
    configured: tuple[str, ...] = ()
    acls_created: int = 0

    def as_dict(self) -> dict[str, Any]:
        applied = {"created": list(self.created), "grown": list(self.grown), "configured": list(self.configured)}
        return self.plan.as_dict() | {"dry_run": self.dry_run, "applied": applied | {"acls": self.acls_created}}


@dataclass(frozen=True)
class TopicsSyncReport:
    """``drkit topics sync``: the reconciliation of each selected flow."""

    flows: tuple[FlowTopology, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"flows": [f.as_dict() for f in self.flows]}


@dataclass(frozen=True)
class DrillHistory:
    drills: tuple[DrillRecord, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"drills": [d.as_dict() for d in self.drills]}


@dataclass(frozen=True)
class Mm2Import:
    """A MirrorMaker 2 file imported as a drkit config: the TOML (validated; secrets as ``${env:...}``), where
    it was written (None: not written), and what became of every MM2 property."""

    source: str
    written: str | None
    toml: str
    mapping: Mm2Mapping

    def as_dict(self) -> dict[str, Any]:
        m = self.mapping
        return {
            "source": self.source,
            "written": self.written,
            "toml": self.toml,
            "clusters": sorted(m.config["clusters"]),
            "flows": [f"{f['source']}->{f['target']}" for f in m.config.get("flows", [])],
            "env": [s.as_dict() for s in m.secrets],
            "carried": [c.as_dict() for c in m.carried],
            "dropped": [d.as_dict() for d in m.dropped],
            "notes": list(m.notes),
        }


class Drkit:
    def __init__(
        self,
        config: DrkitConfig,
        spark: SparkSession | None = None,
        context: OperateContext | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.config = config
        self._spark = spark
        self._context = context
        #: The time of the operations and the translator it builds (checkpoint ages, confirmations, rows).
        self.clock = clock
        self._adopted = False

    @classmethod
    def from_file(cls, path: str) -> Drkit:
        return cls(load_config(path))

    @staticmethod
    def import_mm2(source: str | Path, write_to: str | Path | None = None, force: bool = False) -> Mm2Import:
        """A MirrorMaker 2 dedicated-mode properties file as a drkit config, validated; written to ``write_to``
        when given (an existing file only with ``force``). Bad input is one ConfigError and writes nothing."""
        from drkit.config.mm2 import generated_toml, map_mm2, read_mm2_properties
        from drkit.config.mm2.files import write_new_config
        from drkit.config.properties import librdkafka_problem

        path = Path(source)
        try:
            mapping = map_mm2(read_mm2_properties(path), librdkafka_problem)
            text = generated_toml(path.name, mapping)
        except ConfigError as exc:
            message = str(exc)
            raise ConfigError(message if message.startswith(f"{path}:") else f"{path}: {message}") from None
        if write_to is not None:
            write_new_config(Path(write_to), text, force, path)
        return Mm2Import(str(path), None if write_to is None else str(write_to), text, mapping)

    @cached_property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from drkit.runtime.spark import build_session

            # The JVM's output goes to the state root's Spark log (the CLI names it when a command fails).
            layout = self.layout
            self._spark = build_session(self.config.spark, log_file=layout.spark_log, state=layout)
        return self._spark

    @property
    def layout(self) -> StateLayout:
        """The state root's paths; a root that is a file or cannot be read is refused (StoreError)."""
        from drkit.store.state import check_state_root

        root = self.config.state_root()  # a remote root's host-local folder: checked as the local root is
        check_state_root(root)
        layout = StateLayout(root, self.config.state_uri(), self.config.state.storage.settings())
        if not self._adopted:
            # Folders named by earlier versions are adopted before any command reads or writes one.
            adopt_legacy_dirs(layout, [flow.name for flow in self.config.flows])
            self._adopted = True
        return layout

    def _writable_state(self) -> StateLayout:
        """The layout, for commands that write state: refused up front if the root is not writable."""
        from drkit.store.state import check_state_root

        layout = self.layout
        check_state_root(layout.root, write=True)
        return layout

    def _stores(self) -> tuple[SyncLog, CheckpointLog, OperationLog]:
        """The Delta tables, read and written through delta-rs (no JVM)."""
        from drkit.store.checkpoints import CheckpointTable
        from drkit.store.offset_syncs import SyncTable
        from drkit.store.operations import OperationTable

        layout = self.layout
        return SyncTable(layout), CheckpointTable(layout), OperationTable(layout)

    @property
    def context(self) -> OperateContext:
        """The operations' collaborators, built on first use."""
        if self._context is None:
            from drkit.kafka.admin import KafkaClusters

            syncs, checkpoints, operations = self._stores()
            self._context = OperateContext(
                self.config, KafkaClusters(self.config), syncs, checkpoints, operations, self.layout, self.clock
            )
        return self._context

    # -- operator commands ------------------------------------------------------------------------

    def failover(
        self,
        flow: str,
        groups: list[str] | None,
        as_of: datetime | None = None,
        allow_stale: bool = False,
        apply: bool = False,
        confirm: Callable[[Plan], bool] | None = None,
    ) -> OperationResult:
        """Move ``groups`` (None: every group with checkpoints) to the flow's target; dry run unless ``apply``."""
        from drkit.operate.failover import FailoverRequest, failover

        name = self.config.flow(flow).name
        if self._context is None:  # the audit trail is written, dry runs included
            self._writable_state()
        return failover(self.context, FailoverRequest(name, groups, as_of, allow_stale, apply), confirm)

    def failback(
        self, flow: str, groups: list[str] | None, apply: bool = False, confirm: Callable[[Plan], bool] | None = None
    ) -> OperationResult:
        """Move ``groups`` (None: every group the flow selects) back to the flow's source."""
        from drkit.operate.failover import FailbackRequest, failback

        name = self.config.flow(flow).name
        if self._context is None:
            self._writable_state()
        return failback(self.context, FailbackRequest(name, groups, apply), confirm)

    def status(self, flow: str | None = None) -> StatusReport:
        """Lag, sync and checkpoint freshness per flow, with a verdict."""
        from drkit.operate.status import status

        self.config.flows_named(flow)
        return status(self.context, flow)

    def watch_status(
        self,
        flow: str | None = None,
        interval: float = 15.0,
        metrics_port: int | None = None,
        max_runs: int | None = None,
        on_report: Callable[[StatusReport], None] | None = None,
        stop: threading.Event | None = None,
    ) -> StatusReport | None:
        """The status exporter: ``status`` every ``interval`` seconds until SIGINT/SIGTERM (or ``stop``, or
        ``max_runs``), each report exported as the ``drkit_status_*`` gauges with the newest audited
        failovers and failbacks (``drkit.metrics.record_status``) and handed to ``on_report``. A status that
        fails with a drkit error is logged and counted (``drkit_errors_total{process="status"}``); the
        exporter keeps going, and its ``drkit_status_last_run_timestamp_seconds`` stops moving. Returns
        the last report (None: none succeeded)."""
        import logging
        import time

        from drkit import metrics  # prometheus_client: only the long-running processes serve metrics
        from drkit.errors import DrkitError
        from drkit.runtime.signals import stop_on_signals

        names = [f.name for f in self.config.flows_named(flow)]
        metrics.serve(metrics_port or self.config.metrics.port, self.config.metrics.host)
        stopped = stop or threading.Event()
        last: StatusReport | None = None
        runs = 0
        with stop_on_signals(stopped):
            while not stopped.is_set() and (max_runs is None or runs < max_runs):
                runs += 1
                try:
                    report = self.status(flow)
                    operations = fold(self.context.operations.recent(OPERATIONS_WINDOW))
                    metrics.record_status(report, [o for o in operations if o.flow in names], time.time())
                except DrkitError as exc:
                    for name in names:
                        metrics.ERRORS.labels(name, "status").inc()
                    logging.getLogger(__name__).error("status not exported: %s", exc)
                else:
                    last = report
                    if on_report is not None:
                        on_report(report)
                if max_runs is None or runs < max_runs:
                    stopped.wait(interval)
        return last

    def offsets(
        self, group: str, flow: str | None = None, as_of: datetime | None = None, version: int | None = None
    ) -> OffsetsReport:
        """A group's offsets in each flow: source committed, checkpointed, translated now, on the target."""
        from drkit.operate.reach import probing
        from drkit.operate.status import group_offsets

        flows = self.config.flows_named(flow)
        # Every cluster of the flows probed once, all at once, however many flows share it.
        reaches = probing(self.context, (a for f in flows for a in (f.source, f.target)))
        return OffsetsReport(tuple(group_offsets(self.context, f.name, group, as_of, version, reaches) for f in flows))

    def history(self, flow: str | None = None, limit: int = 20) -> History:
        """The audit trail of failovers and failbacks (dry runs included), newest first: one record per
        operation, an apply's outcome row in place of its intent (an intent alone: it never recorded an end)."""
        name = None if flow is None else self.config.flow(flow).name
        return History(tuple(fold(self.context.operations.list(name, 2 * limit))[:limit]))

    def plan_failover(
        self, flow: str, groups: list[str] | None, as_of: datetime | None = None, allow_stale: bool = False
    ) -> Plan:
        """The plan ``drkit failover --as-of`` would show, built by the same code; nothing is committed,
        the source is not probed and nothing is written to the audit trail ("what if we failed over at T")."""
        from drkit.operate.failover import FailoverRequest, plan_failover

        name = self.config.flow(flow).name
        return plan_failover(self.context, FailoverRequest(name, groups, as_of, allow_stale))

    def topics_sync(self, flow: str | None = None, dry_run: bool = False) -> TopicsSyncReport:
        """Reconcile the flows' target topics with their sources once, as a running mirror does every
        ``refresh_interval_seconds``: create missing topics, grow the ones drkit created, set changed configs;
        ``dry_run``: describe both clusters and plan, change nothing."""
        from drkit.kafka.admin import KafkaAdmin
        from drkit.kafka.topology import TopologyReconciler
        from drkit.store.runs import MirrorFiles

        flows = self.config.flows_named(flow)
        layout = self.layout if dry_run else self._writable_state()
        files = MirrorFiles(layout)
        out: list[FlowTopology] = []
        for f in flows:
            name = f.name
            reconciler = TopologyReconciler(
                f,
                self.config.topic_selector(f),
                KafkaAdmin(self.config.clusters[f.source], f.source),
                KafkaAdmin(self.config.clusters[f.target], f.target),
                owned=lambda name=name: files.created_topics(name),  # type: ignore[misc]
                on_created=lambda names, name=name: files.add_created_topics(name, names),  # type: ignore[misc]
            )
            mirrored = {topic for topic, _ in self.context.syncs.progress(name)}
            if dry_run:
                out.append(FlowTopology(reconciler.plan(mirrored), True))
                continue
            applied = reconciler.reconcile(mirrored)
            out.append(
                FlowTopology(
                    applied.plan, False, applied.created, applied.grown, applied.configured, applied.acls_created
                )
            )
        return TopicsSyncReport(tuple(out))

    # -- inspection (notebooks): the Delta tables as written, through delta-rs ----------------------

    def sync_history(
        self, flow: str, topic: str, partition: int | None = None, version: int | None = None
    ) -> SyncHistory:
        """The ``offset_syncs`` rows of a source topic's partition (None: all partitions) as the mirror wrote
        them (write time, batch, stream), at Delta ``version`` (None: now), with their gaps (``gaps()``)."""
        from drkit.store.offset_syncs import SyncTable

        name = self.config.flow(flow).name
        rows = SyncTable(self.layout).history(name, topic, partition, version)
        return SyncHistory(name, topic, partition, version, tuple(rows))

    def checkpoint_history(
        self, flow: str, group: str, as_of: datetime | None = None, version: int | None = None
    ) -> CheckpointHistory:
        """Every checkpoint of ``group`` in ``flow``, oldest first: up to ``as_of``, at Delta ``version``."""
        from drkit.store.checkpoints import CheckpointTable

        name = self.config.flow(flow).name
        recorded = CheckpointTable(self.layout).history(name, group, as_of, version)
        rows = tuple(
            CheckpointRow(
                r.checkpoint.group,
                r.checkpoint.source_topic,
                r.checkpoint.target_topic,
                r.checkpoint.partition,
                r.checkpoint.upstream_offset,
                r.checkpoint.downstream_offset,
                r.checkpoint.position.value,
                datetime.fromtimestamp(r.checkpointed_at_ms / 1000, UTC),
            )
            for r in recorded
        )
        return CheckpointHistory(name, group, as_of, version, rows)

    def table_versions(self, table: str) -> TableVersions:
        """The commits of a drkit Delta table (``offset_syncs``, ``checkpoints``, ``operations``): what time
        travel (``version``, ``as_of``) can go back to."""
        from drkit.store.delta import table_versions

        paths = {
            "offset_syncs": self.layout.offset_syncs,
            "checkpoints": self.layout.checkpoints,
            "operations": self.layout.operations,
        }
        if table not in paths:
            raise ValueError(f"unknown table {table!r}: one of {', '.join(paths)}")
        return TableVersions(table, tuple(table_versions(paths[table], table)))

    # -- jobs -------------------------------------------------------------------------------------

    def mirror(
        self,
        flow: str | None = None,
        once: bool = False,
        on_progress: Callable[[list[MirrorSummary]], None] | None = None,
        metrics_port: int | None = None,
    ) -> list[MirrorSummary]:
        """Run the mirror of one flow (or all) until caught up (``once``) or stopped; metrics on
        ``metrics_port`` (default ``[metrics] port``)."""
        from drkit.core.reach import Command
        from drkit.mirror.runner import MirrorRunner
        from drkit.operate.reach import require
        from drkit.store.delta import check_readable

        flows = self.config.flows_named(flow)
        layout = self._writable_state()
        check_readable([(layout.offset_syncs, "offset_syncs")])  # a damaged table: one line, before Spark
        # The lock first: a second mirror of a flow is refused before it binds the metrics port or starts Spark.
        with running_jobs(layout, JobKind.MIRROR, [f.name for f in flows]):
            # Every flow's clusters answer, before Spark starts: its clients take minutes to say otherwise.
            reaches = self.context.clusters.reach(a for f in flows for a in (f.source, f.target))
            for f in flows:
                require(Command.MIRROR, f, reaches)
            from drkit import metrics  # prometheus_client: only the jobs serve metrics

            metrics.serve(metrics_port or self.config.metrics.port, self.config.metrics.host)
            return MirrorRunner(self.mirror_context(), flows).run(once, on_progress=on_progress)

    def mirror_context(self) -> MirrorContext:
        """The mirror's collaborators: the configured clusters, Spark, the Delta ``offset_syncs`` table, the
        mirror's state files (drkit.mirror.wiring makes each job's parts from them)."""
        from drkit.mirror.context import KafkaMirrorClusters, MirrorContext
        from drkit.store.offset_syncs import SyncTable
        from drkit.store.runs import MirrorFiles, RunFiles

        layout = self.layout
        return MirrorContext(
            self.config,
            self.spark,
            KafkaMirrorClusters(self.config),
            SyncTable(layout),
            layout,
            MirrorFiles(layout),
            RunFiles(layout),
        )

    def translate(
        self,
        flow: str | None = None,
        once: bool = True,
        interval: float | None = None,
        max_runs: int | None = None,
        metrics_port: int | None = None,
    ) -> list[TranslationRun]:
        """Translate the selected groups' offsets into checkpoints once, or every ``interval`` seconds;
        metrics on ``metrics_port`` (default ``[metrics] port``)."""
        from drkit.translator.job import TranslatorRunner

        flows = self.config.flows_named(flow)
        with running_jobs(self._writable_state(), JobKind.TRANSLATOR, [f.name for f in flows]):
            from drkit import metrics  # prometheus_client: only the jobs serve metrics

            metrics.serve(metrics_port or self.config.metrics.port, self.config.metrics.host)
            return TranslatorRunner(self.translator_context(), flows).run(once, interval, max_runs)

    def translator_context(self) -> TranslatorContext:
        """The translator's collaborators: the configured clusters, the Delta sync and checkpoint logs."""
        from drkit.kafka.admin import KafkaClusters
        from drkit.translator.context import TranslatorContext

        syncs, checkpoints, _ = self._stores()
        return TranslatorContext(self.config, KafkaClusters(self.config), syncs, checkpoints, self.layout, self.clock)

    def maintain(self, keep_recent_batches: int = 100, vacuum_retention_hours: float = 168.0) -> MaintenanceReport:
        """Coalesce old offset-syncs (translation unchanged), OPTIMIZE and VACUUM the Delta tables.

        Settings, the state root and the tables are checked before the Spark session starts, so a refused
        run costs nothing and changes nothing.
        """
        from drkit.store.delta import check_readable
        from drkit.store.maintenance import check_settings, maintain

        check_settings(keep_recent_batches, vacuum_retention_hours)
        layout = self._writable_state()
        # Every table readable before any is rewritten: a damaged second table must not stop the run
        # after the first was rewritten.
        check_readable([(layout.offset_syncs, "offset_syncs"), (layout.checkpoints, "checkpoints")])
        return maintain(self.spark, layout, self.config, keep_recent_batches, vacuum_retention_hours)

    def drill_run(self, spec_path: str, on_phase: Callable[[DrillPhase, str], None] | None = None) -> DrillReport:
        """Run the drill a spec describes on the configured clusters; the report is kept in ``drills``."""
        from drkit.drill.runner import DrillRunner
        from drkit.drill.spec import load_spec
        from drkit.store.drills import DrillLog

        spec = load_spec(Path(spec_path))
        runner = DrillRunner(self, spec, on_phase)  # refuses a drill that cannot work, before anything
        report = runner.run()
        DrillLog(self.layout).append(report)
        return report

    def drill_history(self, limit: int = 20) -> DrillHistory:
        """The drills run with this state root, newest first."""
        from drkit.store.drills import DrillLog

        return DrillHistory(tuple(DrillLog(self.layout).list(limit)))
