"""Spark's share of each mirror batch, from Spark's own progress reports: the time a batch spends outside
drkit's callback (asking the source for its ends, writing the offset log, planning, writing the commit log).

Observation only, nothing here decides: with the logger ``drkit.mirror.progress`` at DEBUG the mirror
registers a streaming-query listener that logs one line per batch of its queries, next to the batch's own
line (whose phases are drkit's). Without DEBUG no listener is registered, so a mirror pays nothing for it
(each event would cross from the JVM into Python).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

log = logging.getLogger(__name__)


class SparkPhase(StrEnum):
    """The parts of a micro-batch Spark times (``StreamingQueryProgress.durationMs``), in their order."""

    LATEST_OFFSET = "latestOffset"  # the source's ends, asked from the broker
    WAL_COMMIT = "walCommit"  # the offset log: the batch's planned ranges, written before it runs
    QUERY_PLANNING = "queryPlanning"
    GET_BATCH = "getBatch"
    ADD_BATCH = "addBatch"  # the foreachBatch callback: drkit's plan, copy, state and syncs
    COMMIT_OFFSETS = "commitOffsets"  # the commit log: the batch done
    TRIGGER = "triggerExecution"  # the whole batch


def describe(flow: str, batch_id: int, durations: Mapping[str, int]) -> str:
    """One line of a batch's Spark phases in milliseconds, and what Spark took besides drkit's callback."""
    trigger = durations.get(SparkPhase.TRIGGER)
    callback = durations.get(SparkPhase.ADD_BATCH)
    outside = f"{trigger - callback} ms" if trigger is not None and callback is not None else "unknown"
    parts = ", ".join(f"{p.value} {durations[p]}" for p in SparkPhase if p in durations)
    return f"flow {flow}: batch {batch_id} in Spark: {outside} outside drkit's callback ({parts} ms)"


def watch(spark: Any, flows_by_query: Mapping[str, str]) -> Callable[[], None]:
    """Log Spark's phases of every batch of the named queries (query name -> flow), at DEBUG only; the
    function returned stops it."""
    if not log.isEnabledFor(logging.DEBUG):
        return lambda: None
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            progress = event.progress
            flow = flows_by_query.get(progress.name or "")
            if flow is not None:
                log.debug("%s", describe(flow, progress.batchId, dict(progress.durationMs)))

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    listener = _Listener()
    spark.streams.addListener(listener)
    return lambda: spark.streams.removeListener(listener)
