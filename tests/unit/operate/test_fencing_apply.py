"""Fencing wired into failover and failback, on fakes: a dry run shows the ACL changes and makes none; an apply
makes them before its commits and records them; failback lifts exactly what failover added; a source without an
authorizer is one line with nothing written; a source that does not answer is not fenced, and the result says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fakes import World
from support.fenced_world import fenced_world

from drkit.core.audit import OperationStatus
from drkit.core.fencing import FENCING_KEY, denial
from drkit.errors import ClusterError
from drkit.operate.failback import FailbackRequest, failback
from drkit.operate.failover import FailoverRequest, failover

FLOW = "A->B"


def fenced(tmp_path: Path, read_only: bool = False, producers: tuple[str, ...] = ("User:app",)) -> World:
    return fenced_world(tmp_path, read_only, producers)


def over(w: World, apply: bool = True) -> OperationStatus:
    request = FailoverRequest(w.config.flow(FLOW), ["billing"], apply=apply)
    return failover(w.context, request, lambda plan: True).status


def back(w: World) -> OperationStatus:
    return failback(w.context, FailbackRequest(w.config.flow(FLOW), ["billing"], apply=True), lambda plan: True).status


def test_a_dry_run_shows_the_changes_and_makes_none(tmp_path: Path) -> None:
    w = fenced(tmp_path)
    result = failover(w.context, FailoverRequest(w.config.flow(FLOW), ["billing"]))
    assert result.fencing is not None and [c.add for c in result.fencing.changes] == [(denial("orders", "User:app"),)]
    assert result.as_dict()[FENCING_KEY]["changes"][0]["cluster"] == "A"
    assert w.a.acls == set() and FENCING_KEY not in w.operations.records[-1].result


def test_failover_fences_the_source_and_failback_lifts_exactly_that(tmp_path: Path) -> None:
    w = fenced(tmp_path)
    own = denial("audit", "User:app")  # the operator's: never drkit's to lift
    w.a.acls = {own}
    assert over(w) is OperationStatus.APPLIED
    assert w.a.acls == {own, denial("orders", "User:app")}
    [made] = w.operations.records[-1].result[FENCING_KEY]["applied"]
    assert made["cluster"] == "A" and [a["name"] for a in made["add"]] == ["orders"]
    assert back(w) is OperationStatus.APPLIED
    assert w.a.acls == {own}


def test_read_only_copies_are_lifted_at_failover_and_put_back_at_failback(tmp_path: Path) -> None:
    w = fenced(tmp_path, read_only=True)
    assert over(w) is OperationStatus.APPLIED and w.b.acls == set()  # nothing of drkit's there yet
    assert back(w) is OperationStatus.APPLIED
    assert w.b.acls == {denial("A.orders", "User:app")} and w.a.acls == set()
    assert over(w) is OperationStatus.APPLIED
    assert w.b.acls == set() and w.a.acls == {denial("orders", "User:app")}


def test_a_source_without_an_authorizer_is_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    w = fenced(tmp_path)
    w.a.acls = None
    with pytest.raises(ClusterError, match="cluster A has no authorizer"):
        over(w)
    assert w.operations.records == [] and w.b.commits == []


def test_a_source_that_does_not_answer_is_not_fenced_and_the_failover_goes_on(tmp_path: Path) -> None:
    w = fenced(tmp_path)
    w.a.reachable = False
    request = FailoverRequest(w.config.flow(FLOW), ["billing"], apply=True)
    result = failover(w.context, request, lambda plan: True)
    assert result.status is OperationStatus.APPLIED and w.b.commits
    assert result.fencing is not None and result.fencing.changes == ()
    assert result.fencing.warnings[0].startswith("A not fenced: it does not answer")
