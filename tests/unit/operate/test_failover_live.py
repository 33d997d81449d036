"""Failover with ``follow_commits``: the shadow group's live checkpoint where it is newer than the table's row,
the row where it is not or where there is no shadow group, and the table alone ``--as-of`` a past time."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

from support.fakes import NOW, NOW_MS, World, two_cluster_config, world

from drkit.core.checkpoints import Checkpoint, CommittedOffset
from drkit.core.live_checkpoints import LiveCheckpoint, encode_metadata, is_shadow, shadow_group
from drkit.core.offsets import SyncRange
from drkit.core.translate import Position
from drkit.errors import AccessDenied
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


def test_shadow_groups_the_operator_may_not_read_leave_the_rows_and_one_warning(tmp_path: Path) -> None:
    """A failover must not stop for its live checkpoints: refused, the rows stand (older: re-reads, no loss)
    and the plan says why and what to grant."""
    w = followed(tmp_path)
    live(w, 57, NOW_MS - 500)
    read = w.b.committed_offsets_many

    def refuse(groups: Iterable[str]) -> dict[str, list[CommittedOffset]]:
        names = list(groups)
        if any(is_shadow(g) for g in names):
            raise AccessDenied(f"cluster B: principal lacks DESCRIBE on group {names[0]} (GROUP_AUTHORIZATION_FAILED)")
        return read(names)

    w.b.committed_offsets_many = refuse  # type: ignore[method-assign]
    result = failover(w.context, FailoverRequest(w.config.flow(FLOW), ["billing"]))
    assert result.plan.ok and result.plan.commits() == {"billing": {("A.orders", 0): 40}}
    [warning] = [x for x in result.plan.warnings if "live checkpoints were not read" in x]
    assert "principal lacks DESCRIBE on group drkit.ckpt.A->B.billing" in warning, warning
    assert "grant DESCRIBE on the groups prefixed drkit.ckpt.A->B." in warning, warning
    w.b.committed_offsets_many = read  # type: ignore[method-assign]
    readable = failover(w.context, FailoverRequest(w.config.flow(FLOW), ["billing"]))
    assert readable.plan.commits() == {"billing": {("A.orders", 0): 57}}
    assert not [x for x in readable.plan.warnings if "live checkpoints" in x]
