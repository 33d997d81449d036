"""The state root checked before use: a folder drkit can read, and write where a command writes.

Why up front: without it a state root that is a file reads as "no tables yet" (``history`` shows an
empty audit trail, exit 0) and an unwritable one fails deep inside delta-rs, Spark or the job lock
with a traceback, sometimes after part of the work was done. The check costs a few ``stat`` calls.
"""

from __future__ import annotations

import os
from pathlib import Path

from drkit.errors import StoreError
from drkit.layout import StateLayout


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing ancestor (what a ``mkdir -p`` of ``path`` would write into)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_state_root(root: Path, write: bool = False) -> None:
    """Refuse a state root that is not a folder, cannot be read, or (``write``) cannot be written."""
    found = _existing(root)
    if not found.is_dir():
        where = "" if found == root else f" (its parent {found} is a file)"
        raise StoreError(
            f"[state] root {root} is not a folder{where}: point [state] root at a folder (drkit creates it "
            "if missing) or move the file away; nothing was changed"
        )
    if not os.access(found, os.R_OK | os.X_OK):
        raise StoreError(
            f"[state] root {root}: {found} cannot be read by this user: fix its permissions or run drkit as "
            "the user that owns the state; nothing was changed"
        )
    if not write:
        return
    try:
        # Creating the root is the first thing a writing command does anyway; os.access cannot tell a folder
        # that refuses new entries (procfs, sysfs, a read-only mount as root), so the attempt is the probe.
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"[state] root {root} cannot be created ({exc.strerror or type(exc).__name__}): point [state] root at "
            "a folder on a writable filesystem; nothing was changed"
        ) from None
    layout = StateLayout(root)
    tables = [Path(p) for p in (layout.offset_syncs, layout.checkpoints, layout.operations)]
    folders = [found, root / "delta", *tables, *(t / "_delta_log" for t in tables)]
    for folder in folders:
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            raise StoreError(
                f"[state] root {root}: {folder} is not writable by this user: fix its permissions or run drkit "
                "as the user that owns the state; nothing was changed"
            )
