"""Failover with ``follow_commits``: the shadow group's live checkpoint where it is newer than the table's row,
the row where it is not or where there is no shadow group, and the table alone ``--as-of`` a past time."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from support.fakes import NOW, NOW_MS, World, two_cluster_config, world

from drkit.core.checkpoints import Checkpoint
from drkit.core.live_checkpoints import LiveCheckpoint, encode_metadata, shadow_group
from drkit.core.offsets import SyncRange
from drkit.core.translate import Position
from drkit.operate.failover import FailoverRequest, failover

FLOW = "A->B"


def followed(tmp_path: Path, follow: bool = True) -> World:
    extra = {"flows": [{"source": "A", "target": "B", "checkpoint": {"follow_commits": follow}}]}
    w = world(tmp_path, two_cluster_config(tmp_path, **extra))
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.a.ends.update({("orders", 0): 100})
    w.checkpoints.add(FLOW, "billing", "orders", "A.orders", 0, 40, at_ms=NOW_MS - 10_000)
    return w


def live(w: World, upstream: int, ts: int) -> None:
    name = shadow_group(FLOW, "billing")
    c = LiveCheckpoint(Checkpoint(FLOW, "billing", "orders", "A.orders", 0, upstream, upstream, Position.MIRRORED), ts)
    w.b.offsets[name] = {("A.orders", 0): upstream}
    w.b.metadata[name] = {("A.orders", 0): encode_metadata(c)}


def planned(w: World, **kw: object) -> dict[str, dict[tuple[str, int], int]]:
    request = FailoverRequest(**{"flow": w.config.flow(FLOW), "groups": ["billing"], **kw})  # type: ignore[arg-type]
    return failover(w.context, request).plan.commits()


def test_a_newer_live_checkpoint_wins(tmp_path: Path) -> None:
    w = followed(tmp_path)
    live(w, 57, NOW_MS - 500)
    assert planned(w) == {"billing": {("A.orders", 0): 57}}


def test_an_older_live_checkpoint_loses_and_none_at_all_is_no_error(tmp_path: Path) -> None:
    w = followed(tmp_path)
    assert planned(w) == {"billing": {("A.orders", 0): 40}}  # no shadow group: the row
    live(w, 30, NOW_MS - 20_000)
    assert planned(w) == {"billing": {("A.orders", 0): 40}}


def test_as_of_and_follow_off_read_the_table_alone(tmp_path: Path) -> None:
    w = followed(tmp_path)
    live(w, 57, NOW_MS - 500)
    assert planned(w, as_of=NOW - timedelta(seconds=1)) == {"billing": {("A.orders", 0): 40}}
    off = followed(tmp_path / "off", follow=False)
    live(off, 57, NOW_MS - 500)
    assert planned(off) == {"billing": {("A.orders", 0): 40}}
