"""``--every``: durations with a unit within bounds, and runs start to start, never overlapping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.schedule import MAX_EVERY_SECONDS, MIN_EVERY_SECONDS, next_delay, parse_every


@pytest.mark.parametrize(
    ("text", "seconds"), [("10s", 10), ("90s", 90), ("15m", 900), ("1.5h", 5400), ("1d", 86400), (" 6H ", 21600)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_every(text) == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("30", "no duration"),
        ("1w", "no duration"),
        ("-5m", "no duration"),
        ("m", "no duration"),
        ("1h30m", "no duration"),
        ("5s", "from 10 s to 7 days"),
        ("8d", "from 10 s to 7 days"),
        ("0m", "from 10 s to 7 days"),
    ],
)
def test_bad_durations_say_what_is_accepted(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_every(text)


@given(
    started=st.floats(0, 1e6),
    took=st.floats(0, 1e5),
    every=st.floats(MIN_EVERY_SECONDS, MAX_EVERY_SECONDS),
)
def test_runs_start_every_seconds_apart_or_at_once_after_a_long_one(started: float, took: float, every: float) -> None:
    finished = started + took
    delay = next_delay(started, finished, every)
    assert delay >= 0
    if took <= every:
        assert finished + delay == pytest.approx(started + every)
    else:
        assert delay == 0
