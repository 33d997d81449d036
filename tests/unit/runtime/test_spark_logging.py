"""The Spark driver starts with drkit's quiet log4j2 configuration (errors only, no banner), unless the
operator set a log level (DRKIT_SPARK_LOG_LEVEL) or a log4j configuration of their own."""

from __future__ import annotations

from drkit.config import SparkConfig
from drkit.runtime.spark import QUIET_LOG_CONFIG, session_settings

OPTIONS = "spark.driver.extraJavaOptions"


def test_quiet_puts_drkits_log_config_on_the_driver_from_its_start() -> None:
    launch, _ = session_settings(SparkConfig(), "drkit", [], quiet=True)
    assert launch[OPTIONS] == f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG}"
    text = QUIET_LOG_CONFIG.read_text()
    assert "rootLogger.level = error" in text and "SYSTEM_ERR" in text
    # Spark prints "Setting default log level" unless PySpark's entry point has a level of its own.
    assert "org.apache.spark.api.python.PythonGatewayServer" in text


def test_the_operators_java_options_are_kept_after_it() -> None:
    config = SparkConfig(conf={OPTIONS: "-Dx=1"})
    launch, _ = session_settings(config, "drkit", [], quiet=True)
    assert launch[OPTIONS] == f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG} -Dx=1"


def test_an_operators_own_log_config_or_not_quiet_is_left_alone() -> None:
    own = SparkConfig(conf={OPTIONS: "-Dlog4j2.configurationFile=/etc/mine.properties"})
    assert (
        session_settings(own, "drkit", [], quiet=True)[0][OPTIONS] == "-Dlog4j2.configurationFile=/etc/mine.properties"
    )
    assert OPTIONS not in session_settings(SparkConfig(), "drkit", [], quiet=False)[0]
