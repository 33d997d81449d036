"""Running a drill again and again (``--every``): one drill function, called until stopped.

Invariant: runs never overlap and start ``every`` seconds apart, start to start (drkit.core.schedule); a
SIGINT or SIGTERM only asks the loop to stop, so it ends between runs, after the run under way has finished
and landed in the ``drills`` table. The first run's error ends the loop (a bad spec, a flow that cannot be
drilled: one line, as without ``--every``); a later run's error is reported and the schedule goes on (a
cluster gone for a while), and the drills' metrics stop moving meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from drkit.core.schedule import next_delay
from drkit.errors import DrkitError
from drkit.runtime.signals import stop_on_signals

R = TypeVar("R")


def repeat(
    run_once: Callable[[], R],
    every: float,
    on_report: Callable[[R], None] | None = None,
    on_error: Callable[[DrkitError], None] | None = None,
    stop: threading.Event | None = None,
    max_runs: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> R | None:
    """``run_once()`` every ``every`` seconds until SIGINT/SIGTERM (or ``stop``, or ``max_runs``), each result
    handed to ``on_report``, each later error to ``on_error``. Returns the last result (None: none)."""
    stopped = stop or threading.Event()
    last: R | None = None
    runs = 0
    with stop_on_signals(stopped):
        while not stopped.is_set() and (max_runs is None or runs < max_runs):
            runs += 1
            started = clock()
            try:
                report = run_once()
            except DrkitError as exc:
                if runs == 1:
                    raise
                if on_error is not None:
                    on_error(exc)
            else:
                last = report
                if on_report is not None:
                    on_report(report)
            if max_runs is None or runs < max_runs:
                stopped.wait(next_delay(started, clock(), every))
    return last
