"""``drkit fence`` on fakes: the copies made read-only before any failover (a dry run changes nothing, a second
apply changes nothing more, the next failover lifts exactly that); a source the failover could not fence is
fenced once it answers, and failback lifts it; no producers, or a cluster that does not answer: one line,
nothing written; a cluster refusing a change midway: the trail says what was made."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from support.fakes import World
from support.fenced_world import fenced_world

from drkit.core.acls import TopicAcl
from drkit.core.audit import Action, OperationStatus
from drkit.core.fencing import FENCING_KEY, FenceSide, denial
from drkit.errors import ClusterError, ConfigError
from drkit.operate.failback import FailbackRequest, failback
from drkit.operate.failover import FailoverRequest, failover
from drkit.operate.fence import fence_flow

FLOW = "A->B"
COPY_DENIED, SOURCE_DENIED = denial("A.orders", "User:app"), denial("orders", "User:app")


def fenced(tmp_path: Path, read_only: bool = True, producers: tuple[str, ...] = ("User:app",)) -> World:
    return fenced_world(tmp_path, read_only, producers)


def fence(w: World, apply: bool = True) -> tuple[FenceSide, OperationStatus, list[TopicAcl], list[TopicAcl]]:
    r = fence_flow(w.context, w.config.flow(FLOW), apply)
    return (
        r.producers_on,
        r.status,
        [a for c in r.plan.changes for a in c.add],
        [a for c in r.plan.changes for a in c.delete],
    )


def over(w: World) -> OperationStatus:
    request = FailoverRequest(w.config.flow(FLOW), ["billing"], apply=True)
    return failover(w.context, request, lambda plan: True).status


def back(w: World) -> OperationStatus:
    return failback(w.context, FailbackRequest(w.config.flow(FLOW), ["billing"], apply=True), lambda plan: True).status


def fence_rows(w: World) -> Iterable[str | None]:
    return [r.status for r in w.operations.records if r.action is Action.FENCE]


def test_the_copies_are_made_read_only_once_and_the_failover_lifts_exactly_that(tmp_path: Path) -> None:
    w = fenced(tmp_path)
    own = denial("A.audit", "User:app")  # the operator's own: never drkit's to lift
    w.b.acls = {own}
    assert fence(w, apply=False) == (FenceSide.SOURCE, OperationStatus.DRY_RUN, [COPY_DENIED], [])
    assert w.b.acls == {own} and w.a.acls == set()
    assert list(fence_rows(w)) == [OperationStatus.DRY_RUN.value]

    assert fence(w) == (FenceSide.SOURCE, OperationStatus.APPLIED, [COPY_DENIED], [])
    assert w.b.acls == {own, COPY_DENIED} and w.a.acls == set()
    # Each change is in the trail as soon as it is made (a kill midway leaves it there), and in the outcome row.
    *progress, outcome = [r for r in w.operations.records if r.action is Action.FENCE and not r.dry_run]
    assert {r.status for r in progress} == {OperationStatus.APPLYING.value} and outcome.status == "applied"
    for row in (progress[-1], outcome):
        [made] = row.result[FENCING_KEY]["applied"]
        assert (made["cluster"], [a["name"] for a in made["add"]]) == ("B", ["A.orders"])
    assert fence(w) == (FenceSide.SOURCE, OperationStatus.APPLIED, [], [])  # idempotent
    assert w.b.acls == {own, COPY_DENIED}

    assert over(w) is OperationStatus.APPLIED  # the producers move: the copies open, the source closes
    assert w.b.acls == {own} and w.a.acls == {SOURCE_DENIED}
    assert fence(w) == (FenceSide.TARGET, OperationStatus.APPLIED, [], [])  # after a failover: nothing more


def test_a_source_gone_at_the_failover_is_fenced_once_it_answers_and_failback_lifts_it(tmp_path: Path) -> None:
    w = fenced(tmp_path, read_only=False)
    w.a.reachable = False
    assert over(w) is OperationStatus.APPLIED and w.a.acls == set()
    with pytest.raises(ClusterError, match=r"^fence A->B: cluster A is unreachable"):
        fence(w)
    assert list(fence_rows(w)) == []
    w.a.reachable = True
    assert fence(w) == (FenceSide.TARGET, OperationStatus.APPLIED, [SOURCE_DENIED], [])
    assert w.a.acls == {SOURCE_DENIED}
    assert back(w) is OperationStatus.APPLIED and w.a.acls == set()  # drkit fence's denial is drkit's: lifted
    assert fence(w) == (FenceSide.SOURCE, OperationStatus.APPLIED, [], [])  # not read-only copies: nothing


def test_a_failover_that_committed_nothing_does_not_move_the_producers(tmp_path: Path) -> None:
    w = fenced(tmp_path)
    assert fence(w)[:2] == (FenceSide.SOURCE, OperationStatus.APPLIED)
    w.b.tamper = {("A.orders", 0): 1}  # the broker keeps something else: nothing reads back as planned
    assert over(w) is OperationStatus.FAILED
    assert fence(w, apply=False)[:3] == (FenceSide.SOURCE, OperationStatus.DRY_RUN, [COPY_DENIED])


def test_a_flow_without_producers_is_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    w = fenced(tmp_path, producers=())
    with pytest.raises(ConfigError, match=r"^fence A->B: the flow names no producers to fence") as raised:
        fence(w)
    assert "\n" not in str(raised.value) and w.operations.records == []


def test_a_change_refused_midway_leaves_a_failed_row_naming_what_was_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = fenced(tmp_path)

    def refuse(acls: Iterable[TopicAcl]) -> None:
        raise ClusterError("cluster B: CreateAcls refused: CLUSTER_AUTHORIZATION_FAILED")

    monkeypatch.setattr(w.b, "add_acls", refuse)
    with pytest.raises(ClusterError, match="CLUSTER_AUTHORIZATION_FAILED"):
        fence(w)
    last = w.operations.records[-1]
    assert last.action is Action.FENCE and last.status == OperationStatus.FAILED.value
    assert last.result[FENCING_KEY]["applied"] == [] and "CLUSTER_AUTHORIZATION_FAILED" in last.result["error"]
    assert w.b.acls == set()
    monkeypatch.undo()
    assert fence(w)[1:3] == (OperationStatus.APPLIED, [COPY_DENIED])
