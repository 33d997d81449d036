"""The mirror batch's decisions beside its plan: what a loss says."""

from __future__ import annotations

from drkit.core.batch import LostRange, lost_message


def test_a_lost_range_names_the_partition_and_both_offsets() -> None:
    message = lost_message("A->B", LostRange("t", 3, 90, 40))
    assert message.startswith("flow A->B: source partition t/3 went back from offset 90 to 40 without being")
