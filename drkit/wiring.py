"""The real adapters, wired into the contexts the operations and the translator receive.

The facade's one place that knows which adapter serves which port: the Delta tables and the run files
(drkit.store), the clusters and topology reconcilers (drkit.kafka). Jobs and operations get them through
their contexts and never import drkit.store (import-linter holds them to it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from drkit.config import DrkitConfig, FlowConfig
from drkit.core.ports import CheckpointLog, Clusters, SyncLog
from drkit.core.reports import TranslationRun
from drkit.core.status import EndsObservation
from drkit.kafka.admin import KafkaAdmin, KafkaClusters
from drkit.kafka.checkpoint_topic import CheckpointWriter
from drkit.kafka.consumer_offsets import ConsumerOffsetsTail
from drkit.kafka.topology import TopologyReconciler
from drkit.layout import JobKind, StateLayout
from drkit.operate.context import OperateContext
from drkit.store.checkpoints import CheckpointTable
from drkit.store.offset_syncs import SyncIndexCache, SyncTable
from drkit.store.operations import OperationTable
from drkit.store.runs import MirrorFiles, RunFiles, TranslatorRun
from drkit.translator.context import TranslatorContext


def operate_context(config: DrkitConfig, layout: StateLayout, clock: Callable[[], datetime]) -> OperateContext:
    """The operations' collaborators: the configured clusters, the Delta tables (delta-rs, no JVM), the run files."""
    syncs, checkpoints, operations = SyncTable(layout), CheckpointTable(layout), OperationTable(layout)
    runs, mirror_runs = RunFiles(layout), MirrorFiles(layout)
    return OperateContext(
        config, KafkaClusters(config), syncs, checkpoints, operations, layout, runs, mirror_runs, clock
    )


def translator_context(
    config: DrkitConfig,
    layout: StateLayout,
    clock: Callable[[], datetime],
    clusters: Clusters | None = None,
    syncs: SyncLog | None = None,
    checkpoints: CheckpointLog | None = None,
) -> TranslatorContext:
    """The translator's collaborators: the configured clusters and the Delta sync and checkpoint logs (unless
    given), its run files and sync indexes under ``layout`` (the indexes read only what the mirror appended
    since, and know its re-created topics)."""
    files = MirrorFiles(layout)
    log: SyncLog = SyncTable(layout) if syncs is None else syncs

    def sync_indexes(flow: str) -> SyncIndexCache:
        return SyncIndexCache(log, flow, lambda: files.renewals(flow))

    return TranslatorContext(
        config,
        KafkaClusters(config) if clusters is None else clusters,
        log,
        CheckpointTable(layout) if checkpoints is None else checkpoints,
        TranslatorRunFiles(RunFiles(layout)),
        sync_indexes,
        clock,
        commit_tail=lambda alias: ConsumerOffsetsTail(config.clusters[alias], alias),
        checkpoint_topic=lambda alias: CheckpointWriter(config.clusters[alias], alias),
    )


@dataclass(frozen=True)
class TranslatorRunFiles:
    """The translator's run log on the run files: a run is recorded as the ``TranslatorRun`` status reads."""

    files: RunFiles

    def observe_source_ends(self, kind: JobKind, flow: str, observation: EndsObservation) -> None:
        self.files.observe_source_ends(kind, flow, observation)

    def record_run(self, run: TranslationRun, confirmed: tuple[str, ...]) -> None:
        record = TranslatorRun(
            run.finished_at_ms, run.seconds, run.groups, run.checkpoints, run.appended, confirmed, run.read_at_ms
        )
        self.files.write_last_run(run.flow, record)


def reconcilers(config: DrkitConfig, layout: StateLayout) -> Callable[[FlowConfig], TopologyReconciler]:
    """A flow's topology reconciler: its two clusters' admins, and the mirror's record of the topics it created
    (the only ones it grows)."""
    files = MirrorFiles(layout)

    def reconciler(flow: FlowConfig) -> TopologyReconciler:
        name = flow.name
        return TopologyReconciler(
            flow,
            config.topic_selector(flow),
            KafkaAdmin(config.clusters[flow.source], flow.source),
            KafkaAdmin(config.clusters[flow.target], flow.target),
            owned=lambda: files.created_topics(name),
            on_created=lambda names: files.add_created_topics(name, names),
        )

    return reconciler
