"""Record-by-record checks of a mirror's result: the copy and its offset-syncs."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drkit.config import DrkitConfig
from drkit.core.offsets import SyncRange
from drkit.layout import JobKind, StateLayout
from drkit.service import Drkit
from drkit.store.offset_syncs import SyncTable
from support.kafka_io import Rec


def partition_syncs(spark: Any, config: DrkitConfig, topic: str, flow: str = "A->B") -> dict[int, list[SyncRange]]:
    """The flow's offset-syncs of one source topic, by partition."""
    ranges = SyncTable(Drkit(config, spark).layout).ranges(flow, [topic])
    return {p: rs for (t, p), rs in ranges.items() if t == topic}


def latest_checkpoint(config: DrkitConfig, flow: str | None = None) -> Path:
    """The streaming checkpoint of the newest lease epoch of ``flow`` (default: the config's first), local."""
    layout = StateLayout(config.state_root())
    name = flow or config.flows[0].name
    folder = Path(layout.flow_dir(JobKind.MIRROR, name))
    epochs = (
        [e for p in folder.iterdir() if (e := layout.checkpoint_epoch(p.name)) is not None] if folder.exists() else []
    )
    return Path(layout.stream_checkpoint(name, max(epochs, default=0)))


def committed_batches(config: DrkitConfig) -> list[str]:
    """The batches Spark committed for the config's first flow (its newest streaming checkpoint's ``commits``)."""
    commits = latest_checkpoint(config) / "commits"
    return sorted(p.name for p in commits.iterdir() if not p.name.startswith(".")) if commits.exists() else []


def by_partition(records: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return dict(out)


def assert_exact_copy(source: list[Rec], target: list[Rec], source_alias: str = "A") -> None:
    """Each source record exactly once on the target and nothing else, partition by partition, in the same
    order: counted by identity (partition, source offset, contents) both ways, the target's source offset
    read from the origin header each copy carries. An empty source fails: a copy of nothing proves nothing."""
    assert source, "the source is empty: a copy of nothing proves nothing"
    want = Counter((r.partition, r.offset, r.content()) for r in source)
    got = Counter((r.partition, r.origin(source_alias), r.content()) for r in target)
    missing, extra = want - got, got - want
    assert not missing and not extra, (
        f"{sum(missing.values())} source records not on the target (e.g. {_examples(missing)}), "
        f"{sum(extra.values())} target records beyond one copy of each source record (e.g. {_examples(extra)})"
    )
    src, tgt = by_partition(source), by_partition(target)
    for p in src:
        origins = [r.origin(source_alias) for r in tgt[p]]
        assert origins == [r.offset for r in src[p]], f"partition {p}: the copies are not in the source's order"


def _examples(counts: Counter[tuple[int, int | None, tuple[object, ...]]]) -> list[str]:
    return [f"{p}@{offset} x{n}" for (p, offset, _), n in sorted(counts.items(), key=lambda kv: str(kv[0]))[:5]]


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
    An empty source fails: syncs of nothing prove nothing.
    """
    assert source, "the source is empty: syncs of nothing prove nothing"
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


def copies_by_origin(source: list[Rec], target: list[Rec], alias: str = "A") -> Counter[tuple[int, int]]:
    """How many copies of each source record (partition, offset) the target holds, counted one by one by
    the origin header each copy carries; a copy that names no source record, or differs from it, fails."""
    contents = {(r.partition, r.offset): r.content() for r in source}
    copies: Counter[tuple[int, int]] = Counter(dict.fromkeys(contents, 0))
    for r in target:
        origin = r.origin(alias)
        assert origin is not None and contents.get((r.partition, origin)) == r.content(), (
            f"target record {r.partition}@{r.offset} is no copy of a source record (origin {origin})"
        )
        copies[(r.partition, origin)] += 1
    return copies
