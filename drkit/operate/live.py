"""Failover's newest checkpoint per partition: the ``checkpoints`` table's row or the shadow group's live one.

With ``[flows.checkpoint] follow_commits``, the translator's follower keeps each source group's newest commit in
a shadow group on the target (drkit.core.live_checkpoints): one OffsetFetch per group, all in flight at once,
reads them, and drkit.core.live_checkpoints.merge_newest keeps the newer of the two per partition. A shadow
group that does not exist is no live checkpoint (the row stands). Only the latest is read this way: a failover
``--as-of`` a past time reads the table's history alone.
"""

from __future__ import annotations

from collections.abc import Callable

from drkit.config import FlowConfig
from drkit.core.checkpoints import RecordedCheckpoint
from drkit.core.live_checkpoints import live_checkpoints, merge_newest, shadow_group
from drkit.core.ports import ClusterAdmin


def with_live(
    admin: ClusterAdmin,
    flow: FlowConfig,
    groups: list[str],
    recorded: list[RecordedCheckpoint],
    confirmed_at: Callable[[str], int | None],
) -> list[RecordedCheckpoint]:
    """``recorded`` with each partition's live checkpoint where it is newer (``admin``: the flow's target)."""
    if not flow.checkpoint.follow_commits or not groups:
        return recorded
    shadows = {shadow_group(flow.name, g): g for g in groups}
    offsets = admin.committed_offsets_many(shadows)
    live = [c for name, found in offsets.items() for c in live_checkpoints(flow.name, shadows[name], found)]
    return merge_newest(recorded, live, confirmed_at) if live else recorded
