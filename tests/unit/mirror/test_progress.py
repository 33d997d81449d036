"""Spark's share of a batch, as the mirror logs it (drkit.mirror.progress), with fakes (no Spark)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from drkit.mirror.progress import SparkPhase, describe, watch


def test_a_batchs_spark_phases_and_the_time_outside_the_callback() -> None:
    durations = {"triggerExecution": 180, "addBatch": 120, "latestOffset": 25, "walCommit": 15, "commitOffsets": 12}
    assert describe("A->B", 7, durations) == (
        "flow A->B: batch 7 in Spark: 60 ms outside drkit's callback "
        "(latestOffset 25, walCommit 15, addBatch 120, commitOffsets 12, triggerExecution 180 ms)"
    )


def test_without_the_whole_and_the_callback_the_time_outside_is_unknown_not_zero() -> None:
    assert "unknown outside" in describe("A->B", 0, {"latestOffset": 3})
    assert [p.value for p in SparkPhase][-1] == "triggerExecution"


class Streams:
    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def addListener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def removeListener(self, listener: Any) -> None:
        self.listeners.remove(listener)


class Session:
    def __init__(self) -> None:
        self.streams = Streams()


def test_no_listener_unless_the_progress_logger_is_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    spark = Session()
    caplog.set_level(logging.INFO, logger="drkit.mirror.progress")
    watch(spark, {"q": "A->B"})()
    assert spark.streams.listeners == []
    caplog.set_level(logging.DEBUG, logger="drkit.mirror.progress")
    stop = watch(spark, {"q": "A->B"})
    [listener] = spark.streams.listeners

    class Progress:
        name, batchId, durationMs = "q", 3, {"triggerExecution": 50, "addBatch": 40}

    class Other(Progress):
        name = "another query"

    for progress in (Progress, Other):
        listener.onQueryProgress(type("Event", (), {"progress": progress})())
    assert [r.getMessage() for r in caplog.records if r.name == "drkit.mirror.progress"] == [
        "flow A->B: batch 3 in Spark: 10 ms outside drkit's callback (addBatch 40, triggerExecution 50 ms)"
    ]
    stop()
    assert spark.streams.listeners == []
