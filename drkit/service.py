"""The facade that the CLI, notebooks and drills share: one object per config.

It owns the lazily created Spark session and hands out the jobs and stores, so every entry point
does the same thing the same way. Nothing here renders output.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from drkit import metrics
from drkit.config import DrkitConfig, load_config
from drkit.runtime.process import pid_files, pid_path
from drkit.store.tables import Tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from drkit.checkpoint.job import CheckpointRun
    from drkit.mirror.job import MirrorJob


class Drkit:
    def __init__(self, config: DrkitConfig, spark: SparkSession | None = None) -> None:
        self.config = config
        self._spark = spark

    @classmethod
    def from_file(cls, path: str) -> Drkit:
        return cls(load_config(path))

    @cached_property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from drkit.runtime.spark import build_session

            self._spark = build_session(self.config.spark)
        return self._spark

    @property
    def tables(self) -> Tables:
        return Tables(self.config.state_root())

    def mirror(self, flow: str | None = None, once: bool = False,
               on_progress: Callable[[list[MirrorJob]], None] | None = None) -> list[MirrorJob]:
        """Run the mirror of one flow (or all) until caught up (``once``) or stopped."""
        from drkit.mirror.job import MirrorRunner

        flows = self.config.flows_named(flow)
        metrics.serve(self.config.metrics.port, self.config.metrics.host)
        with pid_files([pid_path(self.config, f, "mirror") for f in flows]):
            return MirrorRunner(self.config, flows, self.spark).run(once, on_progress=on_progress)

    def checkpoint(self, flow: str | None = None, once: bool = True, interval: float | None = None,
                   max_runs: int | None = None) -> list[CheckpointRun]:
        """Translate the selected groups' offsets once, or every ``interval`` seconds until stopped."""
        from drkit.checkpoint.job import CheckpointRunner

        flows = self.config.flows_named(flow)
        metrics.serve(self.config.metrics.port, self.config.metrics.host)
        with pid_files([pid_path(self.config, f, "checkpoint") for f in flows]):
            return CheckpointRunner(self.config, flows, self.spark).run(once, interval, max_runs)

    def maintain(self, keep_recent_batches: int = 100, vacuum_retention_hours: float = 168.0) -> dict[str, Any]:
        """Coalesce old offset-syncs (translation unchanged), OPTIMIZE and VACUUM the Delta tables.

        Settings are checked before the Spark session starts, so a refused run costs nothing.
        """
        from drkit.store.maintenance import check_settings, maintain

        check_settings(keep_recent_batches, vacuum_retention_hours)
        return maintain(self.spark, self.tables, self.config, keep_recent_batches, vacuum_retention_hours)

    @staticmethod
    def mirror_summary(jobs: list[MirrorJob]) -> list[dict[str, Any]]:
        out = []
        for job in jobs:
            reports = job.reports
            out.append({
                "flow": job.flow.name,
                "batches": len(reports),
                "skipped_batches": sum(1 for r in reports if r.skipped),
                "records": sum(r.records for r in reports),
                "bytes": sum(r.bytes for r in reports),
                "sync_ranges": sum(r.ranges for r in reports),
                "created_topics": sorted({t for r in reports for t in r.created_topics}),
            })
        return out
