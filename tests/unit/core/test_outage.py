"""What a continuous mirror does with a failed batch: wait for a cluster that does not answer, retry a lost
connection a few times, stop on anything else; a one-shot run never waits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.outage import (
    BACKOFF_CEILING_SECONDS,
    QUICK_RETRIES,
    FailedBatch,
    OutageAction,
    backoff_seconds,
    outage_action,
)


def failed(
    once: bool = False, source: bool = True, target: bool = True, outage: bool = True, quick: int = 0
) -> FailedBatch:
    return FailedBatch(once, source, target, outage, quick)


def test_a_cluster_that_does_not_answer_is_waited_for_source_first() -> None:
    assert outage_action(failed(source=False)) is OutageAction.WAIT_FOR_SOURCE
    assert outage_action(failed(source=False, target=False)) is OutageAction.WAIT_FOR_SOURCE
    assert outage_action(failed(target=False)) is OutageAction.WAIT_FOR_TARGET
    # Whatever the error says: a refusal while the target is gone is the target's outage.
    assert outage_action(failed(target=False, outage=False)) is OutageAction.WAIT_FOR_TARGET


def test_a_one_shot_run_never_waits() -> None:
    assert outage_action(failed(once=True, source=False)) is OutageAction.FAIL
    assert outage_action(failed(once=True, target=False)) is OutageAction.FAIL


def test_with_both_clusters_answering_a_lost_connection_is_retried_a_few_times_then_it_stops() -> None:
    assert [outage_action(failed(quick=n)) for n in range(QUICK_RETRIES + 1)] == [
        OutageAction.RETRY
    ] * QUICK_RETRIES + [OutageAction.FAIL]
    assert outage_action(failed(outage=False)) is OutageAction.FAIL  # a refusal: the mirror's own failure


@given(st.integers(min_value=0, max_value=10_000))
def test_backoff_grows_and_is_bounded(attempt: int) -> None:
    assert 0 < backoff_seconds(attempt) <= BACKOFF_CEILING_SECONDS
    assert backoff_seconds(attempt) <= backoff_seconds(attempt + 1)
