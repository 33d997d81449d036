"""``drkit verify``: read a range of a source topic's records and their copies where the offset-syncs place them,
and let drkit.core.verify account for every record. Never writes: no commit, no record, no table row.

The range per partition is ``[from, from + max_records)`` cut to the records the source holds now (its log
start and its end), or, without ``from``, the last ``max_records`` records; or, for a sample, windows spread over
the whole log (drkit.core.verify.sample_windows), read one window of each partition at a time. The target's
records are read over the syncs' target offsets for those records, with their origin headers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from drkit.config import ClusterConfig, FlowConfig
from drkit.core.offsets import SyncRange
from drkit.core.probe import SourceRecord
from drkit.core.verify import PartitionEvidence, VerifyReport, Window, judge_partition, sample_windows, target_span
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
    sample: int | None = None  # records per partition, in windows spread over its whole log
    window: int = 100  # a sample's consecutive offsets per window
    seed: int | None = None  # a sample's draw (None: a new one, reported)


def verify_topic(
    ctx: OperateContext, request: VerifyRequest, read_records: ReadRecords = probe_reads.read_source
) -> VerifyReport:
    flow, topic = request.flow, request.topic
    if request.max_records < 1:
        raise ConfigError(f"--max-records must be at least 1, not {request.max_records}")
    if request.from_offset is not None and request.from_offset < 0:
        raise ConfigError(f"--from-offset must be 0 or more, not {request.from_offset}")
    if request.sample is not None:
        if request.sample < 1 or request.window < 1:
            raise ConfigError(f"--sample and --window must be at least 1, not {request.sample} and {request.window}")
        if request.from_offset is not None:
            raise ConfigError("--sample spreads over the whole log: leave out --from-offset (or --sample)")
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
    seed = None if request.sample is None else request.seed
    if request.sample is not None and seed is None:
        seed = random.SystemRandom().randrange(2**31)
    windows: dict[Key, tuple[Window, ...]] = {}
    for key in keys:
        first = starts.get(key, 0)
        if request.sample is not None and seed is not None:
            windows[key] = sample_windows(first, ends[key], request.sample, request.window, seed)
            continue
        wanted = ends[key] - request.max_records if request.from_offset is None else request.from_offset
        lo = max(first, wanted)
        windows[key] = ((lo, max(lo, min(ends[key], lo + request.max_records))),)
    syncs = ctx.syncs.ranges(flow.name, [topic])
    progress = ctx.syncs.progress(flow.name)
    source_records: dict[Key, list[SourceRecord]] = {key: [] for key in keys}
    target_records: dict[Key, list[SourceRecord]] = {(copy, p): [] for _, p in keys}
    for i in range(max((len(w) for w in windows.values()), default=0)):
        ranges = {key: w[i] for key, w in windows.items() if i < len(w)}
        spans = {
            (copy, p): span
            for (t, p), (lo, hi) in ranges.items()
            if (span := target_span(syncs.get((t, p), []), lo, hi)) is not None
        }
        for key, read in read_records(
            ctx.config.clusters[flow.source], flow.source, ranges, READ_SECONDS, None
        ).items():
            source_records[key].extend(read)
        on_target = read_records(ctx.config.clusters[flow.target], flow.target, spans, READ_SECONDS, flow.source)
        for key, read in on_target.items():
            target_records[key].extend(read)
    out = []
    for key in keys:
        lo, hi = _bounds(windows[key], starts.get(key, 0))
        synced = progress.get(key)
        evidence = PartitionEvidence(
            topic,
            copy,
            key[1],
            lo,
            hi,
            tuple(source_records[key]),
            tuple(r for r in syncs.get(key, []) if _describes(r, windows[key])),
            0 if synced is None else synced.next_upstream,
            tuple(target_records[(copy, key[1])]),
            windows[key] if request.sample is not None else (),
        )
        out.append(judge_partition(evidence))
    return VerifyReport(flow.name, topic, copy, tuple(out), seed)


def _bounds(windows: tuple[Window, ...], first: int) -> Window:
    """The span of a partition's windows (an empty log's: its start)."""
    return (windows[0][0], windows[-1][1]) if windows else (first, first)


def _describes(r: SyncRange, windows: tuple[Window, ...]) -> bool:
    return any(r.upstream_last >= lo and r.upstream_first < hi for lo, hi in windows)
