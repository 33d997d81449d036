"""Every path under the state root, built in one place.

The state folder holds the Delta tables, each mirror's Spark streaming checkpoint, the PID and lock
files of running jobs and the translator's run files. Only :class:`StateLayout` joins those paths, so
two components can never disagree about where a thing lives (a flow's folder name, say).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

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
class StateLayout:
    """The paths under one state root."""

    root: Path

    # -- Delta tables ---------------------------------------------------------------------------

    @property
    def offset_syncs(self) -> str:
        return str(self.root / "delta" / "offset_syncs")

    @property
    def checkpoints(self) -> str:
        return str(self.root / "delta" / "checkpoints")

    @property
    def operations(self) -> str:
        return str(self.root / "delta" / "operations")

    @property
    def drills(self) -> str:
        return str(self.root / "delta" / "drills")

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
        return self.root / kind.value / flow_dir_name(flow)

    def legacy_job_dir(self, kind: JobKind, flow: str) -> Path:
        """Where earlier versions kept the flow's folder (adopted by drkit.runtime.process.adopt_legacy_dirs)."""
        return self.root / kind.value / legacy_flow_dir_name(flow)

    def pid_file(self, kind: JobKind, flow: str) -> Path:
        """Where a running job of ``kind`` for ``flow`` writes its PID."""
        return self.job_dir(kind, flow) / "pid"

    def job_lock(self, kind: JobKind, flow: str) -> Path:
        """The file a running job of ``kind`` for ``flow`` holds locked (one such job per flow)."""
        return self.job_dir(kind, flow) / "lock"

    def stream_checkpoint(self, flow: str) -> Path:
        """Spark's streaming checkpoint of the flow's mirror query (offsets, commits, query id)."""
        return self.job_dir(JobKind.MIRROR, flow) / "checkpoint"

    def mirror_states(self, flow: str) -> Path:
        """What the mirror knew after its latest batches (topic ids copied, partitions held), per batch."""
        return self.job_dir(JobKind.MIRROR, flow) / "batch_state.json"

    def created_topics(self, flow: str) -> Path:
        """The target topics the flow's mirror created (the only ones it ever grows)."""
        return self.job_dir(JobKind.MIRROR, flow) / "created_topics.json"

    def renewals(self, flow: str) -> Path:
        """Source topics deleted and created again (drkit.core.incarnation): where their new copies start."""
        return self.job_dir(JobKind.MIRROR, flow) / "renewals.json"

    def topology_report(self, flow: str) -> Path:
        """The flow's latest topology reconciliation: its findings (deleted or refused topics) and when."""
        return self.job_dir(JobKind.MIRROR, flow) / "topology.json"

    def translator_last_run(self, flow: str) -> Path:
        return self.job_dir(JobKind.TRANSLATOR, flow) / "last_run.json"

    def source_ends(self, kind: JobKind, flow: str) -> Path:
        """The source end offsets a job last observed (the mirror at each batch, the translator each run)."""
        return self.job_dir(kind, flow) / "source_ends.json"
