"""Waiting on a condition with a deadline that fails loudly: no fixed sleep stands in for a condition.

A test that needs something to have happened polls for it with :func:`wait_until`; at the deadline the
test fails with the message of what did not happen, never passes on silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout: float, message: str, interval: float = 0.25) -> float:
    """Poll ``condition`` every ``interval`` seconds until it holds and return the seconds that took; past
    ``timeout`` seconds raise an AssertionError naming ``message`` (what was awaited)."""
    began = time.monotonic()
    while not condition():
        waited = time.monotonic() - began
        if waited > timeout:
            raise AssertionError(f"{message}: not within {timeout:g}s")
        time.sleep(interval)
    return time.monotonic() - began
