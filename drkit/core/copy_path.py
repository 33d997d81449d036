"""Which copy path a mirror run takes: chosen once, from the flow's delivery and where copies may run.

Invariant: exactly-once is never continuous (the continuous copier's idempotent producer cannot write the
slots' transactions); continuous only where drkit.core.continuous.copy_mode allows it (never a one-shot run;
in the driver with a local master that lets it copy, in long-lived copy tasks with a cluster master); every
other run copies each batch's own records.
"""

from __future__ import annotations

from enum import StrEnum

from drkit.core.continuous import CopyMode, copy_mode
from drkit.core.exactly_once import Delivery


class CopyPathKind(StrEnum):
    AT_LEAST_ONCE = "at_least_once"  # each batch copies its own records with idempotent producers
    EXACTLY_ONCE = "exactly_once"  # each batch in transactions of its slots, committed before its syncs
    CONTINUOUS = "continuous"  # the driver copies as records arrive; batches take its copies
    CONTINUOUS_TASKS = "continuous_tasks"  # a cluster's long-lived copy tasks copy as records arrive; the same


def copy_path_kind(
    delivery: Delivery, local_master: bool, continuous: bool, once: bool, driver_max_records: int
) -> CopyPathKind:
    """The path of a mirror run of a flow with ``delivery``, asking for the continuous copy or not."""
    if delivery is Delivery.EXACTLY_ONCE:
        return CopyPathKind.EXACTLY_ONCE
    if copy_mode(local_master, continuous, once, driver_max_records) is CopyMode.CONTINUOUS:
        return CopyPathKind.CONTINUOUS if local_master else CopyPathKind.CONTINUOUS_TASKS
    return CopyPathKind.AT_LEAST_ONCE
