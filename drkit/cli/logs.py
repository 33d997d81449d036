"""Where a ``drkit`` process's log lines go: the plan of its verbosity (drkit.core.verbosity), applied.

Default: drkit's own lines on stderr, as they are (the commands' lines); every library's line (librdkafka's,
warning and up and masked by its logger, py4j's, Python warnings) one line each, a repeat held back for a
minute, into the state root's ``logs/libraries.log``, and nothing of them on the terminal. ``--verbose``
(``DRKIT_LOG=debug``): every line on stderr with its level and logger, drkit's debug lines and librdkafka's
info lines included. The setup is undone when the command ends (tests run many commands in one process).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from drkit.config.verbosity import current_verbosity
from drkit.core.verbosity import (
    ENV,
    LIBRDKAFKA_LOGGER,
    OWN_LOGGER,
    LogPlan,
    RepeatGate,
    Verbosity,
    is_own_line,
    log_plan,
    one_line,
)
from drkit.layout import LOG_ROTATE_BYTES, StateLayout

#: Library lines kept in memory until the command knows its state root (config loading logs none).
_EARLY_LINES = 200


class _Terminal(logging.Handler):
    """Writes to the current ``sys.stderr`` (a test's capture, Rich's proxy while a spinner runs)."""

    def __init__(self, plan: LogPlan) -> None:
        super().__init__(logging.DEBUG)
        self.plan = plan

    def filter(self, record: logging.LogRecord) -> bool:
        if is_own_line(record.name):
            return record.levelno >= self.plan.own_level
        return self.plan.libraries_on_terminal

    def format(self, record: logging.LogRecord) -> str:
        if not self.plan.libraries_on_terminal:
            return record.getMessage()  # drkit's own line, as the commands print theirs
        text = super().format(record)
        return text if is_own_line(record.name) else one_line(text)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


class _LibraryFile(logging.Handler):
    """Appends the libraries' lines to the state root's library log, one line each, repeats held back.

    Opened per line (a few lines a minute at most once repeats are held back): any number of drkit
    processes append to one file. Nothing is written while the state root does not exist (a read-only
    command on a fresh config creates nothing); until the path is known the first lines wait in memory.
    """

    def __init__(self, plan: LogPlan) -> None:
        super().__init__(plan.libraries_level)
        self.path: Path | None = None
        self.root: Path | None = None
        self.gate = RepeatGate()
        self.early: list[str] = []
        self.wrote = False
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def filter(self, record: logging.LogRecord) -> bool:
        return not is_own_line(record.name)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            admitted, held = self.gate.admit((record.name, record.levelno, record.getMessage()), record.created)
            if not admitted:
                return
            when = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            line = f"{when} {one_line(self.format(record))}"
            if held:
                line += f" ({held} more like it in the minute before, left out)"
            if self.path is None:
                self.early = [*self.early, line][-_EARLY_LINES:]
            else:
                self._write([line])
        except Exception:
            self.handleError(record)

    def attach(self, layout: StateLayout) -> None:
        self.path, self.root = layout.library_log, layout.root
        lines, self.early = self.early, []
        if lines:
            self._write(lines)

    def count_held(self) -> None:
        """Writes how many repeats were held back since their line was written."""
        with self.lock or contextlib.nullcontext():
            when = datetime.now(UTC).isoformat(timespec="milliseconds")
            held = [
                f'{when} {name}: {count} more like "{one_line(message)[:120]}" left out'
                for (name, _, message), count in self.gate.held_back()
            ]
            if held and self.path is not None:
                self._write(held)

    def close(self) -> None:
        self.count_held()
        super().close()

    def _write(self, lines: list[str]) -> None:
        assert self.path is not None and self.root is not None
        if not self.root.is_dir():
            return
        self.path.parent.mkdir(exist_ok=True)
        with contextlib.suppress(OSError):  # another process may have moved it first: nothing lost
            if self.path.stat().st_size > LOG_ROTATE_BYTES:
                self.path.replace(StateLayout.rotated_log(self.path))
        with open(self.path, "a", encoding="utf-8") as out:
            out.write("".join(f"{line}\n" for line in lines))
        self.wrote = True


class LogSetup:
    """The handlers and levels of one command's run; :meth:`close` restores what was there."""

    def __init__(self, verbose: bool) -> None:
        self._env = os.environ.get(ENV)
        if verbose:
            # The jobs this command starts (a drill's mirror, Spark's Python workers) inherit it.
            os.environ[ENV] = Verbosity.DEBUG.value
        try:
            self.plan = log_plan(current_verbosity())
        except Exception:
            self._restore_env()
            raise
        self._terminal = _Terminal(self.plan)
        self._terminal.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self._file = None if self.plan.libraries_on_terminal else _LibraryFile(self.plan)
        self._layout: StateLayout | None = None
        self._sizes: dict[Path, int] = {}
        levels = {OWN_LOGGER: self.plan.own_level, LIBRDKAFKA_LOGGER: self.plan.librdkafka_level}
        if self.plan.libraries_on_terminal:
            levels[""] = self.plan.libraries_level
        self._levels = {name: logging.getLogger(name or None).level for name in levels}
        root = logging.getLogger()
        for name, level in levels.items():
            logger = logging.getLogger(name or None)
            # Levels are only lowered (a caller's, e.g. a test's caplog, stays): the handlers decide what shows.
            # librdkafka's is the plan's: its lines are made, or not, by that level (drkit.kafka.clients).
            if name == LIBRDKAFKA_LOGGER or level < logger.getEffectiveLevel():
                logger.setLevel(level)
        root.addHandler(self._terminal)
        if self._file is not None:
            root.addHandler(self._file)
        logging.captureWarnings(True)

    def attach(self, layout: StateLayout) -> None:
        """The command's state root is known: the library log is there, and the sizes of the log files now
        tell later which ones this command wrote to."""
        if self._layout is not None:
            return
        self._layout = layout
        for path in (layout.spark_log, layout.library_log):
            self._sizes[path] = _size(path)
        if self._file is not None:
            self._file.attach(layout)

    def written(self) -> list[Path]:
        """The log files under the state root that grew during this command."""
        return [path for path, size in self._sizes.items() if _size(path) > size]

    def close(self, keep_handlers: bool = False) -> None:
        """Count the repeats held back, and undo the setup; ``keep_handlers``: a process about to exit keeps
        its handlers, so that a client destroyed on the way out logs to the file, not to Python's last-resort
        stderr."""
        if keep_handlers:
            if self._file is not None:
                self._file.count_held()
            return
        root = logging.getLogger()
        root.removeHandler(self._terminal)
        if self._file is not None:
            root.removeHandler(self._file)
            self._file.close()
        for name, level in self._levels.items():
            logging.getLogger(name or None).setLevel(level)
        logging.captureWarnings(False)
        self._restore_env()

    def _restore_env(self) -> None:
        if self._env is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = self._env


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1
