"""``drkit verify``: read a range of a source topic's records and their copies where the offset-syncs place them,
and let drkit.core.verify account for every record. Never writes: no commit, no record, no table row.

The range per partition is ``[from, from + max_records)`` cut to the records the source holds now (its log
start and its end), or, without ``from``, the last ``max_records`` records. The target's records are read over
the syncs' target offsets for those records, with their origin headers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from drkit.config import ClusterConfig, FlowConfig
from drkit.core.probe import SourceRecord
from drkit.core.verify import PartitionEvidence, VerifyReport, judge_partition, target_span
from drkit.errors import ConfigError, RefusedError
from drkit.kafka import probe_reads
from drkit.operate.context import OperateContext

Key = tuple[str, int]
ReadRecords = Callable[
    [ClusterConfig, str, Mapping[Key, tuple[int, int]], float, str | None], dict[Key, list[SourceRecord]]
]
#: How long reading one side's records may take.
READ_SECONDS = 120.0


@dataclass(frozen=True)
class VerifyRequest:
    flow: FlowConfig
    topic: str
    partitions: tuple[int, ...] = ()  # none: every partition
    from_offset: int | None = None
    max_records: int = 10_000  # per partition


def verify_topic(
    ctx: OperateContext, request: VerifyRequest, read_records: ReadRecords = probe_reads.read_source
) -> VerifyReport:
    flow, topic = request.flow, request.topic
    if request.max_records < 1:
        raise ConfigError(f"--max-records must be at least 1, not {request.max_records}")
    if request.from_offset is not None and request.from_offset < 0:
        raise ConfigError(f"--from-offset must be 0 or more, not {request.from_offset}")
    copies = ctx.syncs.target_topics(flow.name)
    if topic not in copies:
        raise RefusedError(
            f"flow {flow.name} has mirrored no topic {topic!r} (its offset-syncs name none): nothing to verify; "
            f"mirrored: {', '.join(sorted(copies)) or 'none'}"
        )
    copy = copies[topic]
    source = ctx.clusters.admin(flow.source)
    counts = source.partition_counts()
    if topic not in counts:
        raise RefusedError(f"cluster {flow.source} has no topic {topic!r} now: nothing to verify")
    partitions = request.partitions or tuple(range(counts[topic]))
    unknown = [p for p in partitions if not 0 <= p < counts[topic]]
    if unknown:
        raise ConfigError(f"topic {topic!r} on {flow.source} has partitions 0-{counts[topic] - 1}, not {unknown[0]}")
    keys = [(topic, p) for p in partitions]
    ends = source.end_offsets({topic: counts[topic]})
    starts = source.start_offsets(keys)
    ranges: dict[Key, tuple[int, int]] = {}
    for key in keys:
        first = starts.get(key, 0)
        wanted = ends[key] - request.max_records if request.from_offset is None else request.from_offset
        lo = max(first, wanted)
        ranges[key] = (lo, max(lo, min(ends[key], lo + request.max_records)))
    syncs = ctx.syncs.ranges(flow.name, [topic])
    progress = ctx.syncs.progress(flow.name)
    spans = {
        (copy, p): span
        for (t, p), (lo, hi) in ranges.items()
        if (span := target_span(syncs.get((t, p), []), lo, hi)) is not None
    }
    source_records = read_records(ctx.config.clusters[flow.source], flow.source, ranges, READ_SECONDS, None)
    target_records = read_records(ctx.config.clusters[flow.target], flow.target, spans, READ_SECONDS, flow.source)
    out = []
    for key in keys:
        lo, hi = ranges[key]
        synced = progress.get(key)
        evidence = PartitionEvidence(
            topic,
            copy,
            key[1],
            lo,
            hi,
            tuple(source_records.get(key, [])),
            tuple(r for r in syncs.get(key, []) if r.upstream_last >= lo and r.upstream_first < hi),
            0 if synced is None else synced.next_upstream,
            tuple(target_records.get((copy, key[1]), [])),
        )
        out.append(judge_partition(evidence))
    return VerifyReport(flow.name, topic, copy, tuple(out))
