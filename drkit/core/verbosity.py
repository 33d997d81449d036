"""How much a drkit process shows on the terminal, and where the rest goes.

Invariant: at the default verbosity the terminal gets drkit's own lines only. librdkafka's lines (warning
and up, masked), other libraries' log lines and Python warnings go to a log file under the state root; the
JVM's output (the launcher's notices, log4j, Java stack traces) to another. At ``debug`` (``--verbose`` or
``DRKIT_LOG=debug``) everything is on the terminal: drkit's debug lines, librdkafka's info lines, Spark's
own log. Every line written for a log record is one line, and a line repeated within a window is written
once, with the count of the ones left out. Pure: the CLI and the adapters apply the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

#: The environment variable that sets the verbosity of a drkit process (and of the jobs it starts).
ENV = "DRKIT_LOG"
#: The Python loggers librdkafka's lines go to, one per cluster alias (``drkit.kafka.<alias>``).
LIBRDKAFKA_LOGGER = "drkit.kafka"
#: drkit's own loggers: the package's.
OWN_LOGGER = "drkit"

# Python's logging levels (the values of logging.DEBUG...; core imports no logging).
DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40


class Verbosity(StrEnum):
    """What the terminal shows; the value is what ``DRKIT_LOG`` takes."""

    WARNING = "warning"  # the default: drkit's warnings and errors, nothing from the libraries or the JVM
    INFO = "info"  # drkit's progress lines too (a mirror's batches, the topology it followed)
    DEBUG = "debug"  # everything, on the terminal


def parse_verbosity(text: str | None) -> Verbosity | None:
    """``DRKIT_LOG``'s value as a verbosity (case and blanks ignored; unset or empty: the default); None
    when it names none."""
    value = (text or "").strip().lower()
    if not value:
        return Verbosity.WARNING
    return next((v for v in Verbosity if v.value == value), None)


#: librdkafka's syslog levels, from Python's (its ``log_level`` property drops lines above the level before
#: they are made: confluent-kafka maps 0-2 to CRITICAL, 3 ERROR, 4 WARNING, 5-6 INFO, 7 DEBUG).
_SYSLOG = {ERROR: 3, WARNING: 4, INFO: 6, DEBUG: 7}


def librdkafka_level(python_level: int) -> int:
    """The librdkafka ``log_level`` that lets through the lines at ``python_level`` and above."""
    return next((syslog for level, syslog in sorted(_SYSLOG.items()) if level >= python_level), 3)


@dataclass(frozen=True)
class LogPlan:
    """Where a process's lines go, decided from its verbosity."""

    verbosity: Verbosity
    #: drkit's own lines on the terminal: this level and up.
    own_level: int
    #: Level of librdkafka's loggers (their lines go where libraries' lines go).
    librdkafka_level: int
    #: Libraries' lines (librdkafka, py4j, Python warnings) and the JVM's output on the terminal: else to files.
    libraries_on_terminal: bool
    #: Level of the other libraries' loggers and of the library log file.
    libraries_level: int
    #: Spark's log4j level, unless ``DRKIT_SPARK_LOG_LEVEL`` names one.
    spark_level: str

    @property
    def librdkafka_property(self) -> str:
        """librdkafka's ``log_level`` property: lines it would drop are never made (nor written to stderr by
        librdkafka itself, as it does for lines made while a client is being destroyed)."""
        return str(librdkafka_level(self.librdkafka_level))


def log_plan(verbosity: Verbosity) -> LogPlan:
    """The plan of a verbosity: only ``debug`` lets the libraries and the JVM reach the terminal."""
    debug = verbosity is Verbosity.DEBUG
    return LogPlan(
        verbosity=verbosity,
        own_level={Verbosity.WARNING: WARNING, Verbosity.INFO: INFO, Verbosity.DEBUG: DEBUG}[verbosity],
        librdkafka_level=INFO if debug else WARNING,
        libraries_on_terminal=debug,
        libraries_level=INFO if debug else WARNING,
        spark_level="WARN",
    )


@dataclass(frozen=True)
class SparkLogging:
    """How a Spark driver JVM drkit starts logs."""

    #: Its stdout and stderr (the launcher's notices, log4j's lines, Java traces) go to the log file.
    to_file: bool
    #: drkit's log4j profile (no banner) rather than Spark's own.
    quiet_profile: bool
    #: log4j's root level.
    level: str
    #: A failed streaming query's trace is not logged by Spark (it would reach the terminal; drkit reports the
    #: failure in one line).
    silence_query_errors: bool


def spark_logging(plan: LogPlan, has_log_file: bool, chosen_level: str | None) -> SparkLogging:
    """The JVM's logging: in the log file at ``plan.spark_level`` when there is one, on the terminal with
    Spark's own profile at debug; without a file (a test's session) on the terminal, errors only.
    ``chosen_level`` (``DRKIT_SPARK_LOG_LEVEL``) sets the level wherever the log goes, and leaves a query's
    trace to Spark."""
    verbose = plan.libraries_on_terminal
    to_file = has_log_file and not verbose
    level = chosen_level or (plan.spark_level if to_file or verbose else "ERROR")
    return SparkLogging(
        to_file=to_file,
        quiet_profile=not verbose,
        level=level,
        silence_query_errors=not (chosen_level or to_file or verbose),
    )


def is_own_line(logger: str) -> bool:
    """A line of drkit's own (for the terminal), not of a library that logs through drkit's loggers."""
    own = logger == OWN_LOGGER or logger.startswith(OWN_LOGGER + ".")
    return own and not (logger == LIBRDKAFKA_LOGGER or logger.startswith(LIBRDKAFKA_LOGGER + "."))


def one_line(text: str) -> str:
    """``text`` as one line: its non-blank lines, stripped, joined by `` | `` (a multi-line message, a trace)."""
    return " | ".join(part.strip() for part in text.splitlines() if part.strip())


@dataclass
class RepeatGate:
    """Lets a line through once per ``window_seconds``; counts the ones it holds back.

    librdkafka repeats a refused connection's line at each reconnect (a hundred lines in five seconds with
    a cluster down): the log keeps the first, and the next one let through says how many were left out.
    """

    window_seconds: float = 60.0
    #: key -> (when it was last let through, how many were held back since)
    _seen: dict[tuple[str, int, str], tuple[float, int]] = field(default_factory=dict)
    #: keys kept at most; the oldest are forgotten beyond it (a long-running mirror logs many distinct lines)
    capacity: int = 1000

    def admit(self, key: tuple[str, int, str], now: float) -> tuple[bool, int]:
        """(let through, how many like it were held back before it) for the line ``key`` at ``now``."""
        last = self._seen.get(key)
        if last is not None and now - last[0] < self.window_seconds:
            self._seen[key] = (last[0], last[1] + 1)
            return False, 0
        held = last[1] if last is not None else 0
        self._seen.pop(key, None)
        self._seen[key] = (now, 0)
        if len(self._seen) > self.capacity:
            del self._seen[next(iter(self._seen))]
        return True, held

    def held_back(self) -> list[tuple[tuple[str, int, str], int]]:
        """The lines with repeats held back and not yet counted in a line let through, and how many (said
        when the log closes, so that no repeat goes uncounted); the counts start again from zero."""
        held = [(key, count) for key, (_, count) in self._seen.items() if count]
        for key, _ in held:
            self._seen[key] = (self._seen[key][0], 0)
        return held
