"""Waiting for a cluster of a running mirror: two log lines for an outage of any length, and a stop ends
the wait at once."""

from __future__ import annotations

import logging

import pytest

from drkit.config import ClusterConfig
from drkit.kafka.admin import KafkaAdmin
from drkit.mirror.outage import ClusterWatch, through_outages, wait_until_reachable


def test_an_outage_is_two_log_lines_whatever_its_length(caplog: pytest.LogCaptureFixture) -> None:
    answers = iter([False] * 40 + [True])
    probes: list[float] = []

    def reachable(timeout: float) -> bool:
        probes.append(timeout)
        return next(answers)

    watch = ClusterWatch("A->B", "target", "B")
    with caplog.at_level(logging.INFO, logger="drkit.mirror.outage"):
        watch.down("first seen by the observer")  # another thread noticed first: no second line
        assert wait_until_reachable(watch, reachable, lambda: False, "Local: Message timed out", sleep=lambda s: None)
    lines = [r.getMessage() for r in caplog.records]
    assert len(probes) == 41 and watch.down_since is None
    assert len(lines) == 2, lines
    assert lines[0].startswith("flow A->B: target B unreachable since ") and ", waiting (" in lines[0]
    assert lines[1].startswith("flow A->B: target B reachable again after ") and lines[1].endswith(", resuming")


def test_a_stop_ends_the_wait() -> None:
    stops = iter([False, False, True])
    watch = ClusterWatch("A->B", "source", "A")
    assert not wait_until_reachable(watch, lambda t: False, lambda: next(stops), "gone", sleep=lambda s: None)
    assert watch.down_since is not None  # still unreachable as far as anyone knows


class _Clusters:
    def reachable(self, alias: str, timeout: float) -> bool:
        return True


def test_a_batch_failed_while_both_clusters_answer_is_retried_on_renewed_admin_clients() -> None:
    """A long-lived admin client can stay stuck after its broker restarted while a fresh one answers (a CI
    run: "Failed while waiting for controller" for five minutes): a retry renews the flow's admins."""
    source = KafkaAdmin(ClusterConfig(bootstrap_servers="127.0.0.1:1"), "A")
    target = KafkaAdmin(ClusterConfig(bootstrap_servers="127.0.0.1:2"), "B")
    stale_source, stale_target = source.client, target.client
    watches = (ClusterWatch("A->B", "source", "A", (source,)), ClusterWatch("A->B", "target", "B", (target,)))
    failed = (
        "cluster A: cannot describe topic t: KafkaError{code=_TIMED_OUT,val=-185,"
        'str="Failed while waiting for controller: Local: Timed out"}'
    )
    attempts = iter([RuntimeError(failed)])

    def attempt() -> str:
        for failure in attempts:
            raise failure
        return "copied"

    assert through_outages("A->B", 3, attempt, False, _Clusters(), watches, lambda: False) == "copied"
    assert source.client is not stale_source and target.client is not stale_target
