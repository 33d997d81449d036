"""PID files of the long-running drkit processes, so ``drkit status`` can tell whether they run.

The paths come from :meth:`drkit.layout.StateLayout.pid_file`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


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
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True
