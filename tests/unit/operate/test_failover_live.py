"""Failover with ``follow_commits``: the checkpoint topic's live checkpoint where it is newer than the table's
row, the row where it is not or where the group has no record, and the table alone ``--as-of`` a past time."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from support.fakes import NOW, NOW_MS, World, two_cluster_config, world

from drkit.core.checkpoints import Checkpoint
from drkit.core.live_checkpoints import LiveCheckpoint, encode_value
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
    c = LiveCheckpoint(Checkpoint(FLOW, "billing", "orders", "A.orders", 0, upstream, upstream, Position.MIRRORED), ts)
    w.b.live.setdefault(FLOW, {})["billing"] = encode_value([c])


def planned(w: World, **kw: object) -> dict[str, dict[tuple[str, int], int]]:
    request = FailoverRequest(**{"flow": w.config.flow(FLOW), "groups": ["billing"], **kw})  # type: ignore[arg-type]
    return failover(w.context, request).plan.commits()


def test_a_newer_live_checkpoint_wins(tmp_path: Path) -> None:
    w = followed(tmp_path)
    live(w, 57, NOW_MS - 500)
    assert planned(w) == {"billing": {("A.orders", 0): 57}}


def test_an_older_live_checkpoint_loses_and_none_at_all_is_no_error(tmp_path: Path) -> None:
    w = followed(tmp_path)
    assert planned(w) == {"billing": {("A.orders", 0): 40}}  # no record: the row
    live(w, 30, NOW_MS - 20_000)
    assert planned(w) == {"billing": {("A.orders", 0): 40}}


def test_as_of_and_follow_off_read_the_table_alone(tmp_path: Path) -> None:
    w = followed(tmp_path)
    live(w, 57, NOW_MS - 500)
    assert planned(w, as_of=NOW - timedelta(seconds=1)) == {"billing": {("A.orders", 0): 40}}
    off = followed(tmp_path / "off", follow=False)
    live(off, 57, NOW_MS - 500)
    assert planned(off) == {"billing": {("A.orders", 0): 40}}


def test_a_checkpoint_topic_the_operator_may_not_read_leaves_the_rows_and_one_warning(tmp_path: Path) -> None:
    """A failover must not stop for its live checkpoints: refused, the rows stand (older: re-reads, no loss)
    and the plan says why and what to grant."""
    w = followed(tmp_path)
    live(w, 57, NOW_MS - 500)
    read = w.b.live_checkpoint_values

    def refuse(flow: str) -> dict[str, bytes] | None:
        raise AccessDenied("cluster B: principal lacks READ on topic _drkit.checkpoints (TOPIC_AUTHORIZATION_FAILED)")

    w.b.live_checkpoint_values = refuse  # type: ignore[method-assign]
    result = failover(w.context, FailoverRequest(w.config.flow(FLOW), ["billing"]))
    assert result.plan.ok and result.plan.commits() == {"billing": {("A.orders", 0): 40}}
    [warning] = [x for x in result.plan.warnings if "live checkpoints were not read" in x]
    assert "principal lacks READ on topic _drkit.checkpoints" in warning, warning
    assert "grant READ and DESCRIBE on topic _drkit.checkpoints" in warning, warning
    w.b.live_checkpoint_values = read  # type: ignore[method-assign]
    readable = failover(w.context, FailoverRequest(w.config.flow(FLOW), ["billing"]))
    assert readable.plan.commits() == {"billing": {("A.orders", 0): 57}}
    assert not [x for x in readable.plan.warnings if "live checkpoints" in x]


def test_another_flows_records_and_groups_are_not_this_ones(tmp_path: Path) -> None:
    w = followed(tmp_path)
    c = LiveCheckpoint(Checkpoint("C->B", "billing", "orders", "A.orders", 0, 57, 57, Position.MIRRORED), NOW_MS)
    w.b.live["C->B"] = {"billing": encode_value([c])}
    other = LiveCheckpoint(Checkpoint(FLOW, "ledger", "orders", "A.orders", 0, 57, 57, Position.MIRRORED), NOW_MS)
    w.b.live[FLOW] = {"ledger": encode_value([other])}
    assert planned(w) == {"billing": {("A.orders", 0): 40}}
