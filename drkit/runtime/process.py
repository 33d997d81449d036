"""One running job per flow and kind, and the PID files ``drkit status`` reads.

A job (a flow's mirror or translator) holds an exclusive ``flock`` on its lock file
(:meth:`drkit.layout.StateLayout.job_lock`) for as long as the process runs. Two mirrors of one
flow would both copy every record to the target (each with its own producer; the sync table then
holds both), so the second is refused before it touches a cluster, a table or Spark. The kernel
releases the lock when the process ends, however it ends, so a crash never leaves a stale lock;
the lock file itself is never deleted (deleting a lock file lets two processes lock two inodes).

The PID file (:meth:`drkit.layout.StateLayout.pid_file`) stays for :func:`running`.

Both are host-local (``StateLayout.root``: the state root when it is a local folder, this host's own folder
for a state root in an object store): they guard one host only. A second host sharing an object-store root
is not refused by them; docs/state.md says what a second host sees and how to run one job per flow.

Earlier versions named a flow's folder in a way two flows could share (``a_to->b``, ``a->to_b``);
:func:`adopt_legacy_dirs` moves such a folder to its flow's own name when exactly one configured flow
can own it and no job of the earlier version holds its lock, and refuses in one line otherwise, so an
upgrade never starts a mirror from an empty Spark checkpoint while the old one sits beside it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from drkit.errors import RefusedError, StoreError
from drkit.layout import JobKind, StateLayout

#: What the refusal calls each kind of job (JobKind.TRANSLATOR's value is its folder name).
_JOB_NAMES = {JobKind.MIRROR: "mirror", JobKind.TRANSLATOR: "translator"}

#: How long a refused job waits for the holder to write who it is: the holder writes right after
#: taking the lock, so an empty lock file is only seen in that instant.
_HOLDER_WAIT_SECONDS = 1.0


@dataclass(frozen=True)
class Holder:
    """The process holding a job's lock, as it wrote itself into the lock file."""

    pid: int
    since: datetime

    def render(self) -> str:
        return f"{self.pid}\n{self.since.isoformat()}\n"

    @staticmethod
    def parse(text: str) -> Holder | None:
        lines = text.split()
        if len(lines) != 2:
            return None
        try:
            return Holder(int(lines[0]), datetime.fromisoformat(lines[1]))
        except ValueError:
            return None


@contextlib.contextmanager
def running_jobs(layout: StateLayout, kind: JobKind, flows: list[str]) -> Iterator[None]:
    """Hold the lock of ``kind`` for each of ``flows``, and their PID files, for the duration of the block.

    Raises :class:`RefusedError` when another process holds one of them; then nothing is held or written.
    """
    with contextlib.ExitStack() as stack:
        for flow in sorted(set(flows)):
            stack.enter_context(_job_lock(layout.job_lock(kind, flow), kind, flow))
        stack.enter_context(pid_files([layout.pid_file(kind, flow) for flow in flows]))
        yield


@contextlib.contextmanager
def _job_lock(path: Path, kind: JobKind, flow: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Opened without truncating: a refused process must not wipe the holder's PID.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise RefusedError(_refusal(kind, flow, _holder(fd))) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, Holder(os.getpid(), datetime.now(UTC).replace(microsecond=0)).render().encode(), 0)
        try:
            yield
        finally:
            # Emptied so a later reader never takes this process for the holder (the lock goes with the fd).
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _holder(fd: int) -> Holder | None:
    deadline = time.monotonic() + _HOLDER_WAIT_SECONDS
    while True:
        holder = Holder.parse(os.pread(fd, 256, 0).decode(errors="replace"))
        if holder is not None or time.monotonic() >= deadline:
            return holder
        time.sleep(0.02)


def _refusal(kind: JobKind, flow: str, holder: Holder | None) -> str:
    who = "pid unknown" if holder is None else f"pid {holder.pid}, since {holder.since:%Y-%m-%d %H:%M:%S %Z}"
    return f"flow {flow} already has a running {_JOB_NAMES[kind]} ({who}); stop it first or run another flow"


@contextlib.contextmanager
def pid_files(paths: list[Path]) -> Iterator[None]:
    """Write this process's PID to ``paths`` for the duration of the block."""
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        for path in paths:
            with contextlib.suppress(OSError):
                if path.read_text().strip() == str(os.getpid()):
                    path.unlink()


def running(path: Path) -> bool:
    """Whether the process whose PID ``path`` holds is alive. A process that died and was not reaped yet (a
    zombie: its parent, a supervisor or a drill, has not waited for it) still answers signal 0, but runs
    nothing: it is not running."""
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` is a zombie, by its state in /proc (Linux); elsewhere it is taken for alive."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the command name, which is in parentheses and may hold spaces or parentheses.
    state = stat.rpartition(")")[2].split()
    return bool(state) and state[0] in ("Z", "X")


def adopt_legacy_dirs(layout: StateLayout, flows: Sequence[str]) -> None:
    """Move the folders earlier versions kept for ``flows`` (all configured flows) to their own names.

    A folder is moved when exactly one of ``flows`` had that name, it is no flow's own name and its
    flow has no folder of its own yet; a folder two flows shared is refused with what to do, as is one
    an earlier version's job still holds. Nothing is moved when the state root does not exist.
    """
    if not layout.root.is_dir():
        return
    for kind in JobKind:
        for flow in flows:
            old, new = layout.legacy_job_dir(kind, flow), layout.job_dir(kind, flow)
            if old == new or new.exists() or not old.is_dir():
                continue
            if any(layout.job_dir(kind, other) == old for other in flows):
                continue  # another flow's own folder, by today's names
            owners = sorted(f for f in flows if layout.legacy_job_dir(kind, f) == old)
            if len(owners) > 1:
                choices = " or ".join(str(layout.job_dir(kind, f)) for f in owners)
                raise RefusedError(
                    f"{old} was shared by flows {' and '.join(owners)} (earlier versions named them alike): move "
                    f"it to {choices}, for the flow whose state it holds; nothing was changed"
                )
            _move(old, new, kind, flow)


def _move(old: Path, new: Path, kind: JobKind, flow: str) -> None:
    lock = old / "lock"
    fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC) if lock.is_file() else None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise RefusedError(
                    f"flow {flow} has a {_JOB_NAMES[kind]} of an earlier drkit version running (it holds {lock}): "
                    "stop it, then run this again; nothing was changed"
                ) from None
        try:
            old.rename(new)
        except OSError as exc:
            raise StoreError(
                f"flow {flow}: cannot move its state folder {old} to {new} ({exc.strerror}): move it by hand or "
                "fix the permissions; nothing was changed"
            ) from None
    finally:
        if fd is not None:
            os.close(fd)
