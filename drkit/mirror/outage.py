"""A cluster of a running mirror that stops answering: one log line when it goes, one when it is back.

Invariant: whoever notices (the batch that failed, the observer of the source's ends) reports to the
same ``ClusterWatch``, so an outage of any length is two lines in the log, never one per retry; and a
wait (``wait_until_reachable``) gives up at once when the mirror is stopping.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from drkit.core.outage import FailedBatch, OutageAction, backoff_seconds, outage_action
from drkit.errors import FencedError
from drkit.mirror.failure import FencedMirrorError, failure_message, looks_like_outage
from drkit.mirror.reader import ABANDONED_MARKER, BatchAbandoned

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long one probe of a cluster may take (a frozen or blackholed broker answers nothing: a timeout).
PROBE_SECONDS = 5.0
#: How often a wait asks whether the mirror is stopping.
STOP_CHECK_SECONDS = 0.25


class Renewable(Protocol):
    """A client that can drop its connections so the next request makes new ones (``KafkaAdmin.renew``)."""

    def renew(self) -> None: ...


class ClusterWatch:
    """Whether one cluster of a flow answers, as last seen; logs each change once."""

    def __init__(self, flow: str, role: str, alias: str, admins: tuple[Renewable, ...] = ()) -> None:
        self.flow = flow
        self.role = role  # "source" or "target"
        self.alias = alias
        #: the flow's long-lived admin clients of this cluster, renewed when a batch failed on a cluster that
        #: answers a fresh probe (a stale client may be what failed)
        self.admins = admins
        self._lock = threading.Lock()
        self._since: float | None = None  # wall-clock time it was first seen not answering

    @property
    def down_since(self) -> float | None:
        return self._since

    def down(self, cause: str, what: str = "waiting") -> None:
        with self._lock:
            if self._since is not None:
                return
            self._since = time.time()
        at = datetime.fromtimestamp(self._since, UTC).isoformat(timespec="seconds")
        log.warning(
            "flow %s: %s %s unreachable since %s, %s (%s)", self.flow, self.role, self.alias, at, what, cause[:300]
        )

    def renew(self) -> None:
        for admin in self.admins:
            admin.renew()

    def up(self, what: str = "resuming") -> None:
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            log.warning(
                "flow %s: %s %s reachable again after %.0fs, %s",
                self.flow,
                self.role,
                self.alias,
                time.time() - since,
                what,
            )


def wait_until_reachable(
    watch: ClusterWatch,
    reachable: Callable[[float], bool],
    stopping: Callable[[], bool],
    cause: str,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Probe ``watch``'s cluster with a bounded backoff until it answers (True), or until the mirror is
    stopping (False). Two log lines at most, whatever the outage's length."""
    watch.down(cause)
    attempt = 0
    while True:
        if stopping():
            return False
        if reachable(PROBE_SECONDS):
            watch.up()
            return True
        pause = backoff_seconds(attempt)
        attempt += 1
        while pause > 0:  # in slices: a stop is seen within a quarter of a second
            if stopping():
                return False
            sleep(min(STOP_CHECK_SECONDS, pause))
            pause -= STOP_CHECK_SECONDS


class Reachability(Protocol):
    def reachable(self, alias: str, timeout: float) -> bool: ...


def through_outages(
    flow: str,
    batch_id: int,
    attempt: Callable[[], T],
    once: bool,
    clusters: Reachability,
    watches: tuple[ClusterWatch, ClusterWatch],
    stopping: Callable[[], bool],
) -> T:
    """``attempt`` until it succeeds; after a failure, wait for a cluster that does not answer and try
    again (drkit.core.outage decides). Each attempt starts the batch over: what a failed one delivered
    stays on the target (a re-copy of a batch Spark did not commit: at-least-once, never a loss)."""
    source_watch, target_watch = watches
    quick = 0
    while True:
        try:
            return attempt()
        except (BatchAbandoned, FencedMirrorError, FencedError):
            raise
        except Exception as exc:
            if once:
                raise
            source_up = clusters.reachable(source_watch.alias, PROBE_SECONDS)
            target_up = not source_up or clusters.reachable(target_watch.alias, PROBE_SECONDS)
            failed = FailedBatch(False, source_up, target_up, looks_like_outage(str(exc)), quick)
            action = outage_action(failed)
            if action is OutageAction.FAIL:
                raise
            cause = failure_message(exc)
            if action is OutageAction.RETRY:
                quick += 1
                for each in watches:  # both answer a fresh client: the next attempt gets fresh ones too
                    each.renew()
                log.warning(
                    "flow %s: batch %d failed (%s); both clusters answer: copying it again",
                    flow,
                    batch_id,
                    cause[:300],
                )
                continue
            watch = source_watch if action is OutageAction.WAIT_FOR_SOURCE else target_watch
            if not wait_until_reachable(watch, functools.partial(clusters.reachable, watch.alias), stopping, cause):
                raise BatchAbandoned(f"{ABANDONED_MARKER}the mirror is stopping") from None
            quick = 0
            log.info("flow %s: batch %d is copied again", flow, batch_id)
