"""How the mirror's copy (drkit.mirror.executor.copy_ranges: the reader and the Copier, no Spark) scales
over processes on this host: one process copying every partition of a 1 KB backlog against two processes
copying half each, alternated. Not a test.

Starts two local KRaft clusters (``--base-port``, +10); per round and mode, a fresh 12-partition topic of
``--records`` 1 KB records; prints one JSON line per run (wall time including the processes' start, each
copy's own time, the load average before it). Example::

    .venv/bin/python -m scripts.bench.copy_processes --records 200000 --rounds 2 --base-port 43092
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from scripts.bench.lib.clusters import create_topic, local_kafka, start_pair, target_topic
from scripts.bench.lib.producers import produce_random

PARTITIONS = 12


def copy(args: tuple[str, str, str, list[int], int]) -> tuple[float, int, str | None]:
    from drkit.mirror.context import source_consumer_settings
    from drkit.mirror.executor import CopyTask, copy_ranges
    from drkit.mirror.job import PRODUCER_DEFAULTS, PRODUCER_FIXED

    source, target, topic, partitions, per_partition = args
    consumer = {"bootstrap.servers": source, "group.id": "bench", "enable.auto.commit": False}
    task = CopyTask(
        {**consumer, **source_consumer_settings()},
        {"bootstrap.servers": target, **PRODUCER_DEFAULTS, **PRODUCER_FIXED},
        {topic: target_topic(topic)},
        "A",
        "B",
        60.0,
        False,
        True,
    )
    started = time.monotonic()
    result = copy_ranges(task, {(topic, p): (0, per_partition) for p in partitions}, 0)
    return round(time.monotonic() - started, 3), result.site.records, result.failure


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.copy_processes", description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--base-port", type=int, default=49192)
    args = p.parse_args()
    per_partition = args.records // PARTITIONS
    with tempfile.TemporaryDirectory(prefix="drkit-copy-processes-") as state:
        kafka = local_kafka(Path(state) / "kafka", args.base_port, "512m")
        source, target = start_pair(kafka)
        try:
            for round_ in range(args.rounds):
                for mode in ("one", "two") if round_ % 2 == 0 else ("two", "one"):
                    topic = f"copy-processes-{uuid.uuid4().hex[:6]}"
                    create_topic(source, topic, PARTITIONS)
                    create_topic(target, target_topic(topic), PARTITIONS)
                    produce_random(source, topic, args.records, PARTITIONS)
                    load = os.getloadavg()[0]
                    started = time.monotonic()
                    jobs: list[Any]
                    if mode == "one":
                        jobs = [copy((source, target, topic, list(range(PARTITIONS)), per_partition))]
                    else:
                        halves = [list(range(0, PARTITIONS, 2)), list(range(1, PARTITIONS, 2))]
                        with mp.get_context("spawn").Pool(2) as pool:
                            jobs = pool.map(copy, [(source, target, topic, h, per_partition) for h in halves])
                    wall = round(time.monotonic() - started, 3)
                    line = {"mode": mode, "round": round_ + 1, "wall_seconds": wall, "copies": jobs, "load_1m": load}
                    print(json.dumps(line), flush=True)
        finally:
            kafka.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
