"""The state the operator benchmark measures in: clusters A and B made real (every synced offset exists on both),
``offset_syncs`` as a mirror that ran ``--sync-batches`` one-second batches leaves it, checkpoints of the groups
and the translator's last-run file, and the config of the flow A->B (see __main__.py's docstring)."""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scripts.bench.lib.clusters import create_topic
from scripts.bench.lib.drkit_config import flow_config

FLOW = "A->B"
TOPIC = "orders"
TARGET = "A.orders"
RECORDS = 1  # records per partition per batch: the records exist on both clusters
GAP_EVERY = 600  # a downstream gap every N batches (transaction markers on the target)
GROUP_PREFIX = "bench-g"
STREAM = "bench-stream"


def batch_rows(first_batch: int, last_batch: int, partitions: int, first_epoch: float) -> Any:
    """The offset_syncs rows of batches ``first_batch..last_batch`` (one range per partition, RECORDS
    records each), batch ``b`` written ``first_epoch + b`` seconds."""
    import numpy as np
    import pyarrow as pa

    from drkit.store.offset_syncs import SPEC

    b = np.repeat(np.arange(first_batch, last_batch + 1, dtype=np.int64), partitions)
    p = np.tile(np.arange(partitions, dtype=np.int32), last_batch - first_batch + 1)
    up_first, up_last = b * RECORDS, b * RECORDS + RECORDS - 1
    written = ((first_epoch + b) * 1_000_000).astype(np.int64)
    n = len(b)
    return pa.Table.from_pydict(
        {
            "flow": pa.array([FLOW] * n, pa.string()),
            "source_topic": pa.array([TOPIC] * n, pa.string()),
            "target_topic": pa.array([TARGET] * n, pa.string()),
            "partition": p,
            "upstream_first": up_first,
            "upstream_last": up_last,
            "downstream_first": up_first + b // GAP_EVERY,
            "downstream_last": up_last + b // GAP_EVERY,
            "record_count": np.full(n, RECORDS, dtype=np.int64),
            "batch_id": b,
            "stream_id": pa.array([STREAM] * n, pa.string()),
            "written_at": pa.array(written, pa.timestamp("us", tz="UTC")),
            "sync_date": pa.array(written // 1_000_000 // 86_400, pa.int32()).cast(pa.date32()),
        },
        schema=SPEC.schema,
    )


def fill_syncs(args: argparse.Namespace, cfg: Path) -> dict[str, Any]:
    """``offset_syncs`` as a mirror that has run ``--sync-batches`` one-second batches until now leaves it
    (see the module docstring): coalesced up to each day's last coalescing batch, per batch after it."""
    import pyarrow as pa

    from drkit.config import load_config
    from drkit.layout import StateLayout
    from drkit.store import delta
    from drkit.store.offset_syncs import COMPACT_EVERY, SPEC, merge_rows

    layout = StateLayout(load_config(str(cfg)).state_root())
    started = time.monotonic()
    first_epoch = time.time() - args.sync_batches  # the last batch is written now
    days: dict[int, list[int]] = {}
    for b in range(args.sync_batches):
        days.setdefault(int((first_epoch + b) // 86_400), []).append(b)
    merged_rows = commits = 0
    for batches in days.values():
        coalesced_to = max((b for b in batches if b % COMPACT_EVERY == 0), default=None)
        if coalesced_to is not None:
            merged = None
            for lo in range(batches[0], coalesced_to + 1, 3_600):  # an hour at a time: merging is associative
                chunk = merge_rows(batch_rows(lo, min(lo + 3_599, coalesced_to), args.partitions, first_epoch))
                merged = chunk if merged is None else merge_rows(pa.concat_tables([merged, chunk]))
            assert merged is not None
            delta.write(layout.offset_syncs, SPEC, merged, app=(f"drkit-mirror-{STREAM}", coalesced_to))
            merged_rows += merged.num_rows
            commits += 1
        for b in (b for b in batches if coalesced_to is None or b > coalesced_to):
            delta.write(
                layout.offset_syncs,
                SPEC,
                batch_rows(b, b, args.partitions, first_epoch),
                app=(f"drkit-mirror-{STREAM}", b),
            )
            commits += 1
    from deltalake import DeltaTable

    table = DeltaTable(str(layout.offset_syncs))
    return {
        "seconds": round(time.monotonic() - started, 1),
        "rows": table.to_pyarrow_dataset().count_rows(),
        "rows_coalesced": merged_rows,
        "files": len(table.file_uris()),
        "commits": commits,
        "days": len(days),
        "written_from": datetime.fromtimestamp(first_epoch, UTC).isoformat(timespec="seconds"),
    }


def write_config(state: Path, base_port: int, max_age: float) -> Path:
    """The config of the flow A->B, ``checkpoint.max_age_seconds`` raised to ``max_age`` (so checkpoints written
    at set-up stay usable for the whole run: what is timed is the work, not a refusal)."""
    cfg = state / "drkit.toml"
    flow = {
        "replication_policy": "prefix",
        "topics": {"include": [TOPIC], "exclude": []},
        "groups": {"include": [".*"], "exclude": []},
        "checkpoint.max_age_seconds": max_age,
    }
    cfg.write_text(
        flow_config(str(state / "drkit-state"), f"127.0.0.1:{base_port}", f"127.0.0.1:{base_port + 10}", flow)
    )
    return cfg


def create_topics(bootstrap_a: str, bootstrap_b: str, partitions: int) -> float:
    """``orders`` on A and ``A.orders`` on B; the seconds taken."""
    started = time.monotonic()
    for bootstrap, topic in ((bootstrap_a, TOPIC), (bootstrap_b, TARGET)):
        create_topic(bootstrap, topic, partitions)
    return time.monotonic() - started


def group_name(g: int) -> str:
    return f"{GROUP_PREFIX}{g:04d}"


def downstream(upstream: int) -> int:
    """The synthetic mapping of scripts.bench.translate (a downstream gap every GAP_EVERY batches)."""
    return upstream + (upstream // RECORDS) // GAP_EVERY


def write_checkpoints(args: argparse.Namespace, cfg: Path) -> dict[str, Any]:
    """``--checkpoint-versions`` appends of every group-partition (the last one now) and the last-run file."""
    from drkit.config import load_config
    from drkit.core.checkpoints import Checkpoint
    from drkit.core.translate import Position
    from drkit.layout import StateLayout
    from drkit.store.checkpoints import CheckpointTable
    from drkit.store.runs import RunFiles, TranslatorRun

    config = load_config(str(cfg))
    layout = StateLayout(config.state_root())
    store = CheckpointTable(layout)
    rng = random.Random(args.seed)
    end = args.sync_batches * RECORDS  # upstream offsets 0..end-1 were mirrored on every partition
    versions = max(1, args.checkpoint_versions)
    now = datetime.now(UTC)
    started = time.monotonic()
    rows_written = 0
    for v in range(versions):
        at = now - timedelta(minutes=10 * (versions - 1 - v))
        rows = []
        for g in range(args.groups):
            for k in range(args.group_partitions):
                p = (g * args.group_partitions + k) % args.partitions
                # each version further on, as a consuming group moves
                c = min(end - 1, int(end * (0.5 + 0.5 * (v + rng.random()) / versions)))
                rows.append(Checkpoint(FLOW, group_name(g), TOPIC, TARGET, p, c, downstream(c), Position.MIRRORED))
        rows_written += store.append(rows, at=at)
    RunFiles(layout).write_last_run(
        FLOW, TranslatorRun(int(time.time() * 1000), 1.0, args.groups, args.groups * args.group_partitions, 0)
    )
    return {"rows": rows_written, "versions": versions, "seconds": round(time.monotonic() - started, 2)}
