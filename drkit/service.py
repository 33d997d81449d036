"""The one door: every drkit capability is a method of :class:`Drkit` returning a frozen, typed result.

The CLI parses, calls one method and renders; notebooks and drills call the same methods. Each method
resolves its flows from the config once (operations receive ``FlowConfig``, never a name), calls one
operation or job, and returns its result (drkit.core's decisions, or drkit.results). The facade wires the
real adapters (drkit.wiring) into an :class:`~drkit.operate.context.OperateContext` the first time an
operation needs them, so a bad argument is refused before any cluster is contacted. Only the mirror and
maintenance start Spark; the operator commands and the translator read and write the tables through
delta-rs. Tests hand it a context of in-memory fakes instead. Nothing here renders output.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from drkit.config import DrkitConfig, load_config
from drkit.core.audit import fold
from drkit.core.ports import utc_now
from drkit.errors import ConfigError, DrkitError
from drkit.layout import JobKind, StateLayout
from drkit.operate.context import OperateContext
from drkit.runtime.process import adopt_legacy_dirs, running_jobs

if TYPE_CHECKING:
    # Result types, named in annotations only: each command's process imports the modules it uses
    # (a frozen dataclass costs about a millisecond to define; drkit.core defines some 150).
    from pyspark.sql import SparkSession

    from drkit.core.drill import DrillPhase, DrillRecord, DrillReport
    from drkit.core.fencing import FenceReport
    from drkit.core.outcome import OperationResult
    from drkit.core.plan import Plan
    from drkit.core.probe import ProbeReport
    from drkit.core.recovery import RecoveryReport
    from drkit.core.reports import MaintenanceReport, MirrorSummary, TranslationRun
    from drkit.core.status import StatusReport
    from drkit.core.verify import VerifyReport
    from drkit.mirror.context import MirrorContext
    from drkit.results import (
        CheckpointHistory,
        DrillHistory,
        History,
        Mm2Import,
        OffsetsReport,
        SyncHistory,
        TableVersions,
        TopicsSyncReport,
    )
    from drkit.translator.context import TranslatorContext

R = TypeVar("R")
#: The newest rows of ``drills`` a repeating drill reads: its own run's row is among them.
DRILL_ROWS_READ = 100


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
        from drkit.results import Mm2Import

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

    @property
    def context(self) -> OperateContext:
        """The operations' collaborators, built on first use."""
        if self._context is None:
            from drkit.wiring import operate_context

            self._context = operate_context(self.config, self.layout, self.clock)
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

        request = FailoverRequest(self.config.flow(flow), groups, as_of, allow_stale, apply)
        if self._context is None:  # the audit trail is written, dry runs included
            self._writable_state()
        return failover(self.context, request, confirm)

    def failback(
        self, flow: str, groups: list[str] | None, apply: bool = False, confirm: Callable[[Plan], bool] | None = None
    ) -> OperationResult:
        """Move ``groups`` (None: every group the flow selects) back to the flow's source."""
        from drkit.operate.failback import FailbackRequest, failback

        request = FailbackRequest(self.config.flow(flow), groups, apply)
        if self._context is None:
            self._writable_state()
        return failback(self.context, request, confirm)

    def verify(
        self,
        flow: str,
        topic: str,
        partitions: tuple[int, ...] = (),
        from_offset: int | None = None,
        max_records: int = 10_000,
        sample: int | None = None,
        window: int = 100,
        seed: int | None = None,
    ) -> VerifyReport:
        """Prove ``topic``'s offset-syncs record by record over a range of source offsets (per partition, from
        ``from_offset`` or the last ``max_records``), or over a sample (about ``sample`` records per partition in
        windows of ``window`` spread over its whole log, drawn from ``seed``): each record's copy where the syncs
        place it, with its content; the exact ranges that differ. Reads only."""
        from drkit.operate.verify import VerifyRequest, verify_topic

        request = VerifyRequest(
            self.config.flow(flow), topic, partitions, from_offset, max_records, sample, window, seed
        )
        return verify_topic(self.context, request)

    def fence(self, flow: str, apply: bool = False) -> FenceReport:
        """Put ``flow``'s ``[flows.fencing]`` ACLs where its producers' side calls for (the copies read-only
        before a failover, the source fenced after one); dry run unless ``apply``. Idempotent."""
        from drkit.operate.fence import fence_flow

        if self._context is None:  # the audit trail is written, dry runs included
            self._writable_state()
        return fence_flow(self.context, self.config.flow(flow), apply)

    def recovery(self, flow: str, dismiss: bool = False) -> RecoveryReport:
        """The records ``flow``'s failover left on its source (per partition, the offsets the mirror had not
        copied), and how many of them the target holds now (the mirror copies them once the source answers).
        Reads only, unless ``dismiss``: what is still missing is given up (one audit row)."""
        from drkit.operate.recovery import recovery

        if dismiss and self._context is None:  # the audit trail is written
            self._writable_state()
        return recovery(self.context, self.config.flow(flow), dismiss)

    def status(self, flow: str | None = None) -> StatusReport:
        """Lag, sync and checkpoint freshness per flow, with a verdict."""
        from drkit.operate.status import status

        flows = self.config.flows_named(flow)
        return status(self.context, flows)

    def watch_status(
        self,
        flow: str | None = None,
        interval: float = 15.0,
        metrics_port: int | None = None,
        max_runs: int | None = None,
        on_report: Callable[[StatusReport], None] | None = None,
        stop: threading.Event | None = None,
    ) -> StatusReport | None:
        """The status exporter (drkit.operate.watch): ``status`` every ``interval`` seconds until SIGINT/SIGTERM
        (or ``stop``, or ``max_runs``), exported as the ``drkit_status_*`` gauges on ``metrics_port`` (default
        ``[metrics] port``) and handed to ``on_report``. Returns the last report (None: none succeeded)."""
        from drkit import metrics  # prometheus_client: only the long-running processes serve metrics
        from drkit.operate.watch import watch_status

        flows = self.config.flows_named(flow)
        metrics.serve(metrics_port or self.config.metrics.port, self.config.metrics.host)
        status, operations = (lambda: self.status(flow)), (lambda: self.context.operations)
        return watch_status(status, operations, flows, interval, max_runs, on_report, stop)

    def offsets(
        self, group: str, flow: str | None = None, as_of: datetime | None = None, version: int | None = None
    ) -> OffsetsReport:
        """A group's offsets in each flow: source committed, checkpointed, translated now, on the target."""
        from drkit.operate.status import offsets
        from drkit.results import OffsetsReport

        flows = self.config.flows_named(flow)
        return OffsetsReport(offsets(self.context, flows, group, as_of, version))

    def history(self, flow: str | None = None, limit: int = 20) -> History:
        """The audit trail of failovers and failbacks (dry runs included), newest first: one record per
        operation, its latest row (drkit.core.audit.fold: up to three per apply, the hook's last)."""
        from drkit.results import History

        name = None if flow is None else self.config.flow(flow).name
        return History(tuple(fold(self.context.operations.list(name, 3 * limit))[:limit]))

    def plan_failover(
        self, flow: str, groups: list[str] | None, as_of: datetime | None = None, allow_stale: bool = False
    ) -> Plan:
        """The plan ``drkit failover --as-of`` would show, built by the same code; nothing is committed,
        the source is not probed and nothing is written to the audit trail ("what if we failed over at T")."""
        from drkit.operate.failover import FailoverRequest, plan_failover

        return plan_failover(self.context, FailoverRequest(self.config.flow(flow), groups, as_of, allow_stale))

    def topics_sync(self, flow: str | None = None, dry_run: bool = False) -> TopicsSyncReport:
        """Reconcile the flows' target topics with their sources once, as a running mirror does every
        ``refresh_interval_seconds``: create missing topics, grow the ones drkit created, set changed configs;
        ``dry_run``: describe both clusters and plan, change nothing."""
        from drkit.operate.topics import sync_topics
        from drkit.results import TopicsSyncReport
        from drkit.wiring import reconcilers

        flows = self.config.flows_named(flow)
        layout = self.layout if dry_run else self._writable_state()
        return TopicsSyncReport.of(sync_topics(self.context, flows, reconcilers(self.config, layout), dry_run))

    # -- inspection (notebooks): the Delta tables as written, through delta-rs ----------------------

    def sync_history(
        self, flow: str, topic: str, partition: int | None = None, version: int | None = None
    ) -> SyncHistory:
        """The ``offset_syncs`` rows of a source topic's partition (None: all partitions) as the mirror wrote
        them (write time, batch, stream), at Delta ``version`` (None: now), with their gaps (``gaps()``)."""
        from drkit.results import SyncHistory
        from drkit.store.offset_syncs import SyncTable

        name = self.config.flow(flow).name
        rows = SyncTable(self.layout).history(name, topic, partition, version)
        return SyncHistory(name, topic, partition, version, tuple(rows))

    def checkpoint_history(
        self, flow: str, group: str, as_of: datetime | None = None, version: int | None = None
    ) -> CheckpointHistory:
        """Every checkpoint of ``group`` in ``flow``, oldest first: up to ``as_of``, at Delta ``version``."""
        from drkit.results import CheckpointHistory, CheckpointRow
        from drkit.store.checkpoints import CheckpointTable

        name = self.config.flow(flow).name
        recorded = CheckpointTable(self.layout).history(name, group, as_of, version)
        return CheckpointHistory(name, group, as_of, version, tuple(CheckpointRow.of(r) for r in recorded))

    def table_versions(self, table: str) -> TableVersions:
        """The commits of a drkit Delta table (``offset_syncs``, ``checkpoints``, ``operations``): what time
        travel (``version``, ``as_of``) can go back to."""
        from drkit.results import TableVersions
        from drkit.store.table_history import table_versions

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
        ``metrics_port`` (default ``[metrics] port``). Each flow is copied only while this process holds its
        lease on the flow's target (docs/design/lease.md): until then it stands by."""
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
        """The translator's collaborators: the configured clusters, the sync and checkpoint logs, its run files."""
        from drkit.wiring import translator_context

        return translator_context(self.config, self.layout, self.clock)

    def maintain(self, keep_recent_batches: int = 100, vacuum_retention_hours: float = 168.0) -> MaintenanceReport:
        """Coalesce old offset-syncs (translation unchanged), OPTIMIZE and VACUUM the Delta tables, on
        delta-rs (no JVM).

        Settings, the state root and the tables are checked before any table is rewritten, so a refused
        run changes nothing.
        """
        from drkit.store.delta import check_readable
        from drkit.store.maintenance import check_settings, maintain

        check_settings(keep_recent_batches, vacuum_retention_hours)
        layout = self._writable_state()
        # Every table readable before any is rewritten: a damaged second table must not stop the run
        # after the first was rewritten.
        check_readable([(layout.offset_syncs, "offset_syncs"), (layout.checkpoints, "checkpoints")])
        return maintain(layout, self.config, keep_recent_batches, vacuum_retention_hours)

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

    def drill_probe(
        self, flow: str, group: str, max_records: int = 10_000, wait_seconds: float = 30.0, max_reread: int = 0
    ) -> ProbeReport:
        """A non-destructive drill of ``group`` (drkit.drill.probe): its failover planned now, given to a drill
        group on the target, read there as the group would, every record verified against the source; the
        report is kept in ``drills``. Nothing is committed to the group, nothing written to a topic."""
        from drkit.core.probe import ProbeBudget
        from drkit.drill.probe import Probe, ProbeRequest
        from drkit.store.drills import DrillLog

        layout = self._writable_state()
        request = ProbeRequest(self.config.flow(flow), group, max_records, wait_seconds, ProbeBudget(max_reread))
        report = Probe(self, request).run()
        DrillLog(layout).append(report)
        return report

    def drill_repeat(
        self,
        run: Callable[[], R],
        every: float,
        metrics_port: int | None = None,
        on_report: Callable[[R], None] | None = None,
        on_error: Callable[[DrkitError], None] | None = None,
        stop: threading.Event | None = None,
        max_runs: int | None = None,
    ) -> R | None:
        """A drill on a schedule (drkit.drill.repeat): ``run`` (one drill of this facade, whose report lands in
        ``drills`` under its ``id``: ``lambda: drkit.drill_run(spec)``) every ``every`` seconds until SIGINT/
        SIGTERM, each run's row exported as the ``drkit_drill_*`` metrics on ``metrics_port`` (default
        ``[metrics] port``; none: not served). Returns the last report (None: none)."""
        from drkit import metrics  # prometheus_client: only the long-running processes serve metrics
        from drkit.drill.repeat import repeat
        from drkit.store.drills import DrillLog

        metrics.serve(metrics_port or self.config.metrics.port, self.config.metrics.host)
        drills = DrillLog(self.layout)
        newest: dict[tuple[str, str], DrillRecord] = {}
        for r in drills.list(DRILL_ROWS_READ):  # newest first: a restarted schedule shows the last drills at once
            newest.setdefault((r.name, r.flow), r)
        for r in newest.values():
            metrics.record_drill(r, ran=False)

        def once() -> R:
            report = run()
            ran = getattr(report, "id", None)
            record = next((r for r in drills.list(DRILL_ROWS_READ) if r.id == ran), None)
            if record is not None:
                metrics.record_drill(record)
            return report

        return repeat(once, every, on_report, on_error, stop, max_runs)

    def drill_history(self, limit: int = 20) -> DrillHistory:
        """The drills run with this state root, newest first."""
        from drkit.results import DrillHistory
        from drkit.store.drills import DrillLog

        return DrillHistory(tuple(DrillLog(self.layout).list(limit)))
