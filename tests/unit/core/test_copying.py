"""Where a batch is copied, how its partitions split into tasks, what a reader does with removed records,
and who copied (drkit.core.copying)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.batch import EARLIEST
from drkit.core.copying import (
    DRIVER_ID,
    CopyPlace,
    CopySite,
    ReadFailure,
    ReadFailureAction,
    copy_groups,
    copy_place,
    executor_id,
    is_local_master,
    may_copy_on_executors,
    planned_records,
    read_failure_action,
    speculation_refusal,
)


@pytest.mark.parametrize(
    ("master", "records", "limit", "place"),
    [
        ("local[2]", 1_000, 1_000_000, CopyPlace.DRIVER),
        ("local[*]", 1_000_000, 1_000_000, CopyPlace.DRIVER),
        ("local", 0, 10, CopyPlace.DRIVER),
        ("local[2]", 1_000_001, 1_000_000, CopyPlace.EXECUTORS),
        ("local[2]", 1, 0, CopyPlace.EXECUTORS),  # 0: never in the driver
        ("spark://127.0.0.1:7077", 1, 1_000_000, CopyPlace.EXECUTORS),
        ("k8s://https://kube:6443", 0, 1_000_000, CopyPlace.EXECUTORS),
        ("yarn", 5, 1_000_000, CopyPlace.EXECUTORS),
        ("local-cluster[2,1,1024]", 5, 1_000_000, CopyPlace.EXECUTORS),  # separate executor JVMs
    ],
)
def test_a_cluster_master_never_copies_in_the_driver_local_mode_does_for_small_batches(
    master: str, records: int, limit: int, place: CopyPlace
) -> None:
    assert copy_place(master, records, limit) is place


def test_local_masters() -> None:
    assert is_local_master("local") and is_local_master("local[4]") and is_local_master("local[*, 3]")
    assert not is_local_master("local-cluster[2,1,1024]") and not is_local_master("spark://h:7077")


@pytest.mark.parametrize(
    ("failure", "fail_on_data_loss", "action"),
    [
        (ReadFailure.RECORDS_REMOVED, True, ReadFailureAction.FAIL),
        (ReadFailure.RECORDS_REMOVED, False, ReadFailureAction.SKIP_REMOVED),
        (ReadFailure.CANNOT_READ, True, ReadFailureAction.FAIL),
        (ReadFailure.CANNOT_READ, False, ReadFailureAction.FAIL),
    ],
)
def test_removed_records_are_skipped_only_when_the_loss_is_accepted(
    failure: ReadFailure, fail_on_data_loss: bool, action: ReadFailureAction
) -> None:
    assert read_failure_action(failure, fail_on_data_loss) is action


def test_tasks_are_balanced_by_planned_records_and_never_more_than_the_partitions() -> None:
    ranges = {("t", 0): (0, 900), ("t", 1): (0, 100), ("t", 2): (0, 100), ("t", 3): (EARLIEST, 700), ("u", 0): (5, 105)}
    groups = copy_groups(ranges, 2)
    assert len(groups) == 2
    loads = sorted(sum(planned_records(*r) for r in g.values()) for g in groups)
    assert loads == [900, 1000]  # t/0 alone; t/3 (700 from its first record) with the three of 100
    assert len(copy_groups(ranges, 64)) == 5  # one task per partition, not one per slot
    assert copy_groups({}, 8) == ()
    assert copy_groups(ranges, 0) == (dict(sorted(ranges.items())),)  # no slot known: one task


RANGES = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 40)),
    st.tuples(st.integers(EARLIEST, 10_000), st.integers(1, 10_000)).map(lambda r: (r[0], max(r[0], 0) + r[1])),
    max_size=60,
)


@given(RANGES, st.integers(1, 32))
def test_every_planned_partition_is_in_exactly_one_task_whole(
    ranges: dict[tuple[str, int], tuple[int, int]], slots: int
) -> None:
    groups = copy_groups(ranges, slots)
    seen = [key for group in groups for key in group]
    assert sorted(seen) == sorted(ranges) and len(seen) == len(set(seen))
    assert all(group[key] == ranges[key] for group in groups for key in group)
    assert len(groups) == min(slots, len(ranges)) and all(groups)
    assert all(list(group) == sorted(group) for group in groups)
    # Balanced: no task holds more than the fair share plus its largest partition.
    if groups:
        total = sum(planned_records(*r) for r in ranges.values())
        largest = max(planned_records(*r) for r in ranges.values())
        assert max(sum(planned_records(*r) for r in g.values()) for g in groups) <= total / len(groups) + largest


@pytest.mark.parametrize(
    ("env", "cwd", "local", "expected"),
    [
        ({"SPARK_EXECUTOR_ID": "7"}, "/opt/spark/work-dir", False, "7"),  # a Kubernetes executor's pod
        ({}, "/var/spark/work/app-20261125203000-0001/1", False, "1"),  # a standalone worker's executor
        ({}, "/var/spark/work/app-20261125203000-0001/0/", False, "0"),
        ({}, "/home/me/project", True, DRIVER_ID),  # local mode: Spark's executor is the driver's JVM
        ({"CONTAINER_ID": "container_1_0001_01_000002"}, "/yarn/usercache", False, "container_1_0001_01_000002"),
        ({}, "/somewhere", False, "unknown"),
    ],
)
def test_the_executor_id_a_python_worker_can_see(env: dict[str, str], cwd: str, local: bool, expected: str) -> None:
    assert executor_id(env, cwd, local) == expected


def test_a_site_says_where_it_copied() -> None:
    assert CopySite(DRIVER_ID, "h", 12, -1, 3, 30).in_driver
    assert CopySite(DRIVER_ID, "h", 12, -1, 3, 30).label() == "driver (pid 12)"
    executor = CopySite("1", "worker-2", 99, 0, 3, 30)
    assert not executor.in_driver and executor.label() == "executor 1@worker-2 (pid 99)"
    assert CopySite("1", "worker-2", 99, 2, 3, 30).label() == "executor 1@worker-2 (pid 99, attempt 2)"


def test_speculation_is_refused_in_one_line() -> None:
    assert speculation_refusal(None) is None and speculation_refusal("false") is None
    refusal = speculation_refusal(" TRUE ")
    assert refusal is not None and "spark.speculation" in refusal and "\n" not in refusal


def test_the_copy_workers_are_started_with_the_query_only_where_batches_may_go_to_tasks() -> None:
    assert may_copy_on_executors("spark://m:7077", 1_000_000, 100_000)
    assert may_copy_on_executors("local[2]", 0, 100_000)
    assert may_copy_on_executors("local[2]", 1_000, 100_000) and may_copy_on_executors("local[2]", 1_000, None)
    assert not may_copy_on_executors("local[2]", 1_000_000, 100_000)  # the defaults: the driver copies
