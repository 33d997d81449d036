"""Every path under the state root, built in one place.

The state root holds the Delta tables, each mirror's Spark streaming checkpoint and the jobs' run files
(:class:`StatePath`: a local path or an object-store URI, read and written through drkit.store.files).
What only means something on one host (the PID and lock files of running jobs, the logs, drill reports)
is a local :class:`~pathlib.Path` under :attr:`StateLayout.root`: the state root itself when it is a local
folder, this host's own folder for it when the state is in an object store. Only :class:`StateLayout`
joins those paths, so two components can never disagree about where a thing lives (a flow's folder name,
say).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from drkit.core.storage import RootUri, StorageSettings

#: A lease epoch's streaming checkpoint is the folder ``checkpoint-<epoch>`` (:meth:`StateLayout.stream_checkpoint`).
CHECKPOINT_EPOCH_PREFIX = "checkpoint-"

#: A log file under the state root larger than this is moved to its :meth:`StateLayout.rotated_log`.
LOG_ROTATE_BYTES = 10 * 1024 * 1024


class JobKind(StrEnum):
    """The long-running drkit processes that keep state per flow."""

    MIRROR = "mirror"
    TRANSLATOR = "checkpoint"  # folder name kept: existing state folders stay valid


#: Characters a flow's folder name keeps as they are; every other one is written as an escape.
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_ARROW = "->"


def flow_dir_name(flow: str) -> str:
    """A flow name (``A->B``) as a file-system-safe folder name (``A_to_B``), one per flow name.

    Injective (two flows never share a folder, a lock or a Spark checkpoint): letters, digits and ``-``
    stay, ``->`` is ``_to_``, ``_`` is ``__`` and any other character ``_<hex code>_``. Read left to
    right, ``_`` starts exactly one of those three escapes (``t`` is no hex digit), so the name can be
    decoded back. ``a_to->b`` is ``a__to_to_b``, ``a->to_b`` is ``a_to_to__b``. Flows whose aliases hold
    no ``_`` keep the folder name of earlier versions (:func:`legacy_flow_dir_name`).
    """
    out: list[str] = []
    i = 0
    while i < len(flow):
        if flow.startswith(_ARROW, i):
            out.append("_to_")
            i += len(_ARROW)
            continue
        char = flow[i]
        out.append(char if char in _KEPT else "__" if char == "_" else f"_{ord(char):x}_")
        i += 1
    return "".join(out)


def legacy_flow_dir_name(flow: str) -> str:
    """The folder name earlier versions gave a flow: not injective (``a_to->b`` and ``a->to_b`` share one)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", flow.replace(_ARROW, "_to_"))


@dataclass(frozen=True)
class StatePath:
    """A path under the state root: a local file path, or a URI in an object store with the settings that
    reach it. A remote one has no local file name (``os.fspath`` refuses it), so it can never be opened,
    created or checked as a local folder by mistake; drkit.store.files reads and writes both kinds."""

    text: str
    storage: StorageSettings | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        return self.text

    def __truediv__(self, name: str) -> StatePath:
        return StatePath(f"{self.text.rstrip('/')}/{name}", self.storage)

    def __fspath__(self) -> str:
        if self.remote:
            raise TypeError(f"{self.text} is in an object store: read and write it through drkit.store.files")
        return self.text

    @property
    def remote(self) -> bool:
        return "://" in self.text

    @property
    def name(self) -> str:
        return self.text.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> StatePath:
        head = self.text.rstrip("/").rsplit("/", 1)[0]
        return StatePath(head, self.storage)


@dataclass(frozen=True)
class StateLayout:
    """The paths under one state root.

    ``root`` is a local folder: the state root, or with ``remote`` (the state root in an object store) this
    host's own folder for it, holding only what is host-local (locks, PID files, logs, drill reports).
    """

    root: Path
    remote: RootUri | None = None
    storage: StorageSettings | None = field(default=None, repr=False, compare=False)

    @property
    def store(self) -> StatePath:
        """The state root, where the tables, the streaming checkpoints and the run files are."""
        if self.remote is not None:
            return StatePath(str(self.remote), self.storage)
        return StatePath(os.fspath(self.root))

    @property
    def where(self) -> str:
        """The state root as the operator wrote it (the URI of a remote one), for messages."""
        return str(self.store)

    # -- Delta tables ---------------------------------------------------------------------------

    @property
    def offset_syncs(self) -> StatePath:
        return self.store / "delta" / "offset_syncs"

    @property
    def checkpoints(self) -> StatePath:
        return self.store / "delta" / "checkpoints"

    @property
    def operations(self) -> StatePath:
        return self.store / "delta" / "operations"

    @property
    def drills(self) -> StatePath:
        return self.store / "delta" / "drills"

    # -- logs -----------------------------------------------------------------------------------

    @property
    def log_dir(self) -> Path:
        """What drkit's processes log besides their own lines on the terminal (drkit.core.verbosity)."""
        return self.root / "logs"

    @property
    def spark_log(self) -> Path:
        """The Spark JVM's output: the launcher's notices, log4j's lines, Java stack traces (every JVM of
        this state root appends to it)."""
        return self.log_dir / "spark.log"

    @property
    def library_log(self) -> Path:
        """The libraries' log lines: librdkafka's (warning and up, masked), py4j's, Python warnings."""
        return self.log_dir / "libraries.log"

    @staticmethod
    def rotated_log(log: Path) -> Path:
        """Where a log file that grew past :data:`LOG_ROTATE_BYTES` is moved (replacing the previous one):
        a long-lived state root keeps two files of each log at most."""
        return log.with_name(log.name + ".1")

    # -- drills ---------------------------------------------------------------------------------

    def drill_dir(self, drill_id: str) -> Path:
        """A drill run's report (report.json, report.md) and the logs of the jobs it ran."""
        return self.root / "drills" / drill_id

    # -- per flow -------------------------------------------------------------------------------

    def job_dir(self, kind: JobKind, flow: str) -> Path:
        """The flow's folder on this host (its lock and PID file); the same folder as :meth:`flow_dir` when the
        state root is local."""
        return self.root / kind.value / flow_dir_name(flow)

    def flow_dir(self, kind: JobKind, flow: str) -> StatePath:
        """The flow's folder under the state root (its streaming checkpoint, its run files)."""
        return self.store / kind.value / flow_dir_name(flow)

    def legacy_job_dir(self, kind: JobKind, flow: str) -> Path:
        """Where earlier versions kept the flow's folder (adopted by drkit.runtime.process.adopt_legacy_dirs)."""
        return self.root / kind.value / legacy_flow_dir_name(flow)

    def pid_file(self, kind: JobKind, flow: str) -> Path:
        """Where a running job of ``kind`` for ``flow`` writes its PID."""
        return self.job_dir(kind, flow) / "pid"

    def job_lock(self, kind: JobKind, flow: str) -> Path:
        """The file a running job of ``kind`` for ``flow`` holds locked (one such job per flow)."""
        return self.job_dir(kind, flow) / "lock"

    def stream_checkpoint(self, flow: str, epoch: int = 0) -> StatePath:
        """Spark's streaming checkpoint of the flow's mirror query (offsets, commits, query id) as the holder of
        lease ``epoch`` writes it (drkit.core.mirror_lease): each holder its own copy, so a fenced process that
        still runs never writes where the new holder does. Epoch 0: the folder of versions before the lease."""
        name = "checkpoint" if epoch == 0 else f"{CHECKPOINT_EPOCH_PREFIX}{epoch}"
        return self.flow_dir(JobKind.MIRROR, flow) / name

    @staticmethod
    def checkpoint_epoch(name: str) -> int | None:
        """The lease epoch whose streaming checkpoint the folder ``name`` is (None: not a checkpoint's)."""
        if name == "checkpoint":
            return 0
        number = name.removeprefix(CHECKPOINT_EPOCH_PREFIX)
        return int(number) if name.startswith(CHECKPOINT_EPOCH_PREFIX) and number.isdigit() else None

    def mirror_states(self, flow: str) -> StatePath:
        """What the mirror knew after its latest batches (topic ids copied, partitions held), per batch."""
        return self.flow_dir(JobKind.MIRROR, flow) / "batch_state.json"

    def created_topics(self, flow: str) -> StatePath:
        """The target topics the flow's mirror created (the only ones it ever grows)."""
        return self.flow_dir(JobKind.MIRROR, flow) / "created_topics.json"

    def renewals(self, flow: str) -> StatePath:
        """Source topics deleted and created again (drkit.core.incarnation): where their new copies start."""
        return self.flow_dir(JobKind.MIRROR, flow) / "renewals.json"

    def topology_report(self, flow: str) -> StatePath:
        """The flow's latest topology reconciliation: its findings (deleted or refused topics) and when."""
        return self.flow_dir(JobKind.MIRROR, flow) / "topology.json"

    def translator_last_run(self, flow: str) -> StatePath:
        return self.flow_dir(JobKind.TRANSLATOR, flow) / "last_run.json"

    def source_ends(self, kind: JobKind, flow: str) -> StatePath:
        """The source end offsets a job last observed (the mirror at each batch, the translator each run)."""
        return self.flow_dir(kind, flow) / "source_ends.json"
