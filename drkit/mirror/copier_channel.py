"""The connection between a mirror's driver and its long-lived copy tasks: what crosses it, and how the
tasks' right to copy follows the driver's lease.

The driver listens (drkit.mirror.copier_tasks); each copy task (drkit.mirror.copier_task) connects and
says which task it is. Messages are the frozen dataclasses below, pickled by ``multiprocessing.connection``
after its HMAC challenge with a key of 32 random bytes that the driver seals like the clients' secrets
(drkit.runtime.task_secrets: a file Spark serves over its authenticated RPC, never in a task's closure): a
peer without the key is refused before anything is unpickled. What crosses it is offsets, ranges, settings
without their secrets (a :class:`~drkit.mirror.executor.CopyTask`) and counts: never a record, never a
credential; it is not encrypted.

A task copies only while the driver lets it: it asks (:class:`Ping`) every :data:`PING_SECONDS`, the
driver answers with the seconds its lease still runs (:class:`Grant`), and the task copies until the time
it *asked* plus that: never later than the driver itself believes it holds the lease, whatever the delay
of either message, with no clock shared (only durations cross). A frozen or lost driver stops its tasks'
copies when that time passes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from drkit.core.copying import CopySite
from drkit.core.offsets import BatchRanges
from drkit.mirror.executor import CopyTask
from drkit.mirror.lanes import Taken

#: How often a task asks the driver for its grant.
PING_SECONDS = 0.1
#: The section, and the key in it, of the sealed file holding the channel's key.
CHANNEL_SECTION = "channel"
CHANNEL_KEY = "channel.authkey"


@dataclass(frozen=True)
class Hello:
    """A task's first message: which of the job's tasks it is, and where it runs."""

    task: int
    site: CopySite


@dataclass(frozen=True)
class Ping:
    seq: int


@dataclass(frozen=True)
class Grant:
    """The answer to :class:`Ping` ``seq``: the driver may copy for ``seconds`` more (0: it may not)."""

    seq: int
    seconds: float


@dataclass(frozen=True)
class Take:
    """A batch's ranges of the partitions this task owns (and the ends of those partitions)."""

    seq: int
    ranges: BatchRanges
    end: dict[tuple[str, int], int]
    topic_map: dict[str, str]
    #: the batch's client settings (public part; its secrets are in the sealed file it names)
    settings: CopyTask

    def __repr__(self) -> str:
        return f"Take({self.seq}, {len(self.ranges)} partitions)"


@dataclass(frozen=True)
class Abandon:
    """The mirror stops: the task gives up waiting for take ``seq``."""

    seq: int


@dataclass(frozen=True)
class StopReading:
    pass


@dataclass(frozen=True)
class Held:
    seq: int


@dataclass(frozen=True)
class Close:
    pass


@dataclass(frozen=True)
class Reply:
    """A task's answer to :class:`Take` (a :class:`Taken`, or None when the take was abandoned) or :class:`Held`."""

    seq: int
    taken: Taken | None = None
    held: int = 0


class GrantedLease:
    """A task's belief that it may copy: until the time it asked plus what the driver granted (module docstring);
    implements drkit.mirror.lease.LeaseStamp. Epoch 0: the driver holds no lease, the grants alone decide."""

    def __init__(self, epoch: int) -> None:
        self._epoch = epoch
        self._until = 0.0
        self._asked: dict[int, float] = {}

    @property
    def epoch(self) -> int:
        return self._epoch

    def asked(self, seq: int) -> None:
        self._asked[seq] = time.monotonic()
        for old in [s for s in self._asked if s < seq - 100]:
            del self._asked[old]

    def granted(self, grant: Grant) -> None:
        asked = self._asked.pop(grant.seq, None)
        if asked is not None:
            self._until = max(self._until, asked + grant.seconds)

    def refusal(self) -> str | None:
        if time.monotonic() < self._until:
            return None
        return "the driver has not renewed this copy task's right to copy (its lease ended, or it is gone)"

    def is_lost(self) -> bool:
        """A task cannot tell a lapse from a loss: the driver's grants resume, or the driver closes the task."""
        return False

    def remaining(self) -> float:
        return max(0.0, self._until - time.monotonic())
