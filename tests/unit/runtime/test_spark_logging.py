"""The Spark driver starts with drkit's quiet log4j2 configuration (no banner, at the level drkit.core.verbosity
decided, from the JVM's start), unless the verbosity is debug or the operator named a log4j configuration of
their own; its output goes to the log file it is given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drkit.config import SparkConfig
from drkit.layout import LOG_ROTATE_BYTES
from drkit.runtime import spark
from drkit.runtime.spark import LEVEL_PROPERTY, QUIET_LOG_CONFIG, session_settings

OPTIONS = "spark.driver.extraJavaOptions"


def test_quiet_puts_drkits_log_config_and_its_level_on_the_driver_from_its_start() -> None:
    launch, _ = session_settings(SparkConfig(), "drkit", [], quiet=True, level="WARN")
    assert launch[OPTIONS] == f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG} -D{LEVEL_PROPERTY}=warn"
    text = QUIET_LOG_CONFIG.read_text()
    assert "rootLogger.level = ${sys:drkit.spark.level:-error}" in text and "SYSTEM_ERR" in text
    # Spark prints "Setting default log level" (and resets the root's level) unless PySpark's entry point has
    # the root's level: both read the same property.
    assert "logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer" in text
    assert "logger.gateway.level = ${sys:drkit.spark.level:-error}" in text


def test_the_operators_java_options_are_kept_after_it() -> None:
    config = SparkConfig(conf={OPTIONS: "-Dx=1"})
    launch, _ = session_settings(config, "drkit", [], quiet=True)
    assert launch[OPTIONS] == f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG} -D{LEVEL_PROPERTY}=error -Dx=1"


def test_an_operators_own_log_config_or_not_quiet_is_left_alone() -> None:
    own = SparkConfig(conf={OPTIONS: "-Dlog4j2.configurationFile=/etc/mine.properties"})
    assert (
        session_settings(own, "drkit", [], quiet=True)[0][OPTIONS] == "-Dlog4j2.configurationFile=/etc/mine.properties"
    )
    assert OPTIONS not in session_settings(SparkConfig(), "drkit", [], quiet=False)[0]


def test_the_jvm_output_file_is_appended_with_a_header_per_start(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "spark.log"
    for _ in range(2):
        with spark._jvm_output(log, "drkit-x") as out:
            assert out is not None
            os.write(out.fileno(), b"WARNING: a launcher notice\n")  # what the JVM writes to its descriptor
    lines = log.read_text().splitlines()
    assert [ln.split(" ", 2)[2] for ln in lines[::2]] == [f"drkit-x (pid {os.getpid()}): Spark driver JVM starting"] * 2
    assert lines[1::2] == ["WARNING: a launcher notice"] * 2


def test_a_log_grown_past_the_limit_is_set_aside_when_a_jvm_starts(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    log.write_bytes(b"x" * (LOG_ROTATE_BYTES + 1))
    with spark._jvm_output(log, "drkit"):
        pass
    assert (tmp_path / "spark.log.1").stat().st_size == LOG_ROTATE_BYTES + 1
    assert log.stat().st_size < 200


def test_without_a_log_file_the_jvm_keeps_the_processs_output() -> None:
    with spark._jvm_output(None, "drkit") as out:
        assert out is None


@pytest.mark.parametrize("level", ["debug", "DEBUG"])
def test_debug_verbosity_starts_spark_with_its_own_profile(monkeypatch: pytest.MonkeyPatch, level: str) -> None:
    """What build_session asks for at each verbosity (the decision is drkit.core.verbosity.spark_logging)."""
    from drkit.config.verbosity import current_plan
    from drkit.core.verbosity import spark_logging

    monkeypatch.setenv("DRKIT_LOG", level)
    how = spark_logging(current_plan(), has_log_file=True, chosen_level=None)
    assert not how.to_file and not how.quiet_profile and how.level == "WARN"
    monkeypatch.delenv("DRKIT_LOG")
    how = spark_logging(current_plan(), has_log_file=True, chosen_level=None)
    assert how.to_file and how.quiet_profile and how.level == "WARN" and not how.silence_query_errors
