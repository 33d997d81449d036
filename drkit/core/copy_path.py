"""Which copy path a mirror run takes: chosen once, from the flow's delivery and where copies may run.

Invariant: continuous only where drkit.core.continuous.copy_mode allows it (never a one-shot run; in the
driver with a local master that lets it copy, in long-lived copy tasks with a cluster master); exactly-once
continuous only in the driver (its copier writes the slots' transactions with the driver's own slot
producers, which a batch that copies its own records shares; copy tasks on executors copy exactly-once per
batch); every other run copies each batch's own records.
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
    #: the driver copies as records arrive in the slots' transactions, committed as they flow; batches take the
    #: committed copies
    CONTINUOUS_EXACTLY_ONCE = "continuous_exactly_once"


def copy_path_kind(
    delivery: Delivery, local_master: bool, continuous: bool, once: bool, driver_max_records: int
) -> CopyPathKind:
    """The path of a mirror run of a flow with ``delivery``, asking for the continuous copy or not."""
    continuous_run = copy_mode(local_master, continuous, once, driver_max_records) is CopyMode.CONTINUOUS
    if delivery is Delivery.EXACTLY_ONCE:
        return CopyPathKind.CONTINUOUS_EXACTLY_ONCE if continuous_run and local_master else CopyPathKind.EXACTLY_ONCE
    if continuous_run:
        return CopyPathKind.CONTINUOUS if local_master else CopyPathKind.CONTINUOUS_TASKS
    return CopyPathKind.AT_LEAST_ONCE
