"""The drill's jobs: started as drkit commands in sessions of their own, and stopped whatever happens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from drkit.drill import jobs
from drkit.errors import RefusedError

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def test_the_jobs_are_the_operators_commands_mirror_first() -> None:
    assert jobs.commands("/c.toml", "A->B") == {
        "mirror": ["mirror", "-c", "/c.toml", "--flow", "A->B"],
        "checkpoint": ["checkpoint", "-c", "/c.toml", "--flow", "A->B"],
    }


def test_no_job_wanted_starts_nothing(tmp_path: Path) -> None:
    with jobs.running(tmp_path, "/c.toml", "A->B", {"mirror": False, "checkpoint": False}) as running:
        assert running == {}
    assert list(tmp_path.iterdir()) == []


def test_stop_interrupts_every_job_and_kill_reaps_it() -> None:
    first = subprocess.Popen(SLEEPER, start_new_session=True)
    second = subprocess.Popen(SLEEPER, start_new_session=True)
    jobs.stop({"mirror": first}, wait=True)
    assert first.returncode is not None and first.returncode != -9  # SIGINT was enough
    jobs.kill(second)
    assert second.returncode == -9
    jobs.stop({"mirror": first, "checkpoint": second}, wait=True)  # ended already: nothing to signal


def test_a_job_that_ended_is_refused_with_its_logs_last_line(tmp_path: Path) -> None:
    (tmp_path / "mirror.log").write_text("starting\nno such flow: A->C\n")
    ended = subprocess.Popen([sys.executable, "-c", "raise SystemExit(4)"])
    ended.wait(30)
    alive = subprocess.Popen(SLEEPER, start_new_session=True)
    try:
        jobs.require_running({"checkpoint": alive}, tmp_path)
        with pytest.raises(RefusedError, match=r"^drkit mirror ended \(exit 4\): no such flow: A->C$"):
            jobs.require_running({"checkpoint": alive, "mirror": ended}, tmp_path)
    finally:
        jobs.kill(alive)
