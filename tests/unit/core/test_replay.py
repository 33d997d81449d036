"""The batch Spark replays at a mirror's start: the newest logged batch, exactly one past the newest commit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.replay import replayed_batch


def test_the_newest_logged_batch_without_its_commit_is_replayed() -> None:
    assert replayed_batch([7, 8, 9], [7, 8]) == 9
    assert replayed_batch([0], []) == 0  # the first batch, planned and never committed


def test_nothing_is_replayed_when_every_logged_batch_is_committed_or_nothing_was_logged() -> None:
    assert replayed_batch([7, 8, 9], [7, 8, 9]) is None
    assert replayed_batch([], []) is None


def test_a_log_spark_would_not_replay_from_is_left_to_spark() -> None:
    assert replayed_batch([7, 8, 9], [7]) is None  # two batches without a commit: not Spark's replay
    assert replayed_batch([3], [5]) is None


@given(st.sets(st.integers(0, 30)), st.sets(st.integers(0, 30)))
def test_a_replayed_batch_is_logged_uncommitted_and_follows_every_commit(logged: set[int], committed: set[int]) -> None:
    replay = replayed_batch(logged, committed)
    if replay is not None:
        assert replay == max(logged) and replay not in committed and all(c < replay for c in committed)
        assert replay - 1 in committed or (replay == 0 and not committed)
