"""The Spark session factory: Delta and the Kafka connector on the classpath, loopback only.

Defaults suit a 2-core machine (few shuffle partitions, UI and console progress off, small Delta
snapshot partitioning); ``[spark] conf`` in the config overrides any of them. The jars come from
drkit.runtime.artifacts (Maven Central, cached), passed as local paths so that no resolution
happens at session start.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from drkit.config import SparkConfig, is_secret_key, mask_text, secret_values
from drkit.runtime.artifacts import in_jvm_working_dir, spark_extra_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: The driver's log4j2 configuration while DRKIT_SPARK_LOG_LEVEL is unset: errors only, on stderr.
QUIET_LOG_CONFIG = Path(__file__).with_name("log4j2-quiet.properties")

DEFAULTS: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    # Stopping a query closes its Kafka admin client, which waits for in-flight requests to time out
    # (default.api.timeout.ms, a minute) when the source is gone. The mirror only stops a query after its
    # batch ended or cannot end; an uncommitted batch is copied again on restart, so nothing is lost by
    # not waiting.
    "spark.sql.streaming.stopTimeout": "10s",
    # Tasks write to Kafka: a retried task would write again, so a failed task fails the batch.
    "spark.task.maxFailures": "1",
    "spark.driver.memory": "2g",
    "spark.python.worker.reuse": "true",
    # Streaming batches are short: never hold a task back waiting for a "better" executor.
    "spark.locality.wait": "0s",
    # Plans and errors print a source's options; the Kafka ones drkit derives hold a JAAS config (with
    # its password) and may hold a key (drkit.kafka.clients.java_properties): redacted with Spark's own.
    "spark.sql.redaction.options.regex": "(?i)url|user|password|secret|token|jaas|key$",
}


def session_settings(
    config: SparkConfig, app_name: str, jars: list[str], quiet: bool = False
) -> tuple[dict[str, str], dict[str, str]]:
    """(launch, secret): the settings the JVM may be started with, and those it must get afterwards.

    ``quiet``: the driver logs errors only from its start (:data:`QUIET_LOG_CONFIG`), unless the
    settings name a log4j configuration of their own.

    PySpark starts its JVM with spark-submit and passes every setting it has then as ``--conf k=v`` on
    the command line, which any local user can read (``ps``). Secrets (by key, inside a value such as
    JVM options, or equal to a secret found elsewhere) are kept for after the start, through py4j.
    """
    settings = {"spark.master": config.master, "spark.app.name": app_name, **DEFAULTS, "spark.jars": ",".join(jars)}
    settings.update(config.conf)
    if quiet:
        options = settings.get(_DRIVER_JAVA_OPTIONS, "")
        if "log4j2.configurationFile" not in options and "log4j.configurationFile" not in options:
            # Set at the JVM's start (spark-submit's driver options): Spark's banner comes before setLogLevel.
            settings[_DRIVER_JAVA_OPTIONS] = f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG} {options}".strip()
    secrets = secret_values(config.conf)
    secret = {k: v for k, v in settings.items() if is_secret_key(k) or mask_text(v, secrets) != v}
    return {k: v for k, v in settings.items() if k not in secret}, secret


def build_session(config: SparkConfig, app_name: str = "drkit") -> SparkSession:
    """Get or create the process's Spark session; no secret reaches a command line."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    level = os.environ.get("DRKIT_SPARK_LOG_LEVEL")
    launch, secret = session_settings(config, app_name, [str(p) for p in spark_extra_jars()], quiet=level is None)
    # Start the gateway JVM with the launch settings on its command line and the secret ones in a
    # private properties file (a secret the JVM reads at start, e.g. in extraJavaOptions, must be there
    # then); getOrCreate passes them again by py4j. A JVM already running in this process is kept.
    # Spark 4.0 leaves an empty artifacts/ folder in its JVM's working directory: launch it in drkit's own.
    with _secret_properties(secret) as extra, in_jvm_working_dir():
        launch.update(extra)
        SparkContext._ensure_initialized(conf=SparkConf(loadDefaults=False).setAll(list(launch.items())))
    builder = SparkSession.builder
    for key, value in {**secret, **launch}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(level or "ERROR")
    if level is None:
        _quiet_query_errors(session)
    return session


#: Spark loggers that print a failed streaming query's whole Java and Py4J trace to stderr. drkit reads the
#: query's exception itself and reports it in one line (``drkit --debug`` logs the trace); the lines Spark
#: printed first buried it. ``DRKIT_SPARK_LOG_LEVEL`` set: Spark's logs are left as they are.
QUERY_ERROR_LOGGERS = (
    "org.apache.spark.sql.execution.streaming.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.StreamExecution",
)


def _quiet_query_errors(session: SparkSession) -> None:
    jvm = session.sparkContext._jvm
    assert jvm is not None
    off = jvm.org.apache.logging.log4j.Level.OFF
    for name in QUERY_ERROR_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)


@contextlib.contextmanager
def _secret_properties(secret: dict[str, str]) -> Iterator[dict[str, str]]:
    """spark-submit reads ``--properties-file`` (PYSPARK_SUBMIT_ARGS) before the JVM starts: secret
    settings go there, in a file readable by this user only, removed once the JVM is up.

    The driver's JVM options are the exception: spark-submit turns them into arguments of the java
    command. Secret ones go to a java argument file of the same kind, and the command line names only
    the file (``@path``; the launcher expands it). Yields the launch settings to add (that ``@path``).
    """
    if not secret:
        yield {}
        return
    made: list[str] = []

    def private(suffix: str, text: str) -> str:
        fd, path = tempfile.mkstemp(prefix="drkit-spark-", suffix=suffix)
        made.append(path)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        return path

    saved = os.environ.get("PYSPARK_SUBMIT_ARGS")
    try:
        extra: dict[str, str] = {}
        java_options = secret.get(_DRIVER_JAVA_OPTIONS)
        if java_options is not None:
            extra[_DRIVER_JAVA_OPTIONS] = "@" + private(".args", java_options + "\n")
        rest = {k: v for k, v in secret.items() if k != _DRIVER_JAVA_OPTIONS}
        if rest:
            path = private(".properties", "".join(f"{_escape(k)}={_escape(v)}\n" for k, v in rest.items()))
            os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {shlex.quote(path)} {saved or 'pyspark-shell'}"
        yield extra
    finally:
        if saved is None:
            os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
        else:
            os.environ["PYSPARK_SUBMIT_ARGS"] = saved
        for path in made:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _escape(text: str) -> str:
    """java.util.Properties escaping: backslashes, separators, comment marks and line breaks."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    for ch in "=:#!":
        out = out.replace(ch, "\\" + ch)
    return "\\" + out if out.startswith(" ") else out  # a leading blank would be dropped


def _python() -> str:
    import sys

    return sys.executable
