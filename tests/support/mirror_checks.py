"""Record-by-record checks of a mirror's result: the copy and its offset-syncs."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drkit.config import DrkitConfig
from drkit.core.offsets import SyncRange
from drkit.layout import StateLayout
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable
from support.kafka_io import Rec


def partition_syncs(spark: Any, config: DrkitConfig, topic: str, flow: str = "A->B") -> dict[int, list[SyncRange]]:
    """The flow's offset-syncs of one source topic, by partition."""
    ranges = SyncTable(Drkit(config, spark).layout).ranges(flow, [topic])
    return {p: rs for (t, p), rs in ranges.items() if t == topic}


def committed_batches(config: DrkitConfig) -> list[str]:
    """The batches Spark committed for the config's first flow (its streaming checkpoint's ``commits``)."""
    commits = Path(StateLayout(config.state_root()).stream_checkpoint(config.flows[0].name) / "commits")
    return sorted(p.name for p in commits.iterdir() if not p.name.startswith(".")) if commits.exists() else []


def by_partition(records: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return dict(out)


def assert_exact_copy(source: list[Rec], target: list[Rec], source_alias: str = "A") -> None:
    """Same records, partition by partition, in the same order (contents, not offsets), each copy
    naming the source offset it copies in its origin header."""
    src, tgt = by_partition(source), by_partition(target)
    assert sorted(src) == sorted(tgt) or not source, f"partitions differ: {sorted(src)} vs {sorted(tgt)}"
    for p in src:
        a = [r.content() for r in src[p]]
        b = [r.content() for r in tgt.get(p, [])]
        assert len(a) == len(b), f"partition {p}: {len(a)} source records, {len(b)} target records"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert x == y, f"partition {p}, record #{i}: source {x!r} != target {y!r}"
        origins = [r.origin(source_alias) for r in tgt.get(p, [])]
        assert origins == [r.offset for r in src[p]], f"partition {p}: copies name other origins"


@dataclass
class SyncAudit:
    described: int  # target records described by a sync
    orphans: int  # target records no sync describes (re-delivered by a failed attempt)
    duplicates: int  # source records present more than once on the target


def audit_syncs(
    ranges: dict[int, list[SyncRange]],
    source: list[Rec],
    target: list[Rec],
    exact: bool = True,
    source_alias: str = "A",
) -> SyncAudit:
    """Check the syncs both ways, record by record.

    Every sync pair (u, d) points at an existing source record u and an existing target record d
    with the same content; every source record is described by exactly one pair (no loss);
    no target record is described twice. With ``exact``, every target record is described too.
    """
    src = {(r.partition, r.offset): r for r in source}
    tgt = {(r.partition, r.offset): r for r in target}
    up_seen: Counter[tuple[int, int]] = Counter()
    down_seen: Counter[tuple[int, int]] = Counter()
    for partition, rs in ranges.items():
        for rng in rs:
            for u, d in rng.pairs():
                assert (partition, u) in src, f"sync points at missing source record {partition}@{u}"
                assert (partition, d) in tgt, f"sync points at missing target record {partition}@{d}"
                assert src[(partition, u)].content() == tgt[(partition, d)].content(), (
                    f"sync {partition}: {u}->{d} pairs different records"
                )
                assert tgt[(partition, d)].origin(source_alias) == u, f"copy {partition}@{d} does not name {u}"
                up_seen[(partition, u)] += 1
                down_seen[(partition, d)] += 1
    assert all(n == 1 for n in up_seen.values()), "a source record is described by two syncs"
    assert all(n == 1 for n in down_seen.values()), "a target record is described by two syncs"
    missing = set(src) - set(up_seen)
    assert not missing, f"{len(missing)} source records have no sync, e.g. {sorted(missing)[:5]}"
    orphans = set(tgt) - set(down_seen)
    # A copy no sync describes (a failed attempt's) still names a source record it copies.
    for partition, d in orphans:
        origin = tgt[(partition, d)].origin(source_alias)
        assert (partition, origin) in src, f"unsynced copy {partition}@{d} names no source record ({origin})"
        assert src[(partition, origin)].content() == tgt[(partition, d)].content()
    if exact:
        assert not orphans, f"{len(orphans)} target records are not described by a sync, e.g. {sorted(orphans)[:5]}"
    content_counts = Counter(r.content() for r in target)
    duplicates = sum(n - 1 for n in content_counts.values() if n > 1)
    return SyncAudit(described=len(down_seen), orphans=len(orphans), duplicates=duplicates)
