"""One running mirror (and one translator) per flow: the second is refused, nothing written, no Spark.

Real lock files under a temporary state root; the holder is another process (a tiny ``python -c``), as
two operators' ``drkit mirror`` would be.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import no_java_env
from support.waiting import wait_until

from drkit.errors import RefusedError
from drkit.layout import JobKind, StateLayout
from drkit.runtime.process import running, running_jobs

REFUSAL = re.compile(
    r"flow A->B already has a running (mirror|translator) \(pid (\d+), since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\); "
    r"stop it first or run another flow"
)

HOLD = """
import sys
import time
from pathlib import Path
from drkit.layout import JobKind, StateLayout
from drkit.runtime.process import running_jobs
with running_jobs(StateLayout(Path(sys.argv[1])), JobKind[sys.argv[2]], sys.argv[3:]):
    print("held", flush=True)
    sys.stdin.read()
"""


class Holder:
    """Another process holding the lock of ``kind`` for ``flows`` until released or killed."""

    def __init__(self, root: Path, kind: JobKind, *flows: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(root), kind.name, *flows],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "held\n"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def layout(tmp_path: Path) -> StateLayout:
    return StateLayout(tmp_path / "state")


@pytest.fixture
def holder(layout: StateLayout) -> Iterator[Holder]:
    h = Holder(layout.root, JobKind.MIRROR, "A->B")
    yield h
    if h.proc.poll() is None:
        h.kill()


def test_a_second_mirror_of_a_flow_is_refused_naming_the_first(layout: StateLayout, holder: Holder) -> None:
    pid_file = layout.pid_file(JobKind.MIRROR, "A->B")
    with pytest.raises(RefusedError) as refused, running_jobs(layout, JobKind.MIRROR, ["A->B"]):
        pytest.fail("the lock was taken twice")
    match = REFUSAL.fullmatch(str(refused.value))
    assert match is not None, str(refused.value)
    assert (match[1], int(match[2])) == ("mirror", holder.pid)
    assert RefusedError.exit_code == 3
    assert pid_file.read_text() == f"{holder.pid}\n" and running(pid_file)  # the holder's PID file untouched


def test_the_lock_is_free_once_the_holder_ends_even_killed(layout: StateLayout, holder: Holder) -> None:
    holder.kill()  # no cleanup runs: the kernel releases the lock
    with running_jobs(layout, JobKind.MIRROR, ["A->B"]):
        assert layout.pid_file(JobKind.MIRROR, "A->B").read_text() == f"{os.getpid()}\n"
    assert not layout.pid_file(JobKind.MIRROR, "A->B").exists()


def test_released_on_a_normal_end(layout: StateLayout, holder: Holder) -> None:
    holder.release()
    assert not layout.pid_file(JobKind.MIRROR, "A->B").exists()
    with running_jobs(layout, JobKind.MIRROR, ["A->B"]):
        pass


def test_another_flow_and_the_flows_translator_still_run(layout: StateLayout, holder: Holder) -> None:
    with running_jobs(layout, JobKind.MIRROR, ["B->A"]), running_jobs(layout, JobKind.TRANSLATOR, ["A->B"]):
        assert running(layout.pid_file(JobKind.TRANSLATOR, "A->B"))


def test_a_second_translator_of_a_flow_is_refused(layout: StateLayout) -> None:
    translator = Holder(layout.root, JobKind.TRANSLATOR, "A->B")
    try:
        with pytest.raises(RefusedError, match=REFUSAL) as refused, running_jobs(layout, JobKind.TRANSLATOR, ["A->B"]):
            pytest.fail("the lock was taken twice")
        assert f"running translator (pid {translator.pid}," in str(refused.value)
    finally:
        translator.release()


def test_all_flows_refused_for_one_holds_nothing(layout: StateLayout, holder: Holder) -> None:
    """``drkit mirror`` of every flow, one of which runs: refused, and the other flow is left free."""
    with pytest.raises(RefusedError), running_jobs(layout, JobKind.MIRROR, ["B->A", "A->B"]):
        pytest.fail("the lock was taken twice")
    assert not layout.pid_file(JobKind.MIRROR, "B->A").exists()
    other = Holder(layout.root, JobKind.MIRROR, "B->A")  # B->A's lock was released with the refusal
    other.release()


def test_twice_in_one_process_is_refused(layout: StateLayout) -> None:
    with running_jobs(layout, JobKind.MIRROR, ["A->B"]):
        mine = rf"running mirror \(pid {os.getpid()},"
        with pytest.raises(RefusedError, match=mine), running_jobs(layout, JobKind.MIRROR, ["A->B"]):
            pytest.fail("the lock was taken twice")
        assert running(layout.pid_file(JobKind.MIRROR, "A->B"))


def test_cli_mirror_refused_exit_3_in_one_line_without_spark(tmp_path: Path, layout: StateLayout) -> None:
    """No JVM can start in ``no_java_env``: the refusal comes before Spark (and before any cluster)."""
    config = tmp_path / "drkit.toml"
    config.write_text(
        f"[state]\nroot = {json.dumps(str(layout.root))}\n\n"
        '[clusters.A]\nbootstrap_servers = "127.0.0.1:1"\n\n[clusters.B]\nbootstrap_servers = "127.0.0.1:2"\n\n'
        '[[flows]]\nsource = "A"\ntarget = "B"\n'
    )
    for kind, command in ((JobKind.MIRROR, ["mirror", "--once"]), (JobKind.TRANSLATOR, ["checkpoint", "--once"])):
        first = Holder(layout.root, kind, "A->B")
        try:
            done = subprocess.run(
                [sys.executable, "-m", "drkit.cli.app", *command, "-c", str(config)],
                capture_output=True,
                text=True,
                env=no_java_env(),
                timeout=120,
            )
        finally:
            first.release()
        assert done.returncode == 3, done.stderr
        lines = (done.stdout + done.stderr).strip().splitlines()
        assert len(lines) == 1 and REFUSAL.search(lines[0]), lines
        assert f"(pid {first.pid}," in lines[0]


def test_a_dead_process_not_reaped_yet_is_not_running(tmp_path: Path) -> None:
    """A killed job whose parent has not waited for it (a zombie) still answers signal 0: it is not running."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    pid_file = tmp_path / "job.pid"
    pid_file.write_text(f"{child.pid}\n")
    try:
        state = Path(f"/proc/{child.pid}/stat")
        wait_until(lambda: state.read_text().rpartition(")")[2].split()[0] == "Z", 10, "the child a zombie", 0.01)
        os.kill(child.pid, 0)  # the zombie still answers
        assert not running(pid_file)
    finally:
        child.wait()
    assert not running(pid_file)
    pid_file.write_text(f"{os.getpid()}\n")
    assert running(pid_file)
