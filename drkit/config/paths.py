"""Paths drkit hands on literally: the state root, this host's folder, client properties that name a file.

Invariant: each check returns the reason a path cannot work, or None, and quotes no more of the value
than the shell syntax it found; it depends on nothing but the value (and the user database for ``~user``).
drkit runs no shell: ``~`` and ``~user`` in ``[state]`` paths are expanded deliberately, as a shell would;
``$HOME`` and ``${X}`` are not.
"""

from __future__ import annotations

import os
import re

_SHELL_VARIABLE = re.compile(r"\$(\{[^}]*\}?|[A-Za-z_][A-Za-z0-9_]*)")


def shell_syntax_problem(value: str) -> str | None:
    """Why a path holds shell syntax drkit would take literally, or None (``~`` is left to the caller)."""
    found = _SHELL_VARIABLE.search(value)
    if found is None:
        return None
    return (
        f"holds {found[0]!r}, a shell variable drkit does not expand: write the path itself, or "
        "${env:NAME} to read it from the environment"
    )


def home_problem(value: str) -> str | None:
    """Why a ``~user`` at the start of a path cannot be expanded, or None."""
    if not value.startswith("~"):
        return None
    user = value[1:].split("/", 1)[0]
    if os.path.expanduser(value) == value:
        return f"'~{user}' is not a user of this machine, so the path cannot be expanded; write the path itself"
    return None
