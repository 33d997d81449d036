"""Repeating a drill: the ``--every`` duration and when the next run starts.

Invariant: runs start ``every`` seconds apart, start to start; a run that took longer than ``every`` is
followed at once (never two at a time, never a burst to catch up). A duration is a positive number with a
unit (``s``, ``m``, ``h``, ``d``) between :data:`MIN_EVERY_SECONDS` and :data:`MAX_EVERY_SECONDS`.
"""

from __future__ import annotations

import re

#: A drill starts clusters' consumers and producers and a failover: more often than this is a typo of units.
MIN_EVERY_SECONDS = 10.0
#: Less often than weekly is a job for cron (runbooks/drill.md), not a process waiting for a week.
MAX_EVERY_SECONDS = 7 * 86_400.0

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def parse_every(text: str) -> float:
    """Seconds of a duration such as ``90s``, ``15m``, ``1h``, ``1d``; ValueError saying what is accepted."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None:
        raise ValueError(f"{text!r} is no duration: write a number and a unit, e.g. 30m, 6h, 1d (units s, m, h, d)")
    seconds = float(found[1]) * _UNITS[found[2]]
    if not MIN_EVERY_SECONDS <= seconds <= MAX_EVERY_SECONDS:
        raise ValueError(
            f"{text!r} must be from {MIN_EVERY_SECONDS:g} s to {MAX_EVERY_SECONDS / 86_400:g} days "
            "(run less often than weekly from cron: runbooks/drill.md)"
        )
    return seconds


def next_delay(started: float, finished: float, every: float) -> float:
    """Seconds to wait after a run that started at ``started`` and finished at ``finished`` (monotonic)."""
    return max(0.0, started + every - finished)
