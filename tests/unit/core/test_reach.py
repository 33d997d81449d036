"""Which unreachable cluster stops which operator command, and the lines that say why (drkit.core.reach)."""

from __future__ import annotations

import itertools

import pytest

from drkit.core.reach import (
    Command,
    Reach,
    Unreachable,
    blocking,
    blocking_message,
    mirror_start_refusal,
    unreachable_lines,
)

UP_A, UP_B = Reach("A"), Reach("B")
DOWN_A = Reach("A", Unreachable.REFUSED, "127.0.0.1:19092", 2.0)
DOWN_B = Reach("B", Unreachable.NO_ANSWER, "127.0.0.1:19102", 2.0)


@pytest.mark.parametrize(
    ("command", "source", "target", "stops"),
    [
        # status does without either: an unreachable side is its verdict
        (Command.STATUS, DOWN_A, DOWN_B, ()),
        # offsets and failover need the target only; failover is for when the source is gone
        (Command.OFFSETS, DOWN_A, UP_B, ()),
        (Command.OFFSETS, UP_A, DOWN_B, ("B",)),
        (Command.FAILOVER, DOWN_A, UP_B, ()),
        (Command.FAILOVER, UP_A, DOWN_B, ("B",)),
        (Command.FAILOVER, DOWN_A, DOWN_B, ("B",)),
        # failback reads on the target and commits on the source: each, and both, are named
        (Command.FAILBACK, DOWN_A, UP_B, ("A",)),
        (Command.FAILBACK, UP_A, DOWN_B, ("B",)),
        (Command.FAILBACK, DOWN_A, DOWN_B, ("A", "B")),
        # the mirror does not start without either (a running one waits them out instead)
        (Command.MIRROR, DOWN_A, UP_B, ("A",)),
        (Command.MIRROR, UP_A, DOWN_B, ("B",)),
        (Command.MIRROR, DOWN_A, DOWN_B, ("A", "B")),
    ],
)
def test_which_cluster_stops_which_command(command: Command, source: Reach, target: Reach, stops: tuple[str]) -> None:
    assert tuple(r.alias for r in blocking(command, source, target)) == stops


@pytest.mark.parametrize("command", list(Command))
def test_nothing_stops_a_command_with_both_clusters_answering(command: Command) -> None:
    assert blocking(command, UP_A, UP_B) == ()


def test_every_command_goes_on_with_only_the_source_gone_except_failback() -> None:
    # The disaster drkit is for: only failback (which moves groups back to the source) needs it.
    going = {c for c in Command if not blocking(c, DOWN_A, UP_B)}
    assert going == {Command.STATUS, Command.OFFSETS, Command.FAILOVER}


def test_the_lines_name_the_cluster_and_how_it_failed_never_down_for_a_timeout() -> None:
    assert DOWN_A.message() == (
        "cluster A is unreachable: every bootstrap server refused the connection (127.0.0.1:19092)"
    )
    silent = DOWN_B.message()
    assert "did not answer within 2 s" in silent and "[clusters.B] probe_timeout_seconds" in silent
    failed = Reach("A", Unreachable.FAILED, "SSL handshake failed").message()
    assert failed == "cluster A is unreachable: SSL handshake failed"
    assert UP_A.message() == "" and UP_A.reachable and not DOWN_A.reachable


def test_the_blocking_line_names_every_cluster_in_one_line() -> None:
    line = blocking_message(Command.FAILBACK, "A->B", blocking(Command.FAILBACK, DOWN_A, DOWN_B))
    assert line.startswith("failback A->B: cluster A is unreachable") and "; cluster B is unreachable" in line
    assert "\n" not in line


def test_a_mirror_that_does_not_start_says_nothing_was_copied_and_fails_over_only_a_lost_source() -> None:
    source_gone = mirror_start_refusal("A->B", "A", (DOWN_A,))
    assert source_gone.startswith("mirror A->B: cluster A is unreachable: every bootstrap server refused")
    assert "nothing was copied: start the mirror again once it answers" in source_gone
    assert source_gone.endswith("if A is lost, fail the groups over: drkit failover --flow 'A->B'")
    target_gone = mirror_start_refusal("A->B", "A", (DOWN_B,))
    assert "cluster B is unreachable" in target_gone and "failover" not in target_gone
    both = mirror_start_refusal("A->B", "A", (DOWN_A, DOWN_B))
    assert "once they answer" in both and "\n" not in both


def test_unreachable_lines_keep_the_flow_order_and_skip_the_clusters_that_answered() -> None:
    reaches = {"A": DOWN_A, "B": DOWN_B, "C": Reach("C")}
    assert unreachable_lines(reaches, ["B", "A", "C", "B"]) == (DOWN_B.message(), DOWN_A.message())
    assert unreachable_lines(reaches, ["C"]) == ()


def test_as_dict_is_what_json_output_shows() -> None:
    d = DOWN_B.as_dict()
    assert (d["cluster"], d["reachable"], d["problem"], d["timeout_seconds"]) == ("B", False, "no answer", 2.0)
    assert d["message"] == DOWN_B.message()


@pytest.mark.parametrize(("source", "target"), list(itertools.product([UP_A, DOWN_A], [UP_B, DOWN_B])))
def test_a_command_is_stopped_only_by_clusters_that_are_down(source: Reach, target: Reach) -> None:
    for command in Command:
        assert all(not r.reachable for r in blocking(command, source, target))
