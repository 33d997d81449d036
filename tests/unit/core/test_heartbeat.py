"""Heartbeats: their format, and latency and age read from the newest copy on the target."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.heartbeat import HeartbeatCopy, created_ms_of, encode, heartbeat_key, reading


@given(st.integers(min_value=0, max_value=2**53))
def test_a_heartbeat_value_gives_back_its_creation_time(created: int) -> None:
    assert created_ms_of(encode(created)) == created


def test_anything_else_is_not_a_heartbeat() -> None:
    for value in (None, b"", b"x", b"{}", b'{"created_ms": "1"}', b'{"created_ms": -1}', b"[1]"):
        assert created_ms_of(value) is None
    assert heartbeat_key("A", "B") == b"A->B"


def test_latency_and_age_come_from_the_newest_copy_and_are_unknown_without_one() -> None:
    assert reading(None, 10_000) == reading(None, 0)
    assert reading(None, 10_000).latency_seconds is None and reading(None, 10_000).age_seconds is None
    r = reading(HeartbeatCopy(created_ms=1_000, appended_ms=1_025), now_ms=4_000)
    assert r.latency_seconds == 0.025 and r.age_seconds == 3.0
    # A copy whose topic keeps create times tells its age, not its trip.
    assert reading(HeartbeatCopy(1_000, None), 2_000).latency_seconds is None


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_the_age_grows_with_the_clock_and_never_reads_better_than_the_truth(created: int, trip: int, wait: int) -> None:
    copy = HeartbeatCopy(created, created + trip)
    earlier, later = reading(copy, created + trip), reading(copy, created + trip + wait)
    assert later.age_seconds is not None and earlier.age_seconds is not None
    assert later.age_seconds >= earlier.age_seconds
    assert later.age_seconds >= round(trip / 1000, 1) - 0.05  # at least the trip it took
