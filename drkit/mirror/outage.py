"""A cluster of a running mirror that stops answering: one log line when it goes, one when it is back.

Invariant: whoever notices (the batch that failed, the observer of the source's ends) reports to the
same ``ClusterWatch``, so an outage of any length is two lines in the log, never one per retry; and a
wait (``wait_until_reachable``) gives up at once when the mirror is stopping.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from drkit.core.outage import backoff_seconds

log = logging.getLogger(__name__)

#: How long one probe of a cluster may take (a frozen or blackholed broker answers nothing: a timeout).
PROBE_SECONDS = 5.0
#: How often a wait asks whether the mirror is stopping.
STOP_CHECK_SECONDS = 0.25


class ClusterWatch:
    """Whether one cluster of a flow answers, as last seen; logs each change once."""

    def __init__(self, flow: str, role: str, alias: str) -> None:
        self.flow = flow
        self.role = role  # "source" or "target"
        self.alias = alias
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
