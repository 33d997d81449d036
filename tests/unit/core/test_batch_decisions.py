"""The mirror batch's decisions beside its plan: whose plan it is, who reads it, what a loss says."""

from __future__ import annotations

import pytest

from drkit.core.batch import (
    DriverReadFailure,
    LostRange,
    falls_back_to_spark,
    is_sparks_plan,
    lost_message,
    plan_batch,
)


def test_a_plan_is_sparks_own_only_without_holds_renewals_or_earliest_starts_of_drkits() -> None:
    start, end = {"t": {"0": 5}}, {"t": {"0": 9}}
    assert is_sparks_plan(plan_batch(start, end, {}), start, end)
    assert not is_sparks_plan(plan_batch(start, end, {}, renewed=frozenset({"t"})), start, end)
    assert not is_sparks_plan(plan_batch(start, end, {("t", 0): 2}), start, end)
    assert not is_sparks_plan(plan_batch(start, end, {}, refused=frozenset({"t"})), start, end)


@pytest.mark.parametrize(
    ("failure", "sparks_plan", "fail_on_data_loss", "falls_back"),
    [
        (DriverReadFailure.CANNOT_READ, True, True, True),
        (DriverReadFailure.CANNOT_READ, True, False, True),
        (DriverReadFailure.CANNOT_READ, False, False, False),
        (DriverReadFailure.RECORDS_REMOVED, True, False, True),
        (DriverReadFailure.RECORDS_REMOVED, True, True, False),
        (DriverReadFailure.RECORDS_REMOVED, False, False, False),
    ],
)
def test_only_sparks_own_plan_falls_back_and_removed_records_only_when_the_loss_is_accepted(
    failure: DriverReadFailure, sparks_plan: bool, fail_on_data_loss: bool, falls_back: bool
) -> None:
    assert falls_back_to_spark(failure, sparks_plan, fail_on_data_loss) is falls_back


def test_a_lost_range_names_the_partition_and_both_offsets() -> None:
    message = lost_message("A->B", LostRange("t", 3, 90, 40))
    assert message.startswith("flow A->B: source partition t/3 went back from offset 90 to 40 without being")
