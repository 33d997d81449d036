"""Clocks to give drkit (``Drkit(..., clock=...)``) instead of sleeping for the wall clock to move.

Ages, confirmations and the times of checkpoint rows then follow the test's steps exactly, however
long each step takes on the machine that runs it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class ManualClock:
    """A time that moves only when the test moves it; starts at a whole second of now, so ages are exact."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class ShiftedClock:
    """The wall clock plus the seconds the test added: always moving forward, and ``advance`` stands in for
    a sleep (two steps a test separates by ``advance(1)`` are at least a second apart)."""

    def __init__(self) -> None:
        self.shift = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.shift

    def advance(self, seconds: float) -> None:
        self.shift += timedelta(seconds=seconds)
