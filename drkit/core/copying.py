"""Where and how a mirror micro-batch is copied, once the driver planned its ranges (drkit.core.batch).

Invariants:

* With a cluster master (``spark://``, ``k8s://``, ``yarn``, ``mesos://``...) no record flows through the
  driver: every batch is copied by Spark tasks on the executors. With ``local[...]`` a batch of at most
  ``driver_copy_max_records`` planned offsets is copied by the driver itself (no Spark job: faster for
  the small batches of a steady flow), a larger one by tasks.
* The tasks of one batch split its partitions: every planned partition belongs to exactly one task, whole
  (its range ``[since, until)`` is never split), so each target partition receives its records in source
  order from one producer; tasks are balanced by planned records.
* A read that meets records removed from the source (retention, delete-records) goes on past them only
  when the flow accepts the loss (``fail_on_data_loss = false``); anything else the reader cannot settle
  fails the batch.
* Spark's speculative execution (a second copy of a running task) is refused: both attempts would
  produce the same records, and only one is described by the syncs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from drkit.core.offsets import BatchRanges

#: The executor id Spark gives its driver (and the one executor of ``local[...]``).
DRIVER_ID = "driver"


class CopyPlace(StrEnum):
    """Who copies a batch's records."""

    DRIVER = "driver"  # the driver's own reader and producer, no Spark job
    EXECUTORS = "executors"  # one Spark job; each task reads and produces whole partitions


def is_local_master(master: str) -> bool:
    """Whether Spark runs in this one process (``local``, ``local[4]``, ``local[*]``, ``local-cluster`` is not)."""
    return master == "local" or master.startswith("local[")


def copy_place(master: str, planned_records: int, driver_max_records: int) -> CopyPlace:
    """Where a batch of ``planned_records`` offsets is copied (see the module docstring); 0 never copies
    in the driver."""
    if not is_local_master(master) or driver_max_records <= 0:
        return CopyPlace.EXECUTORS
    return CopyPlace.DRIVER if planned_records <= driver_max_records else CopyPlace.EXECUTORS


def may_copy_on_executors(master: str, driver_max_records: int, max_offsets_per_trigger: int | None) -> bool:
    """Whether a mirror's batches may go to copy tasks (so its Python workers are worth starting with the
    query): always with a cluster master; in local mode when a batch may plan more offsets than the
    driver copies itself (a new partition counts from offset 0, so even the default may, rarely)."""
    if not is_local_master(master) or driver_max_records <= 0:
        return True
    return max_offsets_per_trigger is None or max_offsets_per_trigger > driver_max_records


class ReadFailure(StrEnum):
    """Why a reader could not read a planned range as it is."""

    RECORDS_REMOVED = "records_removed"  # retention or delete-records removed records not yet mirrored
    CANNOT_READ = "cannot_read"  # a fatal or permanent client error (a topic gone, an authorization)


class ReadFailureAction(StrEnum):
    FAIL = "fail"  # the batch fails before Spark commits it, in one line
    SKIP_REMOVED = "skip_removed"  # go on from the partition's first record still on the source


def read_failure_action(failure: ReadFailure, fail_on_data_loss: bool) -> ReadFailureAction:
    """What a reader does when it cannot read a range as planned: removed records are skipped only when
    the flow accepts the loss (Spark's ``failOnDataLoss`` rule); anything else fails the batch."""
    if failure is ReadFailure.RECORDS_REMOVED and not fail_on_data_loss:
        return ReadFailureAction.SKIP_REMOVED
    return ReadFailureAction.FAIL


def planned_records(since: int, until: int) -> int:
    """An upper bound of a range's records (a range from EARLIEST counts from offset 0)."""
    return max(0, until - max(since, 0))


def copy_groups(ranges: BatchRanges, slots: int) -> tuple[BatchRanges, ...]:
    """The batch's partitions split into at most ``slots`` tasks (one per partition when there are fewer),
    balanced by planned records: largest partition first onto the least loaded task. Each task's
    partitions keep their order; empty tasks are not made."""
    keys = sorted(ranges)
    if not keys:
        return ()
    n = max(1, min(slots, len(keys)))
    loads = [0] * n
    groups: list[dict[tuple[str, int], tuple[int, int]]] = [{} for _ in range(n)]
    for key in sorted(keys, key=lambda k: (-planned_records(*ranges[k]), k)):
        i = min(range(n), key=lambda j: (loads[j], j))
        groups[i][key] = ranges[key]
        loads[i] += planned_records(*ranges[key])
    return tuple(dict(sorted(g.items())) for g in groups if g)


@dataclass(frozen=True)
class CopySite:
    """Where one part of a batch was copied: Spark's executor id (``driver`` in local mode, where the
    driver's JVM is the one executor), the host, the copying Python process and the task's attempt
    number (0 for the first attempt; -1 when the driver copied without a Spark job)."""

    executor_id: str
    host: str
    pid: int
    attempt: int
    partitions: int
    records: int

    @property
    def in_driver(self) -> bool:
        return self.attempt < 0

    def label(self) -> str:
        if self.in_driver:
            return f"driver (pid {self.pid})"
        retry = f", attempt {self.attempt}" if self.attempt else ""
        return f"executor {self.executor_id}@{self.host} (pid {self.pid}{retry})"


#: A standalone worker runs each executor in ``<work dir>/<application id>/<executor id>``.
_STANDALONE_DIR = re.compile(r"[/\\](app-[^/\\]+)[/\\]([^/\\]+)$")


def executor_id(env: Mapping[str, str], cwd: str, local: bool) -> str:
    """Spark's id of the executor a Python worker serves, from what the worker can see: Kubernetes sets
    ``SPARK_EXECUTOR_ID`` in an executor's pod; a standalone worker starts the executor (and so its Python
    workers) in ``.../app-<id>/<executor id>``; YARN names the container; local mode's executor is the
    driver. Otherwise unknown (the site's host and pid still name the process)."""
    if env.get("SPARK_EXECUTOR_ID"):
        return env["SPARK_EXECUTOR_ID"]
    match = _STANDALONE_DIR.search(cwd.rstrip("/\\"))
    if match:
        return match.group(2)
    if local:
        return DRIVER_ID
    if env.get("CONTAINER_ID"):
        return env["CONTAINER_ID"]
    return "unknown"


def speculation_refusal(value: str | None) -> str | None:
    """Why the mirror cannot run with Spark's ``spark.speculation`` set to ``value``, or None."""
    if value is not None and value.strip().lower() == "true":
        return (
            "spark.speculation is true: a speculative copy task would produce the same records twice, only one "
            "attempt described by the offset-syncs; remove it from [spark] conf (or spark-defaults) for the mirror"
        )
    return None
