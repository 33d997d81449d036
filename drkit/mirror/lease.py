"""A mirror process's hold on its flow's lease: stand by until it may claim, take an epoch, renew, gate the copies.

drkit.core.mirror_lease decides (the fold of the lease topic's entries); this module acts. A process:

1. stands by: reads the flow's entries, beats every renewal interval (``drkit status`` lists it), and claims
   when no lease runs at the broker's latest time it read. A standby whose settings differ from the active's
   is refused in one line naming the first difference: two processes of one flow must copy the same way;
2. after its claim is the holder's, takes the flow's next epoch in ``offset_syncs`` (the fence: from then on
   no older process can append a sync), and only then returns: the caller may start copying;
3. renews from a thread; it believes it holds the lease until :func:`~drkit.core.mirror_lease.believed_until`
   of its latest accepted renewal. :meth:`MirrorLease.refusal` is what every copy checks before producing:
   past that time it refuses (the lease *lapsed*: a target that does not answer, say) until a renewal is
   accepted again; once another process's claim was read it refuses for good (the lease was *lost*) and
   :attr:`MirrorLease.lost` is set: the runner stops the flow in one line.

A process frozen (SIGSTOP) past its lease wakes up believing nothing: its belief ended with the lease, on
its own clock, before anyone could claim.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from drkit.core.mirror_lease import (
    Instance,
    LeaseAct,
    LeaseEntry,
    LeaseView,
    believed_until,
    fold,
    renewal_accepted,
    settings_difference,
)
from drkit.errors import DrkitError, FencedError, RefusedError

log = logging.getLogger(__name__)

#: How often a standby beats once the holder's lease is within one renewal interval of its end.
NEAR_END_BEAT_SECONDS = 0.1

#: The environment variable naming this host to the other mirror processes (a pod's name, say); default:
#: the host name.
HOST_ENV = "DRKIT_HOST"


def this_instance() -> Instance:
    """This process, with an id unique to its run."""
    host = os.environ.get(HOST_ENV) or socket.gethostname()
    return Instance(uuid.uuid4().hex[:12], host, os.getpid())


class LeaseLapsed(DrkitError):
    """The lease was not renewed in time: no copy until a renewal is accepted again (retried like an outage)."""

    exit_code = 5


class LeaseStamp(Protocol):
    """What a copy asks of the lease: the epoch to write on each copy, and whether it may copy now."""

    @property
    def epoch(self) -> int: ...

    def refusal(self) -> str | None: ...

    def is_lost(self) -> bool:
        """Whether a refusal is final (another process took over), not a lapse that a renewal may end."""
        ...

    def remaining(self) -> float: ...


class LeaseEntries(Protocol):
    """The flow's entries on the target's lease topic (drkit.kafka.lease_log)."""

    alias: str

    def ensure(self) -> None: ...

    def append(
        self,
        act: LeaseAct,
        instance: Instance,
        lease_ms: int,
        claim: int = -1,
        epoch: int = 0,
        settings: Mapping[str, str] | None = None,
    ) -> int: ...

    def read(self, wait: float) -> list[LeaseEntry]: ...

    def read_through(self, offset: int, wait: float) -> list[LeaseEntry]: ...

    def close(self) -> None: ...


class Fence(Protocol):
    """Where a new holder takes its epoch (``offset_syncs``: drkit.store.offset_syncs)."""

    def fence(self, flow: str) -> int: ...


class MirrorLease:
    """One flow's lease, as held (or waited for) by this process."""

    def __init__(
        self,
        flow: str,
        entries: LeaseEntries,
        fence: Fence,
        instance: Instance,
        settings: Mapping[str, str],
        lease_ms: int,
        renew_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.flow, self.instance, self.settings = flow, instance, dict(settings)
        self.lease_ms, self.renew_ms = lease_ms, renew_ms
        self._entries, self._fence, self._clock = entries, fence, clock
        self.view = LeaseView()
        self.claim = -1
        self.epoch = 0
        self._until = 0.0
        #: Set when another process took the lease: for good, the flow stops.
        self.lost = threading.Event()
        self.lost_reason = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._view_lock = threading.Lock()

    # -- standing by --------------------------------------------------------------------------------

    def acquire(self, stop: threading.Event, wait: bool = True) -> bool:
        """Stand by until this process holds the lease and fenced (True), or until ``stop`` (False). Without
        ``wait`` (a one-shot run), a lease whose holder is alive (it renewed since) is refused in one line
        instead; a lease left by a process that died is waited out either way."""
        self._entries.ensure()
        self._read(self.lease_ms / 1000)  # to the end: who holds the lease now
        said = False
        next_beat = 0.0
        #: The end of each holder's lease when first seen: a holder is alive once it moved it (it renewed). A
        #: holder killed just before this process started is not refused for, only waited out.
        first_seen: dict[tuple[str, int], int] = {}
        while not stop.is_set():
            holder = self.view.holder
            alive = False
            if holder is not None and holder.instance.id != self.instance.id:
                seen = first_seen.setdefault((holder.instance.id, holder.claim), holder.ends_ms)
                alive = holder.ends_ms > seen
            if holder is not None and alive:
                difference = settings_difference(self.settings, holder.settings)
                if difference is not None:
                    raise RefusedError(
                        f"flow {self.flow}: this mirror's settings differ from the active mirror's "
                        f"({holder.instance.describe()}, epoch {holder.epoch}): {difference}; start it with the "
                        "same flow settings"
                    )
            if self.view.claimable():
                sent = self._clock()
                offset = self._entries.append(LeaseAct.CLAIM, self.instance, self.lease_ms, settings=self.settings)
                self._apply(self._entries.read_through(offset, self.lease_ms / 1000))
                if self.view.holds(self.instance.id, offset):
                    self.claim, self._until = offset, believed_until(sent, self.lease_ms)
                    self.epoch = self._fence.fence(self.flow)
                    self.renew()  # the epoch on the topic at once: status names it
                    log.info(
                        "flow %s: this mirror (%s) holds the lease: epoch %d",
                        self.flow,
                        self.instance.describe(),
                        self.epoch,
                    )
                    return True
                continue
            if not wait and holder is not None and alive:
                raise RefusedError(
                    f"flow {self.flow} has an active mirror ({holder.instance.describe()}, epoch {holder.epoch}): a "
                    "one-shot run does not stand by; stop it first or run without --once to stand by"
                )
            if not said and holder is not None and alive:  # a process that died is waited out silently
                said = True
                log.warning(
                    "flow %s: standing by: the active mirror is %s (epoch %d); taking over within %.1fs of its end",
                    self.flow,
                    holder.instance.describe(),
                    holder.epoch,
                    self.lease_ms / 1000,
                )
            now = self._clock()
            if now >= next_beat:
                # A beat tells the broker's time: near the holder's end they come often, so the claim follows it.
                near = holder is not None and holder.ends_ms - self.view.now_ms <= self.renew_ms
                next_beat = now + (NEAR_END_BEAT_SECONDS if near else self.renew_ms / 1000)
                self._entries.append(LeaseAct.STANDBY, self.instance, self.lease_ms, settings=self.settings)
            self._read(min(0.05, self.renew_ms / 4000))
        return False

    # -- holding ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Renew from a thread until :meth:`release`."""
        self._thread = threading.Thread(target=self._renewing, name=f"drkit-lease-{self.flow}", daemon=True)
        self._thread.start()

    def refusal(self) -> str | None:
        """Why this process may not copy now (None: it may): the lease lapsed or was lost."""
        if self.lost.is_set():
            return self.lost_reason
        if self.claim < 0:
            return f"flow {self.flow}: this mirror does not hold the lease"
        if self._clock() >= self._until:
            return f"flow {self.flow}: the lease (epoch {self.epoch}) lapsed: it was not renewed in time"
        return None

    def is_lost(self) -> bool:
        return self.lost.is_set()

    def check(self) -> None:
        """Raise when this process may not copy now (:class:`FencedError` once lost, else a lapse)."""
        reason = self.refusal()
        if reason is None:
            return
        if self.lost.is_set():
            raise FencedError(reason)
        raise LeaseLapsed(reason)

    def wait_held(self, stop: Callable[[], bool], timeout: float) -> bool:
        """Wait while the lease is lapsed (renewals are being tried): True once this process may copy, False when
        ``stop()`` said so first; raises if the lease was lost, or is still lapsed after ``timeout``."""
        deadline = self._clock() + timeout
        while self.refusal() is not None and not self.lost.is_set() and self._clock() < deadline:
            if stop():
                return False
            time.sleep(0.05)
        self.check()
        return True

    def remaining(self) -> float:
        """Seconds this process still believes it holds the lease (0 when not)."""
        return 0.0 if self.refusal() is not None else max(0.0, self._until - self._clock())

    def release(self) -> None:
        """Stop renewing and end the lease at once (a standby takes over without waiting for it to run out)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.lease_ms / 1000)
        if self.claim >= 0 and not self.lost.is_set():
            try:
                self._entries.append(LeaseAct.RELEASE, self.instance, self.lease_ms, claim=self.claim, epoch=self.epoch)
            except DrkitError as exc:  # the standby waits for the lease to run out instead
                log.warning("flow %s: the lease could not be released (%s): it runs out by itself", self.flow, exc)
        self._until = 0.0
        self._entries.close()

    def _renewing(self) -> None:
        failing = False
        while not self._stop.wait(self.renew_ms / 1000):
            try:
                self.renew()
                if failing:
                    failing = False
                    log.warning("flow %s: the lease is renewed again (epoch %d)", self.flow, self.epoch)
            except DrkitError as exc:
                if not failing:
                    failing = True
                    log.warning("flow %s: renewing the lease failed (%s); trying again", self.flow, exc)
            if self.lost.is_set():
                return

    def renew(self) -> None:
        """One renewal, as the renewing thread makes it: accepted, the lease runs on; the lease taken by another
        process, :attr:`lost` is set. A cluster that does not answer raises (the thread tries again)."""
        sent = self._clock()
        offset = self._entries.append(LeaseAct.RENEW, self.instance, self.lease_ms, claim=self.claim, epoch=self.epoch)
        read = self._entries.read_through(offset, self.lease_ms / 1000)
        self._apply(read)
        renewal = next((e for e in read if e.offset == offset), None)
        if renewal is not None and renewal_accepted(self.view, self.instance.id, self.claim, renewal):
            self._until = max(self._until, believed_until(sent, self.lease_ms))
        elif not self.view.holds(self.instance.id, self.claim):
            holder = self.view.holder
            self._until = 0.0
            self.lost_reason = (
                f"flow {self.flow}: the lease (epoch {self.epoch}) was taken over by "
                f"{'nobody yet' if holder is None else holder.instance.describe()}: this mirror stopped copying"
            )
            self.lost.set()

    # -- reading ------------------------------------------------------------------------------------

    def _read(self, wait: float) -> None:
        self._apply(self._entries.read(wait))

    def _apply(self, entries: list[LeaseEntry]) -> None:
        with self._view_lock:
            self.view = fold(self.view, entries)
