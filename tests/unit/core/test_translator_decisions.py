"""The translator run's decisions apart from translation: bounds to read, groups confirmed, forward commits."""

from __future__ import annotations

from drkit.core.checkpoints import Checkpoint, CommittedOffset
from drkit.core.offsets import SyncRange
from drkit.core.translate import Position, SyncIndex
from drkit.core.translator import confirmed_groups, forward_commits, translated_by_group, unmirrored_partitions


def checkpoint(group: str, partition: int, downstream: int | None) -> Checkpoint:
    position = Position.UNMIRRORED if downstream is None else Position.MIRRORED
    return Checkpoint("A->B", group, "t", "A.t", partition, 10, downstream, position)


def test_only_selected_partitions_with_a_real_offset_and_no_syncs_need_their_bounds() -> None:
    committed = {
        "g": [CommittedOffset("g", "t", 0, 5), CommittedOffset("g", "t", 1, 5), CommittedOffset("g", "t", 2, -1001)],
        "h": [CommittedOffset("h", "other", 0, 3)],
    }
    indexes = {("t", 0): SyncIndex([SyncRange(0, 9, 0, 9)])}
    assert unmirrored_partitions(committed, {"t": "A.t"}, indexes) == {("t", 1)}


def test_a_group_is_confirmed_only_with_a_real_commit() -> None:
    committed = {"b": [CommittedOffset("b", "t", 0, 0)], "a": [CommittedOffset("a", "t", 0, -1001)], "c": []}
    assert confirmed_groups(committed) == ["b"]


def test_checkpoints_without_a_translation_are_not_committed() -> None:
    by_group = translated_by_group([checkpoint("g", 0, 7), checkpoint("g", 1, None), checkpoint("h", 0, None)])
    assert list(by_group) == ["g"] and [c.partition for c in by_group["g"]] == [0]


def test_commits_only_move_a_target_group_forward() -> None:
    checkpoints = [checkpoint("g", 0, 7), checkpoint("g", 1, 7), checkpoint("g", 2, 7), checkpoint("g", 3, None)]
    current = {("A.t", 0): 3, ("A.t", 1): 7, ("A.t", 2): 9}
    assert forward_commits(checkpoints, current) == {("A.t", 0): 7}
    assert forward_commits(checkpoints, {}) == {("A.t", 0): 7, ("A.t", 1): 7, ("A.t", 2): 7}
