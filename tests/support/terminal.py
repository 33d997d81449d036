"""A pseudo-terminal to give a CLI process as its standard input, for the prompts that need a terminal.

``failover --apply`` and ``failback --apply`` without ``--yes`` refuse a standard input that is not a
terminal (a pipe could answer a question no one saw); tests that answer the prompt type into one of these.
"""

from __future__ import annotations

import contextlib
import os
import pty
from types import TracebackType


class Terminal:
    """The slave end is the process's stdin (``stdin=terminal.fd``); ``type`` writes keystrokes to it."""

    def __init__(self) -> None:
        self._master, self.fd = pty.openpty()

    def type(self, text: str) -> None:
        os.write(self._master, text.encode())

    def close(self) -> None:
        for fd in (self.fd, self._master):
            with contextlib.suppress(OSError):  # closed already
                os.close(fd)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
