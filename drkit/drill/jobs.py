"""The drill's jobs: ``drkit mirror`` and ``drkit checkpoint`` run as the operator runs them, as processes.

Each job runs in a session of its own (a signal reaches its whole process group), its output kept in the
drill's folder as ``<name>.log``. Whatever happens, every job the drill started is stopped when the drill
leaves it: SIGINT first, SIGKILL when it has not ended within a minute.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

from drkit.errors import RefusedError

#: The drill's jobs by name ("mirror", "checkpoint"), as they were started.
Jobs = dict[str, subprocess.Popen[bytes]]


def commands(config: str, flow: str) -> dict[str, list[str]]:
    """The drkit command line of each job, in the order they start."""
    return {
        "mirror": ["mirror", "-c", config, "--flow", flow],
        "checkpoint": ["checkpoint", "-c", config, "--flow", flow],
    }


@contextlib.contextmanager
def running(folder: Path, config: str, flow: str, wanted: Mapping[str, bool]) -> Iterator[Jobs]:
    """The ``wanted`` jobs, started; stopped (and waited for) however the block ends."""
    jobs: Jobs = {}
    logs: list[IO[bytes]] = []
    try:
        for name, args in commands(config, flow).items():
            if not wanted[name]:
                continue
            log = (folder / f"{name}.log").open("wb")
            logs.append(log)
            jobs[name] = subprocess.Popen(
                [sys.executable, "-m", "drkit.cli.app", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        yield jobs
    finally:
        stop(jobs, wait=True)
        for opened in logs:
            opened.close()


def stop(jobs: Jobs, wait: bool) -> None:
    """SIGINT to every job still running; with ``wait``, SIGKILL to one not ended within a minute."""
    for proc in jobs.values():
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
    if not wait:
        return
    for proc in jobs.values():
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def kill(job: subprocess.Popen[bytes]) -> None:
    """SIGKILL, and reaped: the job is gone for status at once, as a killed process is on a host."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        job.wait(10)


def require_running(jobs: Jobs, folder: Path) -> None:
    """Refuse when a job has ended: the drill cannot go on without it (its log's last line says why)."""
    for name, proc in jobs.items():
        if proc.poll() is not None:
            tail = (folder / f"{name}.log").read_text(errors="replace").strip().splitlines()[-1:]
            raise RefusedError(f"drkit {name} ended (exit {proc.returncode}): {' '.join(tail)}")
