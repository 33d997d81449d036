"""Which process a local cluster's PID file names, and whether it is that cluster's broker.

A PID file outlives its process: after a reboot or a crash its PID may name any other process, and
the file may have been edited. Before a signal is sent (SIGKILL, SIGSTOP, SIGTERM, SIGCONT), the
process is checked against what was recorded when the broker was started: its command line holds
the broker's main class and that cluster's ``server.properties``, and its start time (``/proc/<pid>/stat``
field 22, clock ticks since boot) is the one written into the PID file next to the PID.

Invariant: a signal goes only to a process that passes :func:`verdict`; the decision is pure, over what
the PID file says (:class:`PidRecord`) and what the system says about that PID (:class:`ProcessFacts`).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

#: The broker's main class, as it appears on the command line of every broker LocalKafka starts.
BROKER_MAIN_CLASS = "kafka.Kafka"


@dataclass(frozen=True)
class PidRecord:
    """A PID file's content: the PID and the process's start time when it was written (None in a file
    written before start times were recorded, or edited to hold a PID alone)."""

    pid: int
    start_ticks: int | None

    def render(self) -> str:
        return f"{self.pid}\n{self.start_ticks if self.start_ticks is not None else ''}\n"

    @staticmethod
    def parse(text: str) -> PidRecord | None:
        """None for a file that does not hold a positive PID (and optionally a start time) alone."""
        fields = text.split()
        if not 1 <= len(fields) <= 2 or not all(f.isascii() and f.isdigit() for f in fields):
            return None
        pid = int(fields[0])
        if pid <= 0:
            return None
        return PidRecord(pid, int(fields[1]) if len(fields) == 2 else None)


@dataclass(frozen=True)
class ProcessFacts:
    """What the system says about a live process: its command line and its start time."""

    cmdline: tuple[str, ...]
    start_ticks: int


class Verdict(StrEnum):
    OURS = "ours"  # this cluster's broker, started when the PID file says: may be signalled
    GONE = "gone"  # no such process (or no PID file): nothing to signal
    FOREIGN = "foreign"  # a live process that is not this cluster's broker, or cannot be shown to be


def verdict(
    record: PidRecord | None, facts: ProcessFacts | None, properties: Path, main_class: str = BROKER_MAIN_CLASS
) -> Verdict:
    """Whether the process ``record`` names is the broker started with ``properties``.

    ``facts`` is None when no process has that PID. A PID file that cannot be parsed but names no PID
    is GONE; one that names a live process passes only if that process's command line runs the broker's
    main class (``main_class``: a local Spark daemon's too) with this very ``server.properties`` (or the
    daemon's own properties file) and it started at the recorded time (a PID reused by
    a later broker of the same cluster is another process: its start time differs)."""
    if record is None or facts is None:
        return Verdict.GONE
    if record.start_ticks is None or record.start_ticks != facts.start_ticks:
        return Verdict.FOREIGN
    if main_class not in facts.cmdline or str(properties) not in facts.cmdline:
        return Verdict.FOREIGN
    return Verdict.OURS


def refusal(alias: str, pid_file: Path, record: PidRecord, facts: ProcessFacts | None, properties: Path) -> str:
    """The operator's line when a PID file names a live process that is not the cluster's broker."""
    if record.start_ticks is None:
        why = "records no start time (written by an older drkit, or edited)"
    elif facts is None or facts.start_ticks != record.start_ticks:
        why = "names a process started at another time (a PID reused after a crash or a reboot, or an edited file)"
    else:
        why = f"names a process whose command line is not {BROKER_MAIN_CLASS} with {properties}"
    return (
        f"cluster {alias}: refusing to signal pid {record.pid}: its PID file {pid_file} {why}; check that "
        f"process yourself, stop the broker if it is one, and delete {pid_file}"
    )


def process_facts(pid: int) -> ProcessFacts | None:
    """The command line and start time of live process ``pid``; None when there is no such process, or it
    is a zombie (it has exited; its parent has not reaped it). From ``/proc`` where there is one (Linux),
    else from ``ps`` (macOS: the start time in seconds since the epoch)."""
    if not Path("/proc/self/stat").exists():
        return _ps_facts(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces or parentheses: split after the last ")".
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    start_ticks = int(fields[19])  # field 22 of the whole line: fields 3.. start at index 0 here
    return ProcessFacts(tuple(a.decode(errors="replace") for a in cmdline.split(b"\0") if a), start_ticks)


def wait_for_exec(
    pid: int, main_classes: Collection[str], timeout: float = 10.0, program: str = "java"
) -> ProcessFacts | None:
    """The facts of a process just started, once it runs ``program`` (java) with one of ``main_classes``: until the
    child has exec'd java it is a copy of its parent (Python's command line) or a launcher script (Spark's
    ``spark-class`` names the main class too, then execs java), and a reader of its PID file during an exec
    may find an empty command line and take it for a foreign process. The start time stays the process's
    through the execs. Returns what is there at the deadline, or None once the process is gone."""
    deadline = time.monotonic() + timeout
    while True:
        facts = process_facts(pid)
        if facts is None or _runs(facts, program, main_classes) or time.monotonic() >= deadline:
            return facts
        time.sleep(0.02)


def _runs(facts: ProcessFacts, program: str, main_classes: Collection[str]) -> bool:
    named = not set(main_classes).isdisjoint(facts.cmdline)
    return named and Path(facts.cmdline[0]).name == program


def _ps_facts(pid: int) -> ProcessFacts | None:
    import subprocess

    try:
        out = subprocess.run(
            ["ps", "-o", "stat=", "-o", "lstart=", "-o", "command=", "-p", str(pid)],
            capture_output=True,
            text=True,
            check=False,
            env={"LC_ALL": "C", "PATH": "/bin:/usr/bin"},
        ).stdout
    except OSError:
        return None
    return parse_ps(out)


def parse_ps(line: str) -> ProcessFacts | None:
    """``ps -o stat= -o lstart= -o command=`` of one process (``LC_ALL=C``): its state, start time as
    ``Wed Nov 25 11:40:22 2026`` and command line (arguments split on spaces: a path with a space in it
    does not match, and is refused, never signalled by mistake)."""
    import calendar
    import time

    fields = line.split()
    if len(fields) < 7 or fields[0].startswith("Z"):
        return None
    try:
        started = calendar.timegm(time.strptime(" ".join(fields[1:6]), "%a %b %d %H:%M:%S %Y"))
    except ValueError:
        return None
    return ProcessFacts(tuple(fields[6:]), started)
