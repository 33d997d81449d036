"""``drkit status`` and ``drkit offsets``: what the mirror and translator have done, and how far behind.

Status works with the source gone (it says so): everything but the live lag comes from the
Delta tables and the state folder.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from drkit.checkpoint.job import read_last_run
from drkit.config import DrkitConfig, FlowConfig
from drkit.core.checkpoints import CommittedOffset, retranslate
from drkit.core.selection import topic_selector
from drkit.core.translate import SyncIndex
from drkit.errors import ClusterError
from drkit.kafka import clients, groups
from drkit.kafka.topics import end_offsets, first_timestamps, partition_counts
from drkit.runtime.process import pid_path, running
from drkit.store.checkpoints import CheckpointStore
from drkit.store.offset_syncs import OffsetSyncStore

if TYPE_CHECKING:
    from drkit.service import Drkit

PROBE_SECONDS = 5.0

#: Exit codes of ``drkit status`` for scripts and monitors (apart from the error codes 1-7).
VERDICT_CODES = {"healthy": 0, "lagging": 20, "stale": 21, "source unreachable": 22}


def process_running(config: DrkitConfig, flow: FlowConfig, kind: str) -> bool:
    return running(pid_path(config, flow, kind))


def _now_ms() -> float:
    return datetime.now(UTC).timestamp() * 1000


def _oldest_unmirrored(config: DrkitConfig, flow: FlowConfig, progress: dict[tuple[str, int], Any],
                       ends: dict[tuple[str, int], int] | None, limit: int = 200) -> dict[tuple[str, int], int]:
    """Timestamps of the first unmirrored record of lagging partitions (source reachable only)."""
    if ends is None:
        return {}
    positions = {}
    for key, end in ends.items():
        next_offset = progress.get(key, (-1, -1, None))[0] + 1
        if next_offset < end:
            positions[key] = next_offset
    if not positions:
        return {}
    consumer = clients.consumer(config.clusters[flow.source], flow.source, "_drkit-status",
                                **{"isolation.level": "read_committed", "enable.partition.eof": False})
    try:
        return first_timestamps(consumer, dict(sorted(positions.items())[:limit]), timeout=PROBE_SECONDS)
    finally:
        consumer.close()


def flow_status(service: Drkit, flow: FlowConfig) -> dict[str, Any]:
    config = service.config
    syncs = OffsetSyncStore(service.spark, service.tables)
    progress = syncs.progress(flow.name)
    ends: dict[tuple[str, int], int] | None = None
    try:
        admin = clients.admin(config.clusters[flow.source], flow.source, timeout_ms=int(PROBE_SECONDS * 1000))
        counts = partition_counts(admin, flow.source, timeout=PROBE_SECONDS)
        selector = topic_selector(flow.topics.include, flow.topics.exclude, flow.policy(), flow.target,
                                  frozenset(config.clusters))
        ends = end_offsets(admin, flow.source, {t: counts[t] for t in selector.select(counts)},
                           timeout=PROBE_SECONDS)
    except ClusterError:
        ends = None
    now = _now_ms()
    oldest = _oldest_unmirrored(config, flow, progress, ends)
    partitions = []
    for key in sorted(set(progress) | set(ends or {})):
        last, _, synced_ms = progress.get(key, (-1, -1, None))
        end = None if ends is None else ends.get(key)
        lag = None if end is None else max(0, end - (last + 1))
        since_sync = None if synced_ms is None else round((now - synced_ms) / 1000, 1)
        partitions.append({
            "topic": key[0], "partition": key[1], "mirrored_up_to": last + 1, "source_end": end,
            "lag_records": lag,
            # The age of the oldest record not mirrored yet (from its timestamp on the source).
            "lag_seconds": None if lag is None else (
                0.0 if lag == 0 else (round((now - oldest[key]) / 1000, 1) if key in oldest else None)),
            "seconds_since_last_sync": since_sync,
        })
    checkpoints = CheckpointStore(service.spark, service.tables).latest(flow.name)
    group_ages: dict[str, float] = {}
    for r in checkpoints:
        group_ages[r.checkpoint.group] = max(group_ages.get(r.checkpoint.group, 0.0), round(r.age_seconds, 1))
    last_run = read_last_run(config, flow)
    last_run_age = None if last_run is None else round((now - last_run["finished_at_ms"]) / 1000, 1)
    stale_after = flow.checkpoint.max_age_seconds
    if ends is None:
        verdict = "source unreachable"
    elif last_run_age is None or last_run_age > stale_after or not progress:
        verdict = "stale"
    elif any(p["lag_records"] for p in partitions):
        verdict = "lagging"
    else:
        verdict = "healthy"
    return {
        "flow": flow.name, "verdict": verdict, "source_reachable": ends is not None,
        "mirror_running": process_running(config, flow, "mirror"),
        "checkpoint_running": process_running(config, flow, "checkpoint"),
        "lag_records": None if ends is None else sum(p["lag_records"] or 0 for p in partitions),
        "heartbeat_latency_seconds": None,  # heartbeats come with a later issue
        "checkpoint_last_run_age_seconds": last_run_age,
        "checkpoint_last_run_seconds": None if last_run is None else round(last_run["seconds"], 3),
        "groups": [{"group": g, "checkpoint_age_seconds": a} for g, a in sorted(group_ages.items())],
        "partitions": partitions,
    }


def status(service: Drkit, flow: str | None) -> tuple[list[dict[str, Any]], str]:
    """Per flow status and the overall verdict (the worst of the flows)."""
    flows = [flow_status(service, f) for f in service.config.flows_named(flow)]
    order = ["healthy", "lagging", "stale", "source unreachable"]
    overall = max((f["verdict"] for f in flows), key=order.index, default="healthy")
    return flows, overall


def group_offsets(service: Drkit, flow_name: str, group: str, as_of: datetime | None = None,
                  version: int | None = None) -> list[dict[str, Any]]:
    """Per partition: source committed offset (live when reachable), checkpointed offset, the
    translation with the syncs as they are now, the target group's offset, the checkpoint age."""
    config = service.config
    flow = config.flow(flow_name)
    recorded = CheckpointStore(service.spark, service.tables).latest(flow.name, [group], as_of=as_of,
                                                                     version=version)
    ranges = OffsetSyncStore(service.spark, service.tables).ranges(flow.name)
    live: dict[tuple[str, int], int] | None
    try:
        admin = clients.admin(config.clusters[flow.source], flow.source, timeout_ms=int(PROBE_SECONDS * 1000))
        offsets: list[CommittedOffset] = groups.committed_offsets(admin, flow.source, group)
        live = {(c.topic, c.partition): c.offset for c in offsets if c.offset >= 0}
    except ClusterError:
        live = None
    target_admin = clients.admin(config.clusters[flow.target], flow.target)
    on_target = groups.offsets_of(target_admin, flow.target, group)
    out = []
    for r in recorded:
        c = r.checkpoint
        now = retranslate(c, SyncIndex(ranges[(c.source_topic, c.partition)])
                          if (c.source_topic, c.partition) in ranges else None)
        out.append({
            "topic": c.source_topic, "partition": c.partition,
            "source_committed": None if live is None else live.get((c.source_topic, c.partition)),
            "checkpointed_offset": c.upstream_offset, "checkpointed_translation": c.downstream_offset,
            "target_topic": c.target_topic, "translated_now": now.downstream_offset, "position": now.position.value,
            "target_group_offset": on_target.get((c.target_topic, c.partition)),
            "checkpoint_age_seconds": round(r.age_seconds, 1),
        })
    return out
