"""The status exporter's loop: ``status`` every interval, exported as gauges, until stopped.

A status that fails with a drkit error is logged and counted (``drkit_errors_total{process="status"}``) and
the loop keeps going: the exporter outlives a cluster or a state root that is gone for a while, and its
``drkit_status_last_run_timestamp_seconds`` stops moving meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from drkit import metrics  # prometheus_client: only the long-running processes serve metrics
from drkit.config import FlowConfig
from drkit.core.audit import fold
from drkit.core.ports import OperationLog
from drkit.core.status import StatusReport
from drkit.errors import DrkitError
from drkit.runtime.signals import stop_on_signals

log = logging.getLogger(__name__)

#: How many of the newest audit rows the exporter reads for its failover/failback gauges.
OPERATIONS_WINDOW = 200


def watch_status(
    report_status: Callable[[], StatusReport],
    operations: Callable[[], OperationLog],
    flows: Sequence[FlowConfig],
    interval: float,
    max_runs: int | None = None,
    on_report: Callable[[StatusReport], None] | None = None,
    stop: threading.Event | None = None,
) -> StatusReport | None:
    """``report_status()`` (the status of ``flows``) every ``interval`` seconds until SIGINT/SIGTERM (or ``stop``,
    or ``max_runs``), each report exported with the newest audited failovers and failbacks of ``operations()``
    (``drkit.metrics.record_status``) and handed to ``on_report``. Both are asked at every run (the facade
    builds its adapters on first use): one that fails fails that run only. Returns the last report (None:
    none succeeded)."""
    names = [f.name for f in flows]
    stopped = stop or threading.Event()
    last: StatusReport | None = None
    runs = 0
    with stop_on_signals(stopped):
        while not stopped.is_set() and (max_runs is None or runs < max_runs):
            runs += 1
            try:
                report = report_status()
                recent = fold(operations().recent(OPERATIONS_WINDOW))
                metrics.record_status(report, [o for o in recent if o.flow in names], time.time())
            except DrkitError as exc:
                for name in names:
                    metrics.ERRORS.labels(name, "status").inc()
                log.error("status not exported: %s", exc)
            else:
                last = report
                if on_report is not None:
                    on_report(report)
            if max_runs is None or runs < max_runs:
                stopped.wait(interval)
    return last
