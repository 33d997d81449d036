"""The source's end offsets, observed beside the mirror in a background thread (``SourceObserver``).

Invariant: an observation never fails the mirror and never holds a batch back; each one is recorded
(``RunFiles.observe_source_ends``) before the lag gauges are set from it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from drkit import metrics
from drkit.config import FlowConfig
from drkit.core.ports import ClusterAdmin
from drkit.core.status import EndsObservation
from drkit.errors import DrkitError
from drkit.layout import JobKind
from drkit.mirror.outage import ClusterWatch
from drkit.mirror.ports import SourceEndsLog

log = logging.getLogger(__name__)


class SourceObserver:
    """The source's end offsets, observed in a background thread: right after each batch's syncs are
    written, and every ``observe_interval_seconds`` while no batch runs.

    Each observation is recorded as the mirror's knowledge of the source (``RunFiles.observe_source_ends``):
    should the source be lost, failover's RPO starts from the freshest one, taken after the syncs of the
    last batch. A round trip to the source must not hold the next batch back, hence the thread; a
    request made while one is in flight is served right after it (observations never lag a batch by more
    than one round trip). It also sets the lag gauges: records per partition, and seconds, an upper bound
    of the age of the oldest record not yet mirrored (0 when caught up; otherwise the time since the
    partition was last seen caught up or since the source timestamp of its newest mirrored record,
    whichever is later: every unmirrored record came after both), and the records mirrored per second.
    """

    RATE_WINDOW = 10.0

    def __init__(
        self, flow: FlowConfig, admin: ClusterAdmin, runs: SourceEndsLog, watch: ClusterWatch | None = None
    ) -> None:
        self.flow = flow
        self.admin = admin
        self.runs = runs
        self.interval = flow.mirror.observe_interval_seconds
        #: The source's reachability, shared with the batches: an outage is logged once, not per observation.
        self.watch = watch
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._topics: set[str] = set()
        self._next: dict[tuple[str, int], int] = {}
        self._newest_ms: dict[tuple[str, int], int] = {}
        self._caught_up: dict[tuple[str, int], float] = {}
        self._batches: deque[tuple[float, int]] = deque()
        self._thread: threading.Thread | None = None
        self.observations = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"drkit-observer-{self.flow.name}", daemon=True)
            self._thread.start()

    def after_batch(
        self,
        topic_map: dict[str, str],
        next_offsets: dict[tuple[str, int], int],
        newest_ms: dict[tuple[str, int], int],
        records: int,
    ) -> None:
        now = time.time()
        with self._lock:
            self._topics |= set(topic_map)
            for key, offset in next_offsets.items():
                self._next[key] = max(self._next.get(key, 0), offset)
            for key, ms in newest_ms.items():
                self._newest_ms[key] = max(self._newest_ms.get(key, 0), ms)
            self._batches.append((now, records))
            self._set_rate(now)
            self._idle.clear()
        self._wake.set()

    def _set_rate(self, now: float) -> None:
        while self._batches and self._batches[0][0] < now - self.RATE_WINDOW:
            self._batches.popleft()
        metrics.MIRROR_RATE.labels(self.flow.name).set(sum(n for _, n in self._batches) / self.RATE_WINDOW)

    def wait_idle(self, timeout: float) -> bool:
        """Block until the observation requested by the last batch is done (tests, shutdown)."""
        return self._idle.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        self.wait_idle(timeout)
        self._closed.set()
        self._wake.set()

    def _loop(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                self.observe()
            except Exception as exc:  # metrics must never stop the mirror
                log.warning("flow %s: source not observed: %s", self.flow.name, exc)
            finally:
                if not self._wake.is_set():
                    self._idle.set()

    def observe(self) -> None:
        with self._lock:
            topics = set(self._topics)
            self._set_rate(time.time())
        if not topics:
            return
        try:
            counts = self.admin.partition_counts()
            ends = self.admin.end_offsets({t: counts[t] for t in topics if t in counts})
        except DrkitError as exc:
            if self.watch is None:
                log.warning("flow %s: lag not measured: %s", self.flow.name, exc)
            else:
                self.watch.down(str(exc), "waiting (lag not measured)")
            return
        if self.watch is not None:
            self.watch.up("lag measured")
        at = time.time()
        try:
            self.runs.observe_source_ends(JobKind.MIRROR, self.flow.name, EndsObservation(int(at * 1000), ends))
        except OSError as exc:
            log.warning("flow %s: source ends not recorded: %s", self.flow.name, exc)
        self.observations += 1
        worst = 0.0
        with self._lock:
            for (topic, partition), end in ends.items():
                key = (topic, partition)
                lag = max(0, end - self._next.get(key, 0))
                metrics.MIRROR_LAG.labels(self.flow.name, topic, str(partition)).set(lag)
                if lag == 0:
                    self._caught_up[key] = at
                    continue
                since = max(self._caught_up.get(key, 0.0), self._newest_ms.get(key, 0) / 1000)
                if since:
                    worst = max(worst, at - since)
        metrics.MIRROR_LAG_SECONDS.labels(self.flow.name).set(worst)
