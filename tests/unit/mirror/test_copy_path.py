"""Which batches the driver copies itself: after a small one; never the first of a run; never when off."""

from __future__ import annotations

from drkit.config import MirrorSettings
from drkit.mirror.job import copy_in_driver


def test_the_first_batch_of_a_run_goes_to_tasks_it_may_be_a_backlog() -> None:
    assert not copy_in_driver(None, 20_000)


def test_after_a_small_batch_the_driver_copies_after_a_large_one_tasks() -> None:
    assert copy_in_driver(0, 20_000) and copy_in_driver(20_000, 20_000)
    assert not copy_in_driver(20_001, 20_000)


def test_zero_turns_the_driver_copy_off() -> None:
    assert not copy_in_driver(0, 0) and not copy_in_driver(10, 0)


def test_the_default_limit_is_a_steady_state_batch() -> None:
    assert MirrorSettings().driver_copy_max_records == 20_000
