"""The target probe: does each target partition still hold what the flow's offset-syncs say?

Shared by status and failover; the decision is ``drkit.core.consistency``'s. Costs one metadata
request and one end-offset request on the target.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from drkit.core.consistency import TargetDivergence, synced_partitions, target_divergences, topics_to_read
from drkit.core.ports import ClusterAdmin, SyncProgress, TopicPartition


def target_check(
    admin: ClusterAdmin,
    progress: Mapping[TopicPartition, SyncProgress],
    target_topics: Mapping[str, str],
    wanted: Callable[[str], bool] = lambda _: True,
) -> tuple[TargetDivergence, ...]:
    """The flow's synced target partitions (of the source topics ``wanted`` accepts) that fall short;
    raises ``ClusterError`` when the target does not answer."""
    synced = synced_partitions(progress, target_topics, wanted)
    if not synced:
        return ()
    counts = admin.partition_counts()
    return target_divergences(synced, counts, admin.end_offsets(topics_to_read(synced, counts)))
