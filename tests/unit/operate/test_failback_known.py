"""Failback through the operation, with in-memory clusters: what the group processed on the origin is not re-read.

The facts failback gathers: the group's offsets on the cluster being left, its last checkpoint of the
forward flow, the offsets it still holds on the origin. Every path of the rule in drkit.core.plan.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fakes import NOW_MS, World, world

from drkit.core.audit import OperationStatus
from drkit.core.checkpoints import Checkpoint
from drkit.core.offsets import SyncRange
from drkit.core.origin import TailRecord
from drkit.core.refusals import RefusalReason
from drkit.core.resume import Basis
from drkit.core.translate import Position
from drkit.operate.failback import FailbackRequest, failback


@pytest.fixture
def w(tmp_path: Path) -> World:
    """orders/0 and orders/1: A's 0..999 mirrored to B's A.orders 0..999; A had reached 1100 on both.

    billing committed 1100 on orders/0 (checkpointed: ahead of the mirror) and 600 on orders/1, failed
    over (B: 1000 and 600) and finished there; A came back with its offsets.
    """
    w = world(tmp_path)
    for p in (0, 1):
        w.syncs.add("A->B", "orders", "A.orders", p, SyncRange(0, 999, 0, 999))
        w.a.ends[("orders", p)] = 1100
    w.checkpoints.record(Checkpoint("A->B", "billing", "orders", "A.orders", 0, 1100, 1000, Position.PAST_END))
    w.checkpoints.record(Checkpoint("A->B", "billing", "orders", "A.orders", 1, 600, 600, Position.MIRRORED))
    w.a.offsets["billing"] = {("orders", 0): 1100, ("orders", 1): 600}
    w.b.offsets["billing"] = {("A.orders", 0): 1000, ("A.orders", 1): 600}
    return w


def back(w: World, **kw: object) -> FailbackRequest:
    return FailbackRequest(**{"flow": w.config.flow("A->B"), "groups": ["billing"], "apply": True, **kw})  # type: ignore[arg-type]


def test_the_issue_case_resumes_where_the_group_was_on_the_origin(w: World) -> None:
    result = failback(w.context, back(w))
    assert result.status is OperationStatus.APPLIED and result.plan.warnings == ()
    # not 1000: nothing re-read; the origin holds these already, so nothing needed committing
    assert w.a.offsets["billing"] == {("orders", 0): 1100, ("orders", 1): 600} and w.a.commits == []
    assert result.verified == {"billing": {"orders/0": 1100, "orders/1": 600}}
    move = result.plan.moves[0]
    assert (move.position, move.basis, move.known) == (Position.PAST_END, Basis.ORIGIN_OFFSET, 1100)


def test_the_offset_held_on_the_origin_wins_over_an_older_checkpoint(w: World) -> None:
    w.a.offsets["billing"][("orders", 0)] = 1090  # committed on A after the last checkpoint ... of 1050
    w.checkpoints.record(
        Checkpoint("A->B", "billing", "orders", "A.orders", 0, 1050, 1000, Position.PAST_END), at_ms=NOW_MS - 500
    )
    result = failback(w.context, back(w))
    assert result.plan.commits()["billing"][("orders", 0)] == 1090
    assert result.plan.moves[0].basis is Basis.ORIGIN_OFFSET


def test_the_checkpoint_speaks_when_the_origin_lost_the_groups_offsets(w: World) -> None:
    w.a.offsets.pop("billing")  # e.g. A rebuilt: its __consumer_offsets are gone
    result = failback(w.context, back(w))
    assert result.status is OperationStatus.APPLIED and result.plan.warnings == ()
    assert w.a.commits == [("billing", {("orders", 0): 1100, ("orders", 1): 600})]
    assert [m.basis for m in result.plan.moves] == [Basis.CHECKPOINT, Basis.TRANSLATION]


def test_progress_on_b_is_kept(w: World) -> None:
    w.b.offsets["billing"][("A.orders", 1)] = 900
    result = failback(w.context, back(w))
    assert result.plan.commits()["billing"][("orders", 1)] == 900 and result.plan.warnings == ()
    assert result.plan.moves[1].basis is Basis.TRANSLATION


def test_a_group_set_back_on_b_is_followed_with_a_warning(w: World) -> None:
    w.b.offsets["billing"][("A.orders", 0)] = 700  # reset offsets on B before what it had processed on A
    result = failback(w.context, back(w))
    assert result.status is OperationStatus.APPLIED
    assert w.a.commits == [("billing", {("orders", 0): 700})]  # only what differs: orders/1 holds 600 already
    assert result.plan.warnings == (
        "group billing orders/0: moves back to 700, before offset 1100 (the offset it holds there) up to which "
        "it had processed on A: its offset on B (A.orders/0 700) was set back before that point "
        "(400 offsets will be read again)",
    )


def test_a_dry_run_changes_nothing_and_shows_the_basis(w: World) -> None:
    result = failback(w.context, back(w, apply=False))
    assert result.status is OperationStatus.DRY_RUN and w.a.commits == []
    assert [m["basis"] for m in w.operations.records[0].plan["moves"]] == ["origin_offset", "translation"]


def test_a_partition_with_nothing_mirrored_resumes_where_the_group_was(w: World) -> None:
    # orders/2 was empty: nothing mirrored; the Java consumer committed 0 on B's empty copy.
    w.checkpoints.record(Checkpoint("A->B", "billing", "orders", "A.orders", 2, 0, 0, Position.NOTHING_TO_MIRROR))
    w.b.offsets["billing"][("A.orders", 2)] = 0
    result = failback(w.context, back(w))
    assert result.status is OperationStatus.APPLIED
    assert w.a.commits[0][1][("orders", 2)] == 0
    # Without anything known on A, the copy's offset cannot come back: refused as before.
    w.b.offsets["reports"] = {("A.orders", 2): 0}
    refused = failback(w.context, back(w, groups=["reports"]))
    assert [r.reason for r in refused.plan.refusals] == [RefusalReason.UNTRANSLATABLE]


def test_copies_read_past_the_synced_end_are_not_read_again_on_the_origin(tmp_path: Path) -> None:
    """The continuous copy put A's 1000..1029 on B (1000..1029) before a batch synced them; the source died,
    the group failed over and read them on B (committed 1030), and nothing else. Failing back resumes after
    them on A (1030), from their origin headers, not at the synced end (1000: 30 records read twice)."""
    w = world(tmp_path)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 999, 0, 999))
    w.b.offsets["billing"] = {("A.orders", 0): 1030}
    w.b.records[("A.orders", 0)] = [TailRecord(1000 + i, 1000 + i) for i in range(30)] + [TailRecord(1030, 1030)]
    result = failback(w.context, back(w))
    assert result.status is OperationStatus.APPLIED
    assert w.a.commits == [("billing", {("orders", 0): 1030})]
    assert w.b.tail_reads == [("A.orders", 0, 1000, 1030)]  # only below the group's offset
    assert result.plan.moves[0].position is Position.UNSYNCED


def test_a_group_inside_the_synced_range_reads_no_tail(w: World) -> None:
    failback(w.context, back(w))
    assert w.b.tail_reads == []
