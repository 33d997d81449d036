"""Target partitions that no longer hold what their offset-syncs say (drkit.core.consistency)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.consistency import (
    DivergenceKind,
    SyncedPartition,
    divergence_message,
    synced_partitions,
    target_divergences,
    topics_to_read,
)
from drkit.core.ports import SyncProgress


def synced(partition: int = 0, last_downstream: int = 29, topic: str = "orders") -> SyncedPartition:
    return SyncedPartition(topic, f"A.{topic}", partition, last_downstream, last_downstream)


@pytest.mark.parametrize(
    ("counts", "ends", "expected"),
    [
        ({"A.orders": 1}, {("A.orders", 0): 30}, []),  # holds exactly the synced copies
        ({"A.orders": 1}, {("A.orders", 0): 45}, []),  # and more (unsynced copies, later batches)
        ({"A.orders": 1}, {("A.orders", 0): 29}, [(DivergenceKind.BELOW_SYNCED_END, 29)]),  # truncated
        ({"A.orders": 1}, {("A.orders", 0): 0}, [(DivergenceKind.BELOW_SYNCED_END, 0)]),  # recreated
        ({}, {}, [(DivergenceKind.TOPIC_MISSING, None)]),  # deleted
        ({"other": 3}, {}, [(DivergenceKind.TOPIC_MISSING, None)]),
        ({"A.orders": 1}, {}, []),  # no end offset reported: unknown, not evidence
    ],
)
def test_one_partition(
    counts: dict[str, int], ends: dict[tuple[str, int], int], expected: list[tuple[DivergenceKind, int | None]]
) -> None:
    found = target_divergences([synced()], counts, ends)
    assert [(d.kind, d.end) for d in found] == expected
    assert all((d.target_topic, d.partition, d.synced_end) == ("A.orders", 0, 30) for d in found)


def test_a_partition_beyond_the_topics_count_is_missing() -> None:
    [d] = target_divergences([synced(0), synced(2)], {"A.orders": 2}, {("A.orders", 0): 30, ("A.orders", 1): 0})
    assert (d.kind, d.partition, d.end) == (DivergenceKind.PARTITION_MISSING, 2, None)


@given(
    st.dictionaries(
        st.integers(0, 5),
        st.tuples(st.integers(0, 1_000), st.one_of(st.none(), st.integers(0, 1_100))),
        max_size=6,
    ),
    st.one_of(st.none(), st.integers(0, 8)),
)
def test_flagged_exactly_where_the_target_falls_short(
    parts: dict[int, tuple[int, int | None]], count: int | None
) -> None:
    """A partition is flagged iff its topic or partition is gone or its end is below the synced end."""
    rows = [synced(p, last) for p, (last, _) in parts.items()]
    counts = {} if count is None else {"A.orders": count}
    ends = {("A.orders", p): end for p, (_, end) in parts.items() if end is not None and count and p < count}
    flagged = {d.partition for d in target_divergences(rows, counts, ends)}
    expected = {
        p for p, (last, end) in parts.items() if count is None or p >= count or (end is not None and end < last + 1)
    }
    assert flagged == expected


def test_synced_partitions_keeps_the_wanted_topics_with_a_known_target() -> None:
    progress = {
        ("orders", 0): SyncProgress(29, 31, None),
        ("audit", 0): SyncProgress(5, 5, None),
        ("lost", 0): SyncProgress(1, 1, None),
    }
    rows = synced_partitions(progress, {"orders": "A.orders", "audit": "A.audit"}, lambda t: t != "audit")
    assert rows == (SyncedPartition("orders", "A.orders", 0, 29, 31),)
    assert topics_to_read(rows, {"A.orders": 3}) == {"A.orders": 3}
    assert topics_to_read(rows, {}) == {}


def test_the_message_names_topic_cluster_numbers_and_what_to_do() -> None:
    found = target_divergences([synced(0), synced(1, 9)], {"A.orders": 2}, {("A.orders", 0): 0, ("A.orders", 1): 4})
    text = divergence_message("A->B", "B", found)
    assert "\n" not in text
    assert text.startswith(
        "target topic A.orders on B holds fewer records than its offset-syncs say "
        "(partition 0: end 0, synced up to 29; partition 1: end 4, synced up to 9): it was deleted or truncated"
    )
    assert "drkit does not recreate it" in text and "new [state] root" in text and "exclude orders" in text


def test_the_message_for_a_deleted_topic() -> None:
    text = divergence_message("A->B", "B", target_divergences([synced()], {}, {}))
    assert text.startswith("target topic A.orders on B does not exist (partition 0: missing, synced up to 29)")


def test_no_divergence_no_message() -> None:
    assert divergence_message("A->B", "B", ()) == ""
