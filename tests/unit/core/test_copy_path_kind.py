"""The copy path of a mirror run: chosen once from the delivery and where copies may run."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.continuous import CopyMode, copy_mode
from drkit.core.copy_path import CopyPathKind, copy_path_kind
from drkit.core.exactly_once import Delivery


@given(st.booleans(), st.booleans(), st.booleans(), st.integers(min_value=-1, max_value=10))
def test_exactly_once_is_continuous_only_in_the_driver_where_the_copy_mode_is(
    local: bool, continuous: bool, once: bool, driver_max: int
) -> None:
    kind = copy_path_kind(Delivery.EXACTLY_ONCE, local, continuous, once, driver_max)
    continuous_run = copy_mode(local, continuous, once, driver_max) is CopyMode.CONTINUOUS
    expected = CopyPathKind.CONTINUOUS_EXACTLY_ONCE if continuous_run and local else CopyPathKind.EXACTLY_ONCE
    assert kind is expected


@given(st.booleans(), st.booleans(), st.booleans(), st.integers(min_value=-1, max_value=10))
def test_at_least_once_is_continuous_exactly_where_the_copy_mode_is(
    local: bool, continuous: bool, once: bool, driver_max: int
) -> None:
    kind = copy_path_kind(Delivery.AT_LEAST_ONCE, local, continuous, once, driver_max)
    mode = copy_mode(local, continuous, once, driver_max)
    continuous_kinds = (CopyPathKind.CONTINUOUS, CopyPathKind.CONTINUOUS_TASKS)
    assert (kind in continuous_kinds) is (mode is CopyMode.CONTINUOUS)
    assert kind not in (CopyPathKind.EXACTLY_ONCE, CopyPathKind.CONTINUOUS_EXACTLY_ONCE)
    if kind in continuous_kinds:  # the driver's copier with a local master, the copy tasks with a cluster's
        assert (kind is CopyPathKind.CONTINUOUS) is local


def test_a_one_shot_run_copies_each_batch_itself() -> None:
    assert copy_path_kind(Delivery.AT_LEAST_ONCE, True, True, True, 100) is CopyPathKind.AT_LEAST_ONCE
    assert copy_path_kind(Delivery.AT_LEAST_ONCE, True, True, False, 100) is CopyPathKind.CONTINUOUS
    assert copy_path_kind(Delivery.AT_LEAST_ONCE, False, True, True, 100) is CopyPathKind.AT_LEAST_ONCE
    assert copy_path_kind(Delivery.AT_LEAST_ONCE, False, True, False, 100) is CopyPathKind.CONTINUOUS_TASKS
