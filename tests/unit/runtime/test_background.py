"""A background question hands back its answer or its error, and never holds its caller."""

from __future__ import annotations

import threading

import pytest

from drkit.runtime.background import started


def test_the_answer_and_the_error_come_back_from_result() -> None:
    assert started(lambda a, b: a + b, 2, b=3).result(timeout=5) == 5

    def fails() -> None:
        raise ValueError("cluster A did not answer")

    with pytest.raises(ValueError, match="did not answer"):
        started(fails).result(timeout=5)


def test_a_question_still_waiting_is_a_daemon_thread_the_process_does_not_wait_for() -> None:
    release = threading.Event()
    future = started(release.wait, 30)
    waiting = [t for t in threading.enumerate() if t.name == "drkit-wait"]
    assert waiting and all(t.daemon for t in waiting)
    assert not future.done()
    release.set()
    assert future.result(timeout=5) is True
