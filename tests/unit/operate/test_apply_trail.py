"""An apply's audit rows tell what happened, with in-memory clusters and audit trail: the intent before any
commit, the outcome after (applied, partial, interrupted, failed, refused), a rerun completing an
unfinished apply, and of two applies on one group only the first commits."""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path

import pytest
from support.fakes import NOW, World, world

from drkit.core.audit import OperationRecord, OperationStatus
from drkit.core.groups import Member
from drkit.core.lease import LEASE_SECONDS
from drkit.core.offsets import SyncRange
from drkit.errors import ClusterError, RefusedError
from drkit.operate import apply as apply_module
from drkit.operate.failover import FailoverRequest, failover

GROUPS = ["g1", "g2", "g3"]


@pytest.fixture
def w(tmp_path: Path) -> World:
    """Three groups, each at 40 on orders/0 (mirrored 0..99 -> 100..199): each moves to 140 on B."""
    w = world(tmp_path)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 100, 199))
    w.a.ends[("orders", 0)] = 100
    for g in GROUPS:
        w.checkpoints.add("A->B", g, "orders", "A.orders", 0, 40)
    return w


def apply(w: World, groups: list[str] = GROUPS) -> object:
    return failover(w.context, FailoverRequest(w.config.flow("A->B"), groups, apply=True), lambda plan: True)


def statuses(w: World) -> list[str | None]:
    return [r.status for r in w.operations.records]


def test_the_intent_is_written_before_the_first_commit(w: World) -> None:
    seen: list[list[str | None]] = []
    w.b.after_commit = lambda group: seen.append(statuses(w))
    apply(w)
    assert seen[0] == ["applying"]  # the intent, and nothing else, before the first group was committed
    assert statuses(w) == ["applying", "applied"]


def test_a_signal_mid_way_stops_between_batches_and_is_audited_with_what_committed(
    w: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apply_module, "COMMIT_BATCH_GROUPS", 1)
    w.b.after_commit = lambda group: signal.raise_signal(signal.SIGINT) if group == "g1" else None
    result = apply(w)
    assert result.status is OperationStatus.INTERRUPTED and result.signal == signal.SIGINT  # type: ignore[attr-defined]
    assert w.b.batches == [["g1"]]  # g2 and g3 never sent
    outcome = w.operations.records[-1]
    assert outcome.status == "interrupted"
    assert outcome.result["committed"] == {"g1": {"A.orders/0": 140}}
    assert outcome.result["not_committed"] == {
        "g2": {"A.orders/0": {"planned": 140, "held": None}},
        "g3": {"A.orders/0": {"planned": 140, "held": None}},
    }
    # The rerun commits only what is missing, and says which apply it completes.
    w.b.after_commit = None
    rerun = apply(w)
    assert rerun.status is OperationStatus.APPLIED and rerun.completes == outcome.id  # type: ignore[attr-defined]
    assert w.b.batches[1:] == [["g2"], ["g3"]]
    assert {g: w.b.offsets[g] for g in GROUPS} == {g: {("A.orders", 0): 140} for g in GROUPS}
    assert w.operations.records[-1].result["completes"] == outcome.id


def test_a_group_the_destination_refuses_makes_a_partial_apply(w: World) -> None:
    # A consumer joins g2 on B after the plan was made (the plan saw none): B refuses g2's commit.
    w.operations.after_append = lambda record: w.b.members.__setitem__("g2", (Member("m-1", "c-1", "host"),))
    result = apply(w)
    assert result.status is OperationStatus.PARTIAL
    outcome = w.operations.records[-1]
    assert outcome.result["committed"] == {"g1": {"A.orders/0": 140}, "g3": {"A.orders/0": 140}}
    assert list(outcome.result["not_committed"]) == ["g2"] and "g2" in outcome.result["errors"]
    assert "active" in outcome.result["error"]


def test_an_unreachable_destination_mid_apply_is_audited_as_failed(w: World) -> None:
    w.operations.after_append = lambda record: setattr(w.b, "reachable", False)
    with pytest.raises(ClusterError):
        apply(w)
    assert statuses(w) == ["applying", "failed"]
    assert "unreachable" in w.operations.records[-1].result["error"]


def test_of_two_applies_on_one_group_the_second_intent_is_refused(w: World) -> None:
    refused: list[str] = []

    def second(record: OperationRecord) -> None:  # another process writes its intent right after the first
        try:
            apply(w, ["g2"])
        except RefusedError as exc:
            refused.append(str(exc))

    w.operations.after_append = second
    result = apply(w)
    assert result.status is OperationStatus.APPLIED  # type: ignore[attr-defined]
    [message] = refused
    first = w.operations.records[0].id
    assert message.startswith(f"group g2 is being moved by failover A->B (operation {first[:12]}")
    assert [r.status for r in w.operations.folded] == ["applied", "refused"]
    assert w.b.batches == [GROUPS]  # only the winner committed


def test_a_stale_intent_is_reported_and_does_not_block(w: World) -> None:
    apply(w, ["g1"])
    [intent, _] = w.operations.records
    w.operations.records[1:] = []  # as if the process had been killed after its intent
    old = NOW - timedelta(seconds=LEASE_SECONDS + 60)
    w.operations.records[0] = OperationRecord(**{**intent.__dict__, "id": "dead" * 8, "started_at": old})
    w.b.offsets.clear()
    result = apply(w)
    assert result.status is OperationStatus.APPLIED  # type: ignore[attr-defined]
    assert result.stale == (f"failover A->B (operation {'dead' * 3}, {intent.user}@{intent.host})",)  # type: ignore[attr-defined]
    assert result.completes == "dead" * 8  # type: ignore[attr-defined]


def test_offsets_moved_since_the_plan_refuse_the_apply_before_any_commit(w: World) -> None:
    w.operations.after_append = lambda record: w.b.offsets.__setitem__("g3", {("A.orders", 0): 170})
    with pytest.raises(RefusedError, match=r"changed since the plan was made, group g3 A.orders/0: - -> 170"):
        apply(w)
    assert w.b.batches == [] and statuses(w) == ["applying", "refused"]


def test_a_failback_apply_is_audited_with_its_intent_and_outcome(w: World) -> None:
    from drkit.operate.failback import FailbackRequest, failback

    for g in GROUPS:
        w.b.offsets[g] = {("A.orders", 0): 150}  # on B at 150: back to 50 on A
    result = failback(w.context, FailbackRequest(w.config.flow("A->B"), GROUPS, apply=True), lambda plan: True)
    assert result.status is OperationStatus.APPLIED
    intent, outcome = w.operations.records
    assert (intent.action, intent.status, outcome.status, intent.id) == ("failback", "applying", "applied", outcome.id)
    assert intent.result["commits"] == {g: {"orders/0": 50} for g in GROUPS}
