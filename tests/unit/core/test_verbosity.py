"""The logging decisions: which verbosity ``DRKIT_LOG`` names, what each shows on the terminal, which lines
librdkafka makes, one line per record, repeats held back and counted, and how the Spark JVM logs."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.verbosity import (
    LogPlan,
    RepeatGate,
    Verbosity,
    is_own_line,
    librdkafka_level,
    log_plan,
    one_line,
    parse_verbosity,
    spark_logging,
)


@pytest.mark.parametrize(
    ("text", "verbosity"),
    [
        (None, Verbosity.WARNING),
        ("", Verbosity.WARNING),
        ("  ", Verbosity.WARNING),
        ("warning", Verbosity.WARNING),
        ("INFO", Verbosity.INFO),
        (" Debug ", Verbosity.DEBUG),
        ("loud", None),
        ("warn", None),  # log4j's spelling is not Python's: named, not guessed
        ("10", None),
    ],
)
def test_drkit_log_names_a_verbosity_or_none(text: str | None, verbosity: Verbosity | None) -> None:
    assert parse_verbosity(text) is verbosity


def test_the_python_levels_are_loggings() -> None:
    from drkit.core import verbosity as v

    assert (v.DEBUG, v.INFO, v.WARNING, v.ERROR) == (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)


@pytest.mark.parametrize(
    ("python_level", "syslog"),
    [(logging.DEBUG, 7), (logging.INFO, 6), (logging.WARNING, 4), (logging.ERROR, 3), (logging.CRITICAL, 3)],
)
def test_librdkafka_makes_the_lines_at_the_python_level_and_up(python_level: int, syslog: int) -> None:
    """confluent-kafka maps syslog 0-2 to CRITICAL, 3 ERROR, 4 WARNING, 5-6 INFO, 7 DEBUG: the librdkafka level
    lets through every syslog level whose Python level is at or above the one asked for, and no other."""
    to_python = {0: 50, 1: 50, 2: 50, 3: 40, 4: 30, 5: 20, 6: 20, 7: 10}
    let_through = {s for s in to_python if s <= librdkafka_level(python_level)}
    assert let_through == {s for s, p in to_python.items() if p >= min(python_level, logging.ERROR)}
    assert librdkafka_level(python_level) == syslog


def test_the_default_shows_drkits_warnings_only_and_librdkafka_makes_warnings_and_up() -> None:
    plan = log_plan(Verbosity.WARNING)
    assert plan.own_level == logging.WARNING
    assert not plan.libraries_on_terminal
    assert plan.librdkafka_level == logging.WARNING and plan.librdkafka_property == "4"
    assert plan.libraries_level == logging.WARNING


def test_info_adds_drkits_progress_lines_and_nothing_of_the_libraries() -> None:
    plan = log_plan(Verbosity.INFO)
    assert plan.own_level == logging.INFO
    assert not plan.libraries_on_terminal and plan.librdkafka_property == "4"


def test_debug_shows_everything_librdkafkas_info_lines_included() -> None:
    plan = log_plan(Verbosity.DEBUG)
    assert plan.own_level == logging.DEBUG and plan.libraries_on_terminal
    assert plan.librdkafka_level == logging.INFO and plan.librdkafka_property == "6"


@pytest.mark.parametrize(
    ("logger", "own"),
    [
        ("drkit", True),
        ("drkit.mirror.job", True),
        ("drkit.mirror.outage", True),
        ("drkit.kafka", False),
        ("drkit.kafka.A", False),  # librdkafka's lines for cluster A
        ("drkit.kafkaesque", True),  # a name that starts like it is not one of them
        ("drkitx", False),
        ("py4j.clientserver", False),
        ("py.warnings", False),
        ("root", False),
    ],
)
def test_own_lines_are_drkits_loggers_but_librdkafkas(logger: str, own: bool) -> None:
    assert is_own_line(logger) is own


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("one", "one"),
        ("a\nb", "a | b"),
        ("  Traceback:\n    File x\n\n  Error: y  \n", "Traceback: | File x | Error: y"),
        ("", ""),
    ],
)
def test_a_record_is_one_line(text: str, line: str) -> None:
    assert one_line(text) == line


@given(st.text())
def test_one_line_never_holds_a_line_break(text: str) -> None:
    assert len(one_line(text).splitlines()) <= 1


KEY = ("drkit.kafka.A", logging.ERROR, "FAIL ... Connection refused")


def test_a_repeat_within_the_window_is_held_back_and_counted_in_the_next_line_let_through() -> None:
    gate = RepeatGate(window_seconds=60)
    assert gate.admit(KEY, 0.0) == (True, 0)
    assert [gate.admit(KEY, t) for t in (0.1, 5.0, 59.9)] == [(False, 0)] * 3
    other = ("drkit.kafka.B", logging.ERROR, "FAIL ... Connection refused")
    assert gate.admit(other, 1.0) == (True, 0)  # another cluster's line is its own
    assert gate.admit(KEY, 60.0) == (True, 3)
    assert gate.admit(KEY, 61.0) == (False, 0)


def test_repeats_not_yet_counted_are_told_once_when_the_log_closes() -> None:
    gate = RepeatGate(window_seconds=60)
    gate.admit(KEY, 0.0)
    gate.admit(KEY, 1.0)
    gate.admit(KEY, 2.0)
    assert gate.held_back() == [(KEY, 2)]
    assert gate.held_back() == []


def test_the_gate_forgets_its_oldest_lines_beyond_its_capacity() -> None:
    gate = RepeatGate(window_seconds=60, capacity=3)
    keys = [("x", 30, f"line {i}") for i in range(5)]
    for key in keys:
        gate.admit(key, 0.0)
    assert gate.admit(keys[0], 1.0) == (True, 0)  # forgotten: let through again
    assert gate.admit(keys[4], 1.0) == (False, 0)


@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 1000)), max_size=60))
def test_every_line_is_let_through_or_counted_exactly_once(events: list[tuple[str, float]]) -> None:
    gate = RepeatGate(window_seconds=10)
    through = counted = 0
    for name, when in sorted(events, key=lambda e: e[1]):
        admitted, held = gate.admit((name, 30, "m"), when)
        through += admitted
        counted += held
    counted += sum(count for _, count in gate.held_back())
    assert through + counted == len(events)


@pytest.mark.parametrize(
    ("verbosity", "has_file", "chosen", "to_file", "quiet_profile", "level", "silence"),
    [
        # The CLI's mirror: the JVM's output into the state root's Spark log, at WARN, traces kept.
        (Verbosity.WARNING, True, None, True, True, "WARN", False),
        (Verbosity.INFO, True, None, True, True, "WARN", False),
        # --verbose: on the terminal with Spark's own profile (its banner), at WARN.
        (Verbosity.DEBUG, True, None, False, False, "WARN", False),
        # A session without a file (tests, benchmarks): on the terminal, errors only, no query trace.
        (Verbosity.WARNING, False, None, False, True, "ERROR", True),
        # DRKIT_SPARK_LOG_LEVEL: its level wherever the log goes, and Spark's query traces left alone.
        (Verbosity.WARNING, True, "INFO", True, True, "INFO", False),
        (Verbosity.WARNING, False, "DEBUG", False, True, "DEBUG", False),
        (Verbosity.DEBUG, False, "ERROR", False, False, "ERROR", False),
    ],
)
def test_how_the_spark_jvm_logs(
    verbosity: Verbosity,
    has_file: bool,
    chosen: str | None,
    to_file: bool,
    quiet_profile: bool,
    level: str,
    silence: bool,
) -> None:
    how = spark_logging(log_plan(verbosity), has_file, chosen)
    assert (how.to_file, how.quiet_profile, how.level, how.silence_query_errors) == (
        to_file,
        quiet_profile,
        level,
        silence,
    )


def test_plans_are_frozen() -> None:
    plan = log_plan(Verbosity.WARNING)
    assert isinstance(plan, LogPlan)
    with pytest.raises(AttributeError):
        plan.own_level = 0  # type: ignore[misc]
