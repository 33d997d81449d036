"""Runs the mirror jobs of one or more flows: start every query, wait, stop them gracefully.

Invariant: every flow is checked (not registered, targets consistent) before any query starts; on
SIGINT/SIGTERM (``drkit.runtime.signals``) the running batches get their flow's stop grace, and a
stopped query's error becomes an ``AccessDenied`` (a cluster refused the principal, exit 4), a ``ClusterError``
(source unreachable, exit 4) or a ``MirrorError`` (5).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from drkit import metrics
from drkit.config import FlowConfig
from drkit.core.reports import MirrorSummary
from drkit.errors import AccessDenied, ClusterError, MirrorError
from drkit.mirror import progress
from drkit.mirror.context import MirrorContext
from drkit.mirror.failure import describe_failure, refusal_in, source_lost
from drkit.mirror.job import MirrorJob
from drkit.mirror.reader import ABANDONED_MARKER
from drkit.mirror.wiring import mirror_job
from drkit.runtime.signals import stop_on_signals

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)


class MirrorRunner:
    """Runs the jobs of one or more flows until done (``once``) or stopped by SIGINT/SIGTERM."""

    def __init__(self, context: MirrorContext, flows: list[FlowConfig]) -> None:
        self._context, self._flows = context, flows
        #: made by ``run``: a job's copy path depends on the run (drkit.mirror.wiring)
        self.jobs: list[MirrorJob] = []
        self._spark = context.spark
        self._stop = threading.Event()
        self._unreachable: set[str] = set()

    def run(
        self, once: bool, poll_seconds: float = 0.2, on_progress: Callable[[list[MirrorSummary]], None] | None = None
    ) -> list[MirrorSummary]:
        queries: list[StreamingQuery] = []
        self.jobs = [mirror_job(self._context, f, once) for f in self._flows]
        unwatch = progress.watch(self._spark, {job.query_name: job.flow.name for job in self.jobs})
        with stop_on_signals(self._stop):
            try:
                self._run(queries, once, poll_seconds, on_progress)
            finally:
                self._close(queries)
                unwatch()
        return [job.summary() for job in self.jobs]

    def _run(
        self,
        queries: list[StreamingQuery],
        once: bool,
        poll_seconds: float,
        on_progress: Callable[[list[MirrorSummary]], None] | None,
    ) -> None:
        # Every flow before any starts: a refusal must not leave other flows' batches half done.
        for job in self.jobs:
            job.check_not_registered()
            job.check_targets()
        for job in self.jobs:
            queries.append(job.start(once))
        while any(q.isActive for q in queries):
            if self._stop.is_set():
                self._stop_queries(queries)
                break
            if on_progress is not None:
                on_progress([job.summary() for job in self.jobs])
            self._stop.wait(poll_seconds)
        for query, job in zip(queries, self.jobs, strict=True):
            error = query.exception()
            if error is not None and ABANDONED_MARKER in str(error):  # the query was being stopped
                log.warning(
                    "flow %s: stopped during a batch: it is copied again on restart (duplicates on the "
                    "target, no loss)",
                    job.flow.name,
                )
                continue
            if error is not None:
                metrics.ERRORS.labels(job.flow.name, "mirror").inc()
                refused = refusal_in(job.flow, error)
                if refused is not None:
                    raise AccessDenied(f"mirror of flow {job.flow.name} stopped: {refused}") from error
                kind = ClusterError if source_lost(job.flow, error) else MirrorError
                # The query's own trace (Java and Py4J) is the cause: shown by `drkit --debug` only.
                reason = describe_failure(job.flow, job.source.bootstrap_servers, error)
                raise kind(f"mirror of flow {job.flow.name} stopped: {reason}") from error

    def _close(self, queries: list[StreamingQuery]) -> None:
        for q in queries:
            if q.isActive:
                q.stop()
        for job in self.jobs:
            # A source that cannot be read will not answer the last observation either.
            job.observer.close(0.0 if job.flow.name in self._unreachable else 5.0)
            job.topology.close()
            job.heartbeats.close()
            job.close_copy()

    def stop(self) -> None:
        self._stop.set()

    def _stop_queries(self, queries: list[StreamingQuery]) -> None:
        """Let the running batches finish within their flow's grace, then stop every query.

        A continuous copier stops reading first, and the wait lasts until the batches took every copy it
        made (the next trigger's batch does), so a graceful stop leaves no orphan on the target.

        A batch stopped half way is produced again after a restart (duplicates, never a loss: Spark did
        not commit it and its syncs were not written). A source that cannot be read makes the batch wait
        for Kafka's timeouts, so it is not waited for at all.
        """
        for job in self.jobs:
            job.stop_reading()
        for q, job in zip(queries, self.jobs, strict=False):
            deadline = time.monotonic() + job.flow.mirror.stop_grace_seconds
            # The batches after the copier stopped reading take every copy it made (none left an orphan).
            while (
                q.isActive and (q.status.get("isTriggerActive") or job.holds_copies()) and time.monotonic() < deadline
            ):
                if not job.source_reachable():
                    self._unreachable.add(job.flow.name)
                    log.warning(
                        "flow %s: source %s unreachable: stopping the running batch", job.flow.name, job.flow.source
                    )
                    break
                time.sleep(0.1)
        for q, job in zip(queries, self.jobs, strict=False):
            job.abandon.set()  # a batch the driver is still reading gives up now
            if q.isActive:
                try:
                    q.stop()
                except Exception:  # spark.sql.streaming.stopTimeout passed: its thread is abandoned
                    log.warning(
                        "flow %s: the query did not stop within spark.sql.streaming.stopTimeout; exiting without "
                        "it: its uncommitted batch is copied again on restart (duplicates on the target, no loss)",
                        job.flow.name,
                    )
