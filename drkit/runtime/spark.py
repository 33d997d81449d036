"""The Spark session factory: Delta and the Kafka connector on the classpath, the driver where it is told.

With a master on this machine (``local``, ``local-cluster``) the driver binds to and advertises 127.0.0.1
unless ``[spark]`` names other addresses; with a cluster master (``spark://``, ``k8s://``, ``yarn``) drkit
sets only what ``[spark]`` names and leaves the rest to Spark (:func:`driver_network`). With a cluster
master the session also ships the driver's drkit to the executors (drkit.runtime.shipping), so that a
task imports the code the driver planned with.

Defaults suit a 2-core machine (few shuffle partitions, UI and console progress off, small Delta
snapshot partitioning); ``[spark] conf`` in the config overrides any of them. The jars come from
drkit.runtime.artifacts (Maven Central, cached), passed as local paths so that no resolution
happens at session start.

With a cluster master, Spark's RPC is authenticated and encrypted and its local I/O encrypted unless
``[spark] secure = false`` (drkit.core.spark_security; one warning line then). The shared secret comes from
``[spark] auth_secret_file``, else ``DRKIT_SPARK_AUTH_SECRET`` (a standalone cluster's; on Kubernetes the file is
Spark's ``spark.authenticate.secret.file``; else, and on YARN, Spark generates one per application);
like every secret setting it never reaches a command line (:func:`session_settings`), and the UI and event
log redact it (``spark.redaction.regex``, widened here to JAAS configs and PEM private keys). The Kafka
clients' secrets travel apart from the tasks (drkit.runtime.task_secrets).

The JVM's output is not the operator's: given a log file (the state root's ``logs/spark.log``), the JVM
writes everything there from its launch (the launcher's notices, log4j's lines at WARN, Java stack traces,
what Spark's Python workers print), unless the verbosity is ``debug`` (drkit.core.verbosity), which
leaves it all on the terminal with Spark's own log4j profile.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from drkit.config import SparkConfig, is_secret_key, mask_text, secret_values
from drkit.config.verbosity import current_plan
from drkit.core.copying import is_local_master
from drkit.core.spark_security import SECRET_SETTING, spark_security
from drkit.core.verbosity import spark_logging
from drkit.errors import ConfigError
from drkit.layout import LOG_ROTATE_BYTES, StateLayout
from drkit.runtime.artifacts import in_jvm_working_dir, spark_extra_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: Where a user may give Spark's shared secret when no file is named (a Kubernetes Secret as an env var).
AUTH_SECRET_ENV = "DRKIT_SPARK_AUTH_SECRET"  # noqa: S105 (a variable name)
#: The driver's log4j2 configuration unless the verbosity is debug: on the JVM's stderr, no banner, at the
#: level of the system property :data:`LEVEL_PROPERTY` (errors only without it).
QUIET_LOG_CONFIG = Path(__file__).with_name("log4j2-quiet.properties")
#: The JVM system property that sets the quiet configuration's root level from the JVM's start.
LEVEL_PROPERTY = "drkit.spark.level"
#: The operator's Spark log level (log4j's names: ERROR, WARN, INFO...), wherever the log goes.
LEVEL_ENV = "DRKIT_SPARK_LOG_LEVEL"

#: Where the driver binds and what it advertises when the master runs on this machine.
LOOPBACK = "127.0.0.1"

DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
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
    # A lost executor or worker must not stop the flow: its copy task runs again elsewhere. Safe: only the
    # attempt that succeeded returns its ranges (drkit.mirror.executor); an earlier one's copies are
    # orphans, duplicates without syncs. Speculation (two running copies of one task) is refused by the
    # mirror (drkit.core.copying.speculation_refusal).
    "spark.task.maxFailures": "4",
    "spark.speculation": "false",
    "spark.driver.memory": "2g",
    "spark.python.worker.reuse": "true",
    # Streaming batches are short: never hold a task back waiting for a "better" executor.
    "spark.locality.wait": "0s",
    # Plans and errors print a source's options; the Kafka ones drkit derives hold a JAAS config (with
    # its password) and may hold a key (drkit.kafka.clients.java_properties): redacted with Spark's own.
    "spark.sql.redaction.options.regex": "(?i)url|user|password|secret|token|jaas|key$",
    # The UI's and event log's Spark properties, matched by name or value: Spark's default (secret, password,
    # token, access.key) misses a JAAS config's value and a PEM key's.
    "spark.redaction.regex": "(?i)secret|password|token|access[.]key|jaas|LoginModule|credential|PRIVATE KEY",
}


def runs_on_this_machine(master: str) -> bool:
    """Whether every executor of ``master`` runs on the driver's machine: ``local[...]`` (in the driver's JVM)
    and ``local-cluster[...]`` (executor JVMs on this host)."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def driver_network(config: SparkConfig) -> dict[str, str]:
    """The driver's network settings: what ``[spark]`` names, else loopback for a master on this machine.

    A cluster master with nothing named gets Spark's own defaults (the address of this machine's host
    name, free ports): what an operator of a Spark cluster expects; a driver in a pod or behind a firewall
    names its Service's host and fixed ports (docs/deploy.md).
    """
    local = runs_on_this_machine(config.master)
    host = config.driver_host or (LOOPBACK if local else None)
    bind = config.driver_bind_address or (LOOPBACK if local and config.driver_host is None else None)
    named = {
        "spark.driver.host": host,
        "spark.driver.bindAddress": bind,
        "spark.driver.port": None if config.driver_port is None else str(config.driver_port),
        "spark.driver.blockManager.port": None if config.block_manager_port is None else str(config.block_manager_port),
    }
    return {k: v for k, v in named.items() if v is not None}


def local_ip(config: SparkConfig) -> str | None:
    """``SPARK_LOCAL_IP`` for the driver's JVM (the address its other services bind to): the bind address,
    else the driver's host on this machine; None (Spark's choice) for a cluster master with none named."""
    return driver_network(config).get("spark.driver.bindAddress")


def auth_secret(config: SparkConfig) -> str | None:
    """Spark's shared secret as the user gave it: ``[spark] conf``, else ``auth_secret_file``, else the
    environment (:data:`AUTH_SECRET_ENV`); None: not given."""
    if SECRET_SETTING in config.conf:
        return config.conf[SECRET_SETTING]
    if config.auth_secret_file is not None:
        try:
            secret = config.auth_secret_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not readable as text"
            raise ConfigError(f"[spark] auth_secret_file {config.auth_secret_file}: {reason}") from None
        if not secret:
            raise ConfigError(f"[spark] auth_secret_file {config.auth_secret_file}: the file is empty")
        return secret
    return os.environ.get(AUTH_SECRET_ENV) or None


def session_settings(
    config: SparkConfig,
    app_name: str,
    jars: list[str],
    quiet: bool = False,
    level: str = "error",
    secret_key: str | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """(launch, secret): the settings the JVM may be started with, and those it must get afterwards.

    ``secret_key``: Spark's shared secret (:func:`auth_secret`); with a cluster master and ``[spark] secure``,
    Spark's security settings are added (drkit.core.spark_security), or the master refused (ConfigError).

    ``quiet``: the driver logs at ``level`` from its start, without Spark's banner (:data:`QUIET_LOG_CONFIG`),
    unless the settings name a log4j configuration of their own.

    PySpark starts its JVM with spark-submit and passes every setting it has then as ``--conf k=v`` on
    the command line, which any local user can read (``ps``). Secrets (by key, inside a value such as
    JVM options, or equal to a secret found elsewhere) are kept for after the start, through py4j.
    """
    settings = {
        "spark.master": config.master,
        "spark.app.name": app_name,
        **DEFAULTS,
        **driver_network(config),
        "spark.jars": ",".join(jars),
    }
    secret_file = None if config.auth_secret_file is None else str(config.auth_secret_file)
    security = spark_security(config.master, config.secure, secret_key is not None, secret_file)
    if security.refusal is not None:
        raise ConfigError(security.refusal)
    settings.update(security.settings)
    if security.passes_secret and secret_key is not None:
        settings[SECRET_SETTING] = secret_key
    settings.update(config.conf)
    if quiet:
        options = settings.get(_DRIVER_JAVA_OPTIONS, "")
        if "log4j2.configurationFile" not in options and "log4j.configurationFile" not in options:
            # Set at the JVM's start (spark-submit's driver options): Spark's banner comes before setLogLevel.
            quiet_options = f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG} -D{LEVEL_PROPERTY}={level.lower()}"
            settings[_DRIVER_JAVA_OPTIONS] = f"{quiet_options} {options}".strip()
    secrets = secret_values(config.conf)
    secret = {k: v for k, v in settings.items() if is_secret_key(k) or mask_text(v, secrets) != v}
    return {k: v for k, v in settings.items() if k not in secret}, secret


def build_session(
    config: SparkConfig, app_name: str = "drkit", log_file: Path | None = None, state: StateLayout | None = None
) -> SparkSession:
    """Get or create the process's Spark session; no secret reaches a command line.

    ``log_file``: where the JVM's output goes (appended), unless the verbosity is debug. Without one, the JVM
    shares the process's stderr and logs errors only (a test's or a benchmark's session). ``state``: the
    state root Spark must reach (its file system's jars and settings when it is in an object store,
    drkit.runtime.objectstore; ``[spark] conf`` wins over the settings derived).
    """
    if state is not None:
        from drkit.runtime.objectstore import spark_settings

        store_conf, store_jars = spark_settings(state)
        config = config.model_copy(update={"conf": {**store_conf, **config.conf}})
    address = local_ip(config)
    if address is not None:
        os.environ.setdefault("SPARK_LOCAL_IP", address)
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    how = spark_logging(current_plan(), log_file is not None, os.environ.get(LEVEL_ENV) or None)
    jars = [str(p) for p in spark_extra_jars()]
    if state is not None:
        jars += [str(p) for p in store_jars]
    launch, secret = session_settings(
        config, app_name, jars, quiet=how.quiet_profile, level=how.level, secret_key=auth_secret(config)
    )
    _warn_once(spark_security(config.master, config.secure, True).warning)
    # Start the gateway JVM with the launch settings on its command line and the secret ones in a
    # private properties file (a secret the JVM reads at start, e.g. in extraJavaOptions, must be there
    # then); getOrCreate passes them again by py4j. A JVM already running in this process is kept.
    # Spark 4.0 leaves an empty artifacts/ folder in its JVM's working directory: launch it in drkit's own.
    with (
        _secret_properties(secret) as extra,
        in_jvm_working_dir(),
        _jvm_output(log_file if how.to_file else None, app_name) as output,
    ):
        launch.update(extra)
        conf = SparkConf(loadDefaults=False).setAll(list(launch.items()))
        gateway = None
        if output is not None and SparkContext._gateway is None:
            from pyspark.java_gateway import launch_gateway

            gateway = launch_gateway(  # type: ignore[no-untyped-call]
                conf, popen_kwargs={"stdout": output, "stderr": subprocess.STDOUT}
            )
        SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    builder = SparkSession.builder
    for key, value in {**secret, **launch}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(how.level)
    # Tasks outside the driver's process (every master but local[...]) import drkit from the zip.
    if config.ship_drkit and not is_local_master(config.master):
        from drkit.runtime.shipping import ship_drkit

        ship_drkit(session)
    if how.silence_query_errors:
        _quiet_query_errors(session)
    return session


_WARNED: set[str] = set()


def _warn_once(warning: str | None) -> None:
    """One line per process for security turned off (a process may build its session more than once)."""
    if warning is not None and warning not in _WARNED:
        _WARNED.add(warning)
        log.warning("%s", warning)


@contextlib.contextmanager
def _jvm_output(log_file: Path | None, app_name: str) -> Iterator[IO[Any] | None]:
    """The open log file the JVM is started with as its stdout and stderr (None: the process's own).

    The JVM keeps its own descriptor: the file is closed here once the JVM is launched. A file that grew
    past :data:`LOG_ROTATE_BYTES` is renamed first (a long-lived state root keeps two files at most).
    """
    if log_file is None:
        yield None
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if log_file.stat().st_size > LOG_ROTATE_BYTES:
            log_file.replace(StateLayout.rotated_log(log_file))
    with open(log_file, "ab", buffering=0) as out:
        started = datetime.now(UTC).isoformat(timespec="seconds")
        out.write(f"==== {started} {app_name} (pid {os.getpid()}): Spark driver JVM starting\n".encode())
        yield out


#: Spark loggers that print a failed streaming query's whole Java and Py4J trace to stderr. drkit reads the
#: query's exception itself and reports it in one line (``drkit --debug`` logs the trace); the lines Spark
#: printed first buried it. Switched off only where they would reach the terminal: a log file keeps them,
#: ``--verbose`` shows them, and ``DRKIT_SPARK_LOG_LEVEL`` set leaves Spark's logs as they are.
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
