"""A world of fakes (support.fakes) with one fencing flow A->B, for the fencing tests on fakes: ``orders`` mirrored
0..99 -> 0..99, group ``billing`` checkpointed at 40, both clusters with an authorizer and no ACL yet."""

from __future__ import annotations

from pathlib import Path

from drkit.core.offsets import SyncRange
from support.fakes import World, two_cluster_config, world

FLOW = "A->B"


def fenced_world(tmp_path: Path, read_only: bool, producers: tuple[str, ...] = ("User:app",)) -> World:
    flow = {"source": "A", "target": "B", "fencing": {"producers": list(producers), "read_only_copies": read_only}}
    w = world(tmp_path, two_cluster_config(tmp_path, flows=[flow]))
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.a.ends[("orders", 0)] = 100
    w.checkpoints.add(FLOW, "billing", "orders", "A.orders", 0, 40)
    w.a.acls, w.b.acls = set(), set()
    return w
