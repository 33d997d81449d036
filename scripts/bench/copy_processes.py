"""How the mirror's copy (drkit.mirror.executor.copy_ranges: the reader and the Copier, no Spark) scales
over processes on this host: one process copying every partition of a 1 KB backlog against two processes
copying half each, alternated. Not a test.

Starts two local KRaft clusters (``--base-port``, +10); per round and mode, a fresh 12-partition topic of
``--records`` 1 KB records; prints one JSON line per run (wall time including the processes' start, each
copy's own time, the load average before it). Example::

    .venv/bin/python scripts/bench/copy_processes.py --records 200000 --rounds 2 --base-port 43092
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

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent)]

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
        {topic: f"A.{topic}"},
        "A",
        "B",
        60.0,
        False,
        True,
    )
    started = time.monotonic()
    result = copy_ranges(task, {(topic, p): (0, per_partition) for p in partitions}, 0)
    return round(time.monotonic() - started, 3), result.site.records, result.failure


def produce(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    for i in range(records):
        while True:
            try:
                producer.produce(topic, os.urandom(1000), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def main() -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    from drkit.localdev.clusters import LocalKafka

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--base-port", type=int, default=49192)
    args = p.parse_args()
    per_partition = args.records // PARTITIONS
    with tempfile.TemporaryDirectory(prefix="drkit-copy-processes-") as state:
        kafka = LocalKafka(Path(state) / "kafka", base_port=args.base_port, heap="512m")
        clusters = {c.alias: c.bootstrap_servers for c in kafka.up(["A", "B"])}
        try:
            for round_ in range(args.rounds):
                for mode in ("one", "two") if round_ % 2 == 0 else ("two", "one"):
                    topic = f"copy-processes-{uuid.uuid4().hex[:6]}"
                    for bootstrap, name in ((clusters["A"], topic), (clusters["B"], f"A.{topic}")):
                        admin = AdminClient({"bootstrap.servers": bootstrap})
                        admin.create_topics([NewTopic(name, PARTITIONS)])[name].result(30)
                    produce(clusters["A"], topic, args.records)
                    load = os.getloadavg()[0]
                    started = time.monotonic()
                    jobs: list[Any]
                    if mode == "one":
                        jobs = [copy((clusters["A"], clusters["B"], topic, list(range(PARTITIONS)), per_partition))]
                    else:
                        halves = [list(range(0, PARTITIONS, 2)), list(range(1, PARTITIONS, 2))]
                        with mp.get_context("spawn").Pool(2) as pool:
                            jobs = pool.map(
                                copy, [(clusters["A"], clusters["B"], topic, h, per_partition) for h in halves]
                            )
                    wall = round(time.monotonic() - started, 3)
                    line = {"mode": mode, "round": round_ + 1, "wall_seconds": wall, "copies": jobs, "load_1m": load}
                    print(json.dumps(line), flush=True)
        finally:
            kafka.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
