"""The source probe: how far the source is ahead of what the mirror recorded.

Written once for status, offsets and failover: read the source's end offsets of the flow's
topics with a short timeout; an unreachable source is ``None`` (the callers say so), never an
error that stops a failover, which must work with the source gone.
"""

from __future__ import annotations

from collections.abc import Mapping

from drkit.core.ports import ClusterAdmin, SyncProgress, TopicPartition
from drkit.core.selection import NameSelector
from drkit.core.status import unmirrored_positions
from drkit.errors import ClusterError

#: Lagging partitions whose oldest unmirrored record is looked up (each costs a fetch).
OLDEST_LOOKUPS = 200


def source_ends(admin: ClusterAdmin, topics: NameSelector) -> dict[TopicPartition, int] | None:
    """End offsets (read_committed) of the selected topics' partitions; None when unreachable."""
    try:
        counts = admin.partition_counts()
        return admin.end_offsets({t: counts[t] for t in topics.select(counts)})
    except ClusterError:
        return None


def oldest_unmirrored(
    admin: ClusterAdmin, progress: Mapping[TopicPartition, SyncProgress], ends: Mapping[TopicPartition, int] | None
) -> dict[TopicPartition, int]:
    """Timestamps of the first unmirrored record of lagging partitions (source reachable only)."""
    if ends is None:
        return {}
    positions = unmirrored_positions(progress, ends)
    if not positions:
        return {}
    try:
        return admin.first_timestamps(dict(sorted(positions.items())[:OLDEST_LOOKUPS]))
    except ClusterError:
        return {}
