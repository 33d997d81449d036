"""stop_on_signals: SIGINT/SIGTERM set the stop event inside, the previous handlers come back after."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

import pytest

from drkit.runtime.signals import stop_on_signals


def test_a_signal_inside_sets_the_event_and_the_previous_handler_comes_back() -> None:
    seen: list[int] = []

    def previous(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)

    old = signal.signal(signal.SIGTERM, previous)
    try:
        stop = threading.Event()
        with stop_on_signals(stop):
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.wait(1.0)
        assert seen == [] and signal.getsignal(signal.SIGTERM) is previous
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, old)


def test_the_previous_handlers_come_back_when_the_body_fails() -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(RuntimeError), stop_on_signals(threading.Event()):
        assert signal.getsignal(signal.SIGINT) is not before
        raise RuntimeError("boom")
    assert signal.getsignal(signal.SIGINT) is before


def test_off_the_main_thread_nothing_is_installed() -> None:
    before = signal.getsignal(signal.SIGTERM)
    inside: list[object] = []

    def body() -> None:
        with stop_on_signals(threading.Event()):
            inside.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert inside == [before]
