"""Faults a test injects into the mirror, to prove what a crash or a failed copy task leaves behind.

Invariant: no fault happens unless a caller put a :class:`FaultPlan` into the mirror's context
(``drkit.mirror.context.MirrorContext.faults``, default :data:`NO_FAULTS`). Nothing in drkit builds a plan
from the environment, a file or the config: only tests do (tests/support/faulty_mirror runs the drkit CLI
with one), so no production process can be made to kill itself from outside. The driver hands the plan
to its copy tasks inside their :class:`drkit.mirror.executor.CopyTask`: an executor never looks it up.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass
from enum import StrEnum

log = logging.getLogger(__name__)


class KillPoint(StrEnum):
    """Where in a batch a plan's :class:`KillAt` kills the mirror's process (by SIGKILL, in the driver)."""

    ACKNOWLEDGED = "acknowledged"  # exactly-once: the batch's copies acknowledged, its transactions not committed
    COPIED = "copied"  # the batch's copies acknowledged by the target, its syncs not written
    SYNCED = "synced"  # its syncs durable in offset_syncs, Spark's commit not written


@dataclass(frozen=True)
class KillAt:
    """Kill the mirror at ``point`` of the first batch whose id is ``batch`` or more."""

    point: KillPoint
    batch: int = 0


@dataclass(frozen=True)
class FaultPlan:
    """The faults of one mirror run; picklable (it travels to the executors inside each copy task)."""

    kill_at: KillAt | None = None
    #: A file path: the first copy task that finds no file there creates it and fails after copying its
    #: records, so Spark retries it (whose first copies are orphans). Empty: no copy task fails.
    fail_copy_task_once: str = ""

    def kills_at(self, point: KillPoint, batch_id: int) -> bool:
        """The mirror dies at ``point`` of batch ``batch_id``."""
        return self.kill_at is not None and self.kill_at.point is point and batch_id >= self.kill_at.batch

    def fails_copy_task(self, note: str) -> bool:
        """This copy task is the one that fails on purpose: it created the marker file (writing ``note``).

        The file is created exclusively, so of tasks running at once exactly one fails."""
        if not self.fail_copy_task_once:
            return False
        try:
            with open(self.fail_copy_task_once, "x") as marker:
                marker.write(f"{note}\n")
        except FileExistsError:
            return False
        return True

    def __str__(self) -> str:
        parts = [f"kill at {self.kill_at.point}:{self.kill_at.batch}"] if self.kill_at is not None else []
        parts += [f"fail a copy task once ({self.fail_copy_task_once})"] if self.fail_copy_task_once else []
        return ", ".join(parts) or "no faults"


#: What every mirror runs with unless a test injects a plan.
NO_FAULTS = FaultPlan()


def kill_here(faults: FaultPlan, flow: str, point: KillPoint, batch_id: int) -> None:
    """A test's fault plan only: die by SIGKILL at ``point`` of the chosen batch."""
    if faults.kills_at(point, batch_id):
        log.warning("flow %s: killed at %s of batch %d (fault plan)", flow, point, batch_id)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
