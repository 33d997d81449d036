"""Runs the mirror jobs of one or more flows: start every query, wait, stop them gracefully.

Invariant: every flow is checked (not registered, targets consistent) before any query starts; on
SIGINT/SIGTERM (``drkit.runtime.signals``) the running batches get their flow's stop grace, and a
stopped query's error becomes an ``AccessDenied`` (a cluster refused the principal, exit 4), a ``ClusterError``
(source unreachable, exit 4) or a ``MirrorError`` (5).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from drkit import metrics
from drkit.config import FlowConfig
from drkit.core.mirror_lease import Instance
from drkit.core.reports import MirrorSummary
from drkit.errors import FENCED_BY_NEWER_HOLDER, AccessDenied, ClusterError, DrkitError, FencedError, MirrorError
from drkit.mirror import progress
from drkit.mirror.context import MirrorContext
from drkit.mirror.failure import describe_failure, refusal_in, source_lost
from drkit.mirror.job import MirrorJob
from drkit.mirror.lease import this_instance
from drkit.mirror.reader import ABANDONED_MARKER
from drkit.mirror.wiring import mirror_job
from drkit.runtime.signals import stop_on_signals

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

#: How long closing waits for a flow still standing by to stop (an append to the lease topic in flight
#: takes at most the lease log's timeout).
ACQUIRE_CLOSE_SECONDS = 15.0


class MirrorRunner:
    """Runs the jobs of one or more flows until done (``once``) or stopped by SIGINT/SIGTERM."""

    def __init__(self, context: MirrorContext, flows: list[FlowConfig], instance: Instance | None = None) -> None:
        self._context, self._flows = context, flows
        #: This process, as the other mirror processes of its flows see it (drkit.core.mirror_lease).
        self.instance = instance or this_instance()
        #: made by ``run``: a job's copy path depends on the run (drkit.mirror.wiring)
        self.jobs: list[MirrorJob] = []
        self._spark = context.spark
        self._stop = threading.Event()
        self._unreachable: set[str] = set()
        self._acquiring: list[_Acquiring] = []

    def run(
        self, once: bool, poll_seconds: float = 0.2, on_progress: Callable[[list[MirrorSummary]], None] | None = None
    ) -> list[MirrorSummary]:
        queries: list[StreamingQuery] = []
        self.jobs = [mirror_job(self._context, f, once, self.instance) for f in self._flows]
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
            job.stand_by(once)
        # Each flow's lease in a thread of its own: a flow starts as soon as this process holds its lease (a
        # standby of several flows takes over each one as its active stops).
        leases = self._acquiring = [_Acquiring(job, self._stop, wait=not once) for job in self.jobs]
        started: dict[int, StreamingQuery] = {}
        while len(started) < len(self.jobs) or any(q.isActive for q in started.values()):
            for i, acquiring in enumerate(leases):
                if i in started or not acquiring.done.is_set():
                    continue
                if acquiring.error is not None:
                    raise acquiring.error
                if not acquiring.held:
                    continue  # stopped while standing by
                job = self.jobs[i]
                job.lease.start()
                held_at = time.monotonic()
                job.check_targets()
                started[i] = job.start(once)
                queries.append(started[i])
                log.info(
                    "flow %s: query started under epoch %d, %.1fs after taking the lease",
                    job.flow.name,
                    job.lease.epoch,
                    time.monotonic() - held_at,
                )
            for job in self.jobs:
                _lease_metrics(job)
            lost = next((job for job in self.jobs if job.lease.lost.is_set()), None)
            if lost is not None:
                for q in queries:
                    lost.abandon.set()
                    if q.isActive:
                        q.stop()
                raise FencedError(lost.lease.lost_reason)
            if self._stop.is_set():
                self._stop_queries(queries, [self.jobs[i] for i in sorted(started)])
                break
            if on_progress is not None and started:
                on_progress([self.jobs[i].summary() for i in sorted(started)])
            self._stop.wait(poll_seconds)
        queries[:] = [started[i] for i in sorted(started)]
        held = [self.jobs[i] for i in sorted(started)]
        for query, job in zip(queries, held, strict=True):
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
                if job.lease.lost.is_set() or FENCED_BY_NEWER_HOLDER in str(error):
                    if not job.lease.lost.is_set():  # fenced in offset_syncs first: learn who holds the lease now
                        with contextlib.suppress(DrkitError):
                            job.lease.renew()
                    raise FencedError(
                        job.lease.lost_reason
                        or f"flow {job.flow.name}: a newer mirror of this flow took over (epoch above "
                        f"{job.lease.epoch}): this mirror stopped copying"
                    ) from error
                refused = refusal_in(job.flow, error)
                if refused is not None:
                    raise AccessDenied(f"mirror of flow {job.flow.name} stopped: {refused}") from error
                kind = ClusterError if source_lost(job.flow, error) else MirrorError
                # The query's own trace (Java and Py4J) is the cause: shown by `drkit --debug` only.
                reason = describe_failure(job.flow, job.source.bootstrap_servers, error)
                raise kind(f"mirror of flow {job.flow.name} stopped: {reason}") from error

    def _close(self, queries: list[StreamingQuery]) -> None:
        self._stop.set()  # a flow still standing by stops waiting: its lease's clients are closed below
        for acquiring in self._acquiring:
            acquiring.done.wait(ACQUIRE_CLOSE_SECONDS)
        for q in queries:
            if q.isActive:
                q.stop()
        for job in self.jobs:
            # A source that cannot be read will not answer the last observation either.
            job.observer.close(0.0 if job.flow.name in self._unreachable else 5.0)
            job.topology.close()
            job.heartbeats.close()
            job.close_copy()
            job.lease.release()  # after the last copy: a standby takes over at once

    def stop(self) -> None:
        self._stop.set()

    def _stop_queries(self, queries: list[StreamingQuery], jobs: list[MirrorJob]) -> None:
        """Let the running batches finish within their flow's grace, then stop every query.

        A continuous copier stops reading first, and the wait lasts until the batches took every copy it
        made (the next trigger's batch does), so a graceful stop leaves no orphan on the target.

        A batch stopped half way is produced again after a restart (duplicates, never a loss: Spark did
        not commit it and its syncs were not written). A source that cannot be read makes the batch wait
        for Kafka's timeouts, so it is not waited for at all.
        """
        for job in jobs:
            job.stop_reading()
        for q, job in zip(queries, jobs, strict=False):
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
        for q, job in zip(queries, jobs, strict=False):
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


def _lease_metrics(job: MirrorJob) -> None:
    lease, labels = job.lease, (job.flow.name, job.lease.instance.host)
    metrics.MIRROR_LEASE_ACTIVE.labels(*labels).set(1.0 if lease.refusal() is None else 0.0)
    metrics.MIRROR_LEASE_EPOCH.labels(*labels).set(lease.epoch)
    metrics.MIRROR_LEASE_REMAINING.labels(*labels).set(round(lease.remaining(), 1))


class _Acquiring:
    """One flow's lease being waited for in a thread of its own (drkit.mirror.lease)."""

    def __init__(self, job: MirrorJob, stop: threading.Event, wait: bool) -> None:
        self.done = threading.Event()
        self.held = False
        self.error: Exception | None = None
        self._job, self._stop, self._wait = job, stop, wait
        threading.Thread(target=self._run, name=f"drkit-standby-{job.flow.name}", daemon=True).start()

    def _run(self) -> None:
        try:
            self.held = self._job.lease.acquire(self._stop, wait=self._wait)
        except Exception as exc:  # raised by the runner's thread: one line, the flow named
            self.error = exc
        finally:
            self.done.set()
