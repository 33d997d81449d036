"""Where a batch's time goes, on real brokers and a real Spark: drkit's phases in the batch line, Spark's
own from its progress reports (drkit.mirror.progress), with the progress logger at DEBUG."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from support.kafka_io import create_topic, produce, unique

from drkit.config import DrkitConfig
from drkit.mirror.runner import MirrorRunner
from drkit.service import Drkit

SPARK_LINE = re.compile(r"flow A->B: batch (\d+) in Spark: (\d+) ms outside drkit's callback \(.*addBatch (\d+).*\)")
BATCH_LINE = re.compile(r"batch (\d+) mirrored (\d+) records .*\(([\d.]+)s, plan ([\d.]+)s, copy ([\d.]+)s, syncs")


def test_each_batch_logs_drkits_phases_and_spark_logs_its_own(
    clusters: dict[str, str],
    spark: Any,
    make_config: Callable[..., DrkitConfig],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The last set_level also sets caplog's handler level: DEBUG last, or the progress lines are filtered.
    caplog.set_level(logging.INFO, logger="drkit.mirror.job")
    caplog.set_level(logging.DEBUG, logger="drkit.mirror.progress")
    topic = unique("budget")
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, [{"partition": i % 2, "value": b"v%d" % i} for i in range(100)])
    config = make_config([{"source": "A", "target": "B", "topics": {"include": [topic]}}])
    runner = MirrorRunner(Drkit(config, spark).mirror_context(), config.flows)
    thread = threading.Thread(target=lambda: runner.run(False), daemon=True)
    thread.start()

    def lines(pattern: re.Pattern[str]) -> list[re.Match[str]]:
        return [m for r in list(caplog.records) if (m := pattern.search(r.getMessage()))]

    try:
        deadline = time.monotonic() + 120
        while not (lines(SPARK_LINE) and lines(BATCH_LINE)) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        runner.stop()
        thread.join(120)
    [first, *_] = lines(BATCH_LINE)
    total, plan, copy = (float(first.group(i)) for i in (3, 4, 5))
    assert first.group(2) == "100" and 0 <= plan + copy <= total + 0.01, first.group(0)
    spark_line = next(m for m in lines(SPARK_LINE) if m.group(1) == first.group(1))
    # Spark's callback time holds drkit's whole batch (rounded to 10 ms in the batch line).
    assert int(spark_line.group(3)) >= total * 1000 - 10, spark_line.group(0)
