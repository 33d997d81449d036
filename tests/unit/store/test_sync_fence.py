"""The lease's fence in offset_syncs (real Delta tables, delta-rs): an epoch taken refuses every older one's appends."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from drkit.core.offsets import SyncRange
from drkit.errors import FencedError
from drkit.layout import StateLayout
from drkit.store.offset_syncs import SyncTable, range_table

FLOW = "A->B"


def ranges(upstream: int) -> object:
    return range_table([("orders", "A.orders", 0, SyncRange(upstream, upstream + 9, upstream, upstream + 9))])


def test_each_fence_takes_the_next_epoch_and_refuses_the_older_ones_appends(tmp_path: Path) -> None:
    old, new = SyncTable(StateLayout(tmp_path)), SyncTable(StateLayout(tmp_path))
    assert old.epoch(FLOW) == 0
    first = old.fence(FLOW)
    assert first == 1 and old.write(FLOW, "s", 0, ranges(0), epoch=first) == 1
    assert new.fence(FLOW) == 2
    with pytest.raises(FencedError, match=r"epoch 2 .* this process holds epoch 1"):
        old.write(FLOW, "s", 1, ranges(10), epoch=first)
    assert not old.batch_written("s", 1)  # nothing of the fenced append was committed
    assert new.write(FLOW, "s", 1, ranges(10), epoch=2) == 1
    assert SyncTable(StateLayout(tmp_path)).epoch(FLOW) == 2
    assert SyncTable(StateLayout(tmp_path)).epoch("C->B") == 0  # per flow


def test_an_append_of_a_stale_snapshot_is_refused_after_a_concurrent_fence(tmp_path: Path) -> None:
    """The zombie read the table before the fence and commits after it: delta-rs refuses the commit for the
    same application id, and the check on the new snapshot refuses it for good."""
    zombie = SyncTable(StateLayout(tmp_path))
    epoch = zombie.fence(FLOW)
    zombie.write(FLOW, "s", 0, ranges(0), epoch=epoch)
    assert zombie.epoch(FLOW) == epoch  # its snapshot now predates the fence
    SyncTable(StateLayout(tmp_path)).fence(FLOW)
    with pytest.raises(FencedError):
        zombie.write(FLOW, "s", 1, ranges(10), epoch=epoch)
    assert not SyncTable(StateLayout(tmp_path)).batch_written("s", 1)


def test_two_processes_fencing_at_once_take_two_epochs(tmp_path: Path) -> None:
    SyncTable(StateLayout(tmp_path)).fence(FLOW)  # the table exists
    taken: list[int] = []
    start = threading.Barrier(4)

    def fence() -> None:
        table = SyncTable(StateLayout(tmp_path))
        start.wait()
        taken.append(table.fence(FLOW))

    threads = [threading.Thread(target=fence) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == [2, 3, 4, 5]
