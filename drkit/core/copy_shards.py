"""Which copy task copies which partition, when a cluster's executors copy records as they arrive.

With a cluster master the continuous copy runs in long-lived Spark tasks (drkit.mirror.copier_tasks), each
with its own lanes (drkit.mirror.continuous); the driver gives each partition to one task (its owner) and
asks each task for the copies of the partitions it owns.

Invariants:

* **One owner, alive.** Every partition of the plan has exactly one owner, and it is a task connected now;
  with no task connected nothing is owned (the batch copies its own records).
* **A lane moves only when it must.** A partition keeps its owner while that task lives: a lane that moves
  starts again from the plan on its new owner and what the old one held becomes orphans (duplicates with no
  sync). So partitions move only from a task that is gone, and to even out the load when tasks differ by
  more than one partition (a task that came back after its executor was lost).
* **Deterministic.** The same owners, partitions and tasks give the same assignment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set

from drkit.core.batch import Partition
from drkit.core.offsets import BatchRanges


def assign(owners: Mapping[Partition, int], partitions: Iterable[Partition], live: Set[int]) -> dict[Partition, int]:
    """The owner of each of ``partitions`` among the ``live`` tasks, keeping ``owners`` where they live."""
    wanted = sorted(set(partitions))
    if not live:
        return {}
    load = dict.fromkeys(sorted(live), 0)
    result: dict[Partition, int] = {}
    for key in wanted:
        owner = owners.get(key)
        if owner in load:
            result[key] = owner
            load[owner] += 1
    for key in wanted:
        if key not in result:
            least = min(load, key=lambda task: (load[task], task))
            result[key] = least
            load[least] += 1
    while True:
        most = max(load, key=lambda task: (load[task], -task))
        least = min(load, key=lambda task: (load[task], task))
        if load[most] - load[least] <= 1:
            return result
        moved = max(key for key, task in result.items() if task == most)
        result[moved] = least
        load[most] -= 1
        load[least] += 1


def split(
    ranges: BatchRanges, end: Mapping[Partition, int], owners: Mapping[Partition, int]
) -> dict[int, tuple[BatchRanges, dict[Partition, int]]]:
    """Each owner's part of a batch: its planned ranges and the ends of the partitions it owns (a lane of a
    partition it no longer owns is then one whose end it is not given: drkit.core.continuous.lane_changes
    drops it)."""
    parts: dict[int, tuple[BatchRanges, dict[Partition, int]]] = {
        task: ({}, {}) for task in sorted(set(owners.values()))
    }
    for key, span in ranges.items():
        parts[owners[key]][0][key] = span
    for key, offset in end.items():
        task = owners.get(key)
        if task is not None:
            parts[task][1][key] = offset
    return parts
