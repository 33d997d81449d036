"""Benchmark of offset translation against a large ``offset_syncs`` table. Not a test.

The question it answers (the translator issue): how long does drkit take to translate the committed
offsets of many group-partitions when the mirror has been writing offset-syncs for a day, and what
does ``drkit maintain`` change?

What it does, in a fresh state folder (no Kafka needed: only Spark and Delta):

1. Fills a real ``offset_syncs`` Delta table (created by drkit's own store, schema version and all)
   with ``--batches`` one-second micro-batches of one mirror stream on ``--partitions`` partitions
   of one topic: one row per (batch, partition), ``--records`` records per row. Upstream offsets
   are dense; on the target, every ``--gap-every`` batches the downstream offsets skip one (a
   transaction marker or another producer's record), so rows do not all continue each other and
   coalescing has real gaps to respect. Default: 86,400 batches x 100 partitions = 8.64M rows.
   The rows are written in bulk (a few files), not as 86,400 commits of small files as a running
   mirror would leave them: the row count is a day's, the file count is not (see ``files``).
2. ``cold_load_seconds``: what a starting checkpoint translator (and failover, once) does: read
   every row of the flow (one Spark gaps-and-islands pass that coalesces continuing ranges), bring
   the ranges to the driver and index them (``SyncIndexCache``, a ``SyncIndex`` per partition).
3. ``translate_seconds``: ``plan_checkpoints`` (the checkpoint translator's pure planning: translate,
   classify, diff against the previous checkpoints) for ``--groups`` x ``--partitions``
   group-partitions (default 100 x 100 = 10,000) at random committed offsets (some past the end).
   Every translated offset is checked against the closed form of the synthetic mapping, so a wrong
   answer fails the benchmark instead of being timed.
4. ``incremental_reload_after_one_batch_seconds``: one more batch is appended as the mirror appends
   it, and the same cache updates itself with only the rows above its batch high-water mark: what
   the running translator pays per run while the mirror is writing.
5. ``drkit maintain`` (coalesce old rows, OPTIMIZE, VACUUM at the minimum 168 h retention), then
   steps 2-4 again: ``after_maintain``. The cold load after maintenance must give exactly the
   translations the first pass had after its extra batch.

Printed as one JSON object on stdout; progress goes to stderr. ``peak_rss_mb`` is the Python
driver's own peak RSS plus the Spark JVM's (VmHWM), read at the end.

Example::

    .venv/bin/python -m scripts.bench.translate                      # a day: 8.64M rows
    .venv/bin/python -m scripts.bench.translate --batches 3600       # an hour
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from drkit.config import DrkitConfig, parse_config
from drkit.core.checkpoints import CommittedOffset, plan_checkpoints
from drkit.core.offsets import SyncRange
from drkit.core.translate import SyncIndex
from drkit.layout import StateLayout
from drkit.store.offset_syncs import SyncIndexCache, SyncTable, range_table
from scripts.bench.lib.output import logger, print_json

FLOW = "A->B"
TOPIC = "orders"
TARGET = "A.orders"


log = logger("bench_translate")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.translate", description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", type=int, default=86_400, help="one-second micro-batches (default: a day)")
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--records", type=int, default=10, help="records per partition per batch")
    p.add_argument("--gap-every", type=int, default=600, help="a downstream gap every N batches (0: none)")
    p.add_argument("--groups", type=int, default=100, help="groups, each committed on every partition")
    p.add_argument("--files", type=int, default=8, help="files the synthetic table is written in")
    p.add_argument("--keep-recent-batches", type=int, default=100)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--state", type=Path, default=None, help="state folder (default: a temporary one)")
    return p.parse_args(argv)


class Mapping:
    """The synthetic mapping in closed form: the reference every translation is checked against."""

    def __init__(self, batches: int, records: int, gap_every: int) -> None:
        self.batches, self.records, self.gap_every = batches, records, gap_every
        self.end = batches * records  # upstream offsets 0..end-1 were all mirrored

    def downstream(self, upstream: int) -> int:
        batch = upstream // self.records
        return upstream + (batch // self.gap_every if self.gap_every else 0)

    def translate(self, committed: int) -> int:
        if committed < self.end:
            return self.downstream(committed)
        return self.downstream(self.end - 1) + 1  # past everything mirrored: provisional


#: 2026-01-01T00:00:00Z: when the synthetic day of this benchmark starts (a completed UTC day).
DAY_START_EPOCH = 1767225600


def fill(
    spark: Any,
    store: SyncTable,
    args: argparse.Namespace,
    start_epoch: int = DAY_START_EPOCH,
    flow: str = FLOW,
    topic: str = TOPIC,
    target: str = TARGET,
) -> float:
    """Append ``args.batches`` one-second batches x ``args.partitions`` rows (see the module docstring)
    written ``start_epoch + b`` seconds. Returns seconds taken."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    store.ensure()
    r, gap = args.records, args.gap_every
    shift = (F.col("b") / F.lit(gap)).cast("long") if gap else F.lit(0).cast("long")
    df = (
        spark.range(args.batches * args.partitions, numPartitions=args.files)
        .select(
            (F.col("id") / F.lit(args.partitions)).cast("long").alias("b"),
            (F.col("id") % F.lit(args.partitions)).cast("int").alias("p"),
        )
        .select(
            F.lit(flow).alias("flow"),
            F.lit(topic).alias("source_topic"),
            F.lit(target).alias("target_topic"),
            F.col("p").alias("partition"),
            (F.col("b") * r).alias("upstream_first"),
            (F.col("b") * r + r - 1).alias("upstream_last"),
            (F.col("b") * r + shift).alias("downstream_first"),
            (F.col("b") * r + r - 1 + shift).alias("downstream_last"),
            F.lit(r).cast("long").alias("record_count"),
            F.col("b").alias("batch_id"),
            F.lit("bench-stream").alias("stream_id"),
            F.expr(f"timestamp_seconds({int(start_epoch)} + b)").alias("written_at"),  # start + b s
        )
        .withColumn("sync_date", F.to_date("written_at"))
    )
    df.write.format("delta").mode("append").save(store.path)
    return time.monotonic() - started


def committed_offsets(args: argparse.Namespace, mapping: Mapping) -> dict[str, list[CommittedOffset]]:
    rng = random.Random(args.seed)
    out: dict[str, list[CommittedOffset]] = {}
    for g in range(args.groups):
        group = f"group-{g:04d}"
        offsets = []
        for p in range(args.partitions):
            # mostly inside what is mirrored, 5% at or past the end (provisional)
            c = rng.randrange(mapping.end) if rng.random() < 0.95 else mapping.end + rng.randrange(3)
            offsets.append(CommittedOffset(group, TOPIC, p, c))
        out[group] = offsets
    return out


def translate_all(
    indexes: dict[tuple[str, int], SyncIndex], committed: dict[str, list[CommittedOffset]], mapping: Mapping
) -> tuple[dict[str, Any], list[tuple[str, int, int | None]]]:
    started = time.monotonic()
    plan = plan_checkpoints(FLOW, committed, {TOPIC: TARGET}, indexes, {})
    seconds = time.monotonic() - started
    wrong = [c for c in plan.current if c.downstream_offset != mapping.translate(c.upstream_offset)]
    if wrong:
        raise SystemExit(
            f"translation disagrees with the reference for {len(wrong)} group-partitions, "
            f"e.g. {wrong[0]} (expected {mapping.translate(wrong[0].upstream_offset)})"
        )
    n = len(plan.current)
    figures = {
        "group_partitions": n,
        "translate_seconds": round(seconds, 4),
        "translate_us_per_group_partition": round(seconds / n * 1e6, 2) if n else None,
        "provisional": sum(1 for c in plan.current if c.position.value == "past_end"),
    }
    return figures, sorted((c.group, c.partition, c.downstream_offset) for c in plan.current)


def load_and_translate(
    store: SyncTable, committed: dict[str, list[CommittedOffset]], mapping: Mapping, args: argparse.Namespace
) -> tuple[dict[str, Any], tuple[list[Any], list[Any]]]:
    """A cold load (what a starting translator or failover does), a translation of every group-partition,
    then one more mirror batch and the translator's incremental reload."""
    cache = SyncIndexCache(store, FLOW)
    started = time.monotonic()
    indexes = cache.indexes()
    load = time.monotonic() - started
    figures, cold_results = translate_all(indexes, committed, mapping)
    # one more one-second batch, appended as the mirror does, then the incremental reload
    b = mapping.batches
    shift = b // args.gap_every if args.gap_every else 0
    rows = [
        (
            TOPIC,
            TARGET,
            p,
            SyncRange(
                b * args.records,
                b * args.records + args.records - 1,
                b * args.records + shift,
                b * args.records + args.records - 1 + shift,
            ),
        )
        for p in range(args.partitions)
    ]
    store.write(FLOW, "bench-stream", b, range_table(rows))
    mapping.batches += 1
    mapping.end = mapping.batches * mapping.records
    started = time.monotonic()
    indexes = cache.indexes()
    reload = time.monotonic() - started
    _, reloaded_results = translate_all(indexes, committed, mapping)
    return {
        "cold_load_seconds": round(load, 3),
        "ranges_in_memory": sum(len(index) for index in indexes.values()),
        **figures,
        "incremental_reload_after_one_batch_seconds": round(reload, 3),
    }, (cold_results, reloaded_results)


def table_figures(spark: Any, path: str) -> dict[str, int]:
    from delta.tables import DeltaTable

    detail = DeltaTable.forPath(spark, path).detail().select("numFiles", "sizeInBytes").first()
    return {"rows": spark.read.format("delta").load(path).count(), "files": int(detail[0]), "bytes": int(detail[1])}


def peak_rss_mb() -> dict[str, float]:
    python_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    jvm_kb = 0
    for child in Path("/proc").iterdir():
        if not child.name.isdigit():
            continue
        try:
            status = (child / "status").read_text()
        except OSError:
            continue
        if f"PPid:\t{os.getpid()}\n" in status:
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    jvm_kb += int(line.split()[1])
    return {
        "python_driver": round(python_kb / 1024, 1),
        "spark_jvm": round(jvm_kb / 1024, 1),
        "total": round((python_kb + jvm_kb) / 1024, 1),
    }


def config_for(state: Path) -> DrkitConfig:
    data = {
        "clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [{"source": "A", "target": "B"}],
        "state": {"root": str(state)},
    }
    return parse_config(data, str(state / "drkit.toml"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from drkit.runtime.spark import build_session
    from drkit.service import Drkit

    with tempfile.TemporaryDirectory(prefix="drkit-bench-translate-") as tmp:
        state = args.state or Path(tmp)
        config = config_for(state)
        started = time.monotonic()
        spark = build_session(config.spark, "drkit-bench-translate")
        session_seconds = time.monotonic() - started
        service = Drkit(config, spark)
        store = SyncTable(StateLayout(config.state_root()))
        mapping = Mapping(args.batches, args.records, args.gap_every)
        log(f"writing {args.batches * args.partitions:,} offset-sync rows")
        fill_seconds = fill(spark, store, args)
        before_table = table_figures(spark, store.path)
        committed = committed_offsets(args, mapping)
        log("loading syncs and translating")
        before, results_before = load_and_translate(store, committed, mapping, args)
        log("drkit maintain")
        maintained = service.maintain(args.keep_recent_batches).as_dict()
        after_table = table_figures(spark, store.path)
        log("loading syncs and translating again")
        after, results_after = load_and_translate(store, committed, mapping, args)
        # The cold load after maintenance sees the state the first pass reached with its extra batch.
        if results_after[0] != results_before[1]:
            raise SystemExit("translations differ after maintenance")
        report = {
            "bench": "translate",
            "setup": {
                "batches": args.batches,
                "partitions": args.partitions,
                "records_per_batch": args.records,
                "gap_every_batches": args.gap_every,
                "groups": args.groups,
                "files_written": args.files,
                "cpus": os.cpu_count(),
            },
            "spark_session_seconds": round(session_seconds, 1),
            "fill_seconds": round(fill_seconds, 1),
            "before_maintain": {"table": before_table, **before},
            "maintain": {
                "seconds": maintained["seconds"],
                "optimize_seconds": maintained["offset_syncs"]["optimize_seconds"],
                "vacuum_seconds": maintained["offset_syncs"]["vacuum_seconds"],
                "coalesce_seconds": maintained["offset_syncs"]["coalesce"]["seconds"],
                "ranges_merged": maintained["offset_syncs"]["coalesce"]["ranges_merged"],
                "merged_into": maintained["offset_syncs"]["coalesce"]["merged_into"],
            },
            "after_maintain": {"table": after_table, **after},
            "translations_identical_after_maintain": True,
            "all_translations_checked_against_reference": True,
            "peak_rss_mb": peak_rss_mb(),
        }
        spark.stop()
    print_json(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
