"""Questions asked in the background while the caller goes on: the clusters of an operator command.

Each runs in a daemon thread, so a command that fails or ends first (a refusal, an unreadable table)
never waits for a probe of a cluster that is gone: it ends, and the probe with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def started(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
    """``fn(*args, **kwargs)`` running in a daemon thread; its result (or its error) from ``result()``."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the caller, which re-raises it from result()
            future.set_exception(exc)

    threading.Thread(target=run, name=f"drkit-{getattr(fn, '__name__', 'task')}", daemon=True).start()
    return future
