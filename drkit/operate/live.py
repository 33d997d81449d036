"""Failover's newest checkpoint per partition: the ``checkpoints`` table's row or the shadow group's live one.

With ``[flows.checkpoint] follow_commits``, the translator's follower keeps each source group's newest commit in
a shadow group on the target (drkit.core.live_checkpoints): one OffsetFetch per group, all in flight at once,
reads them, and drkit.core.live_checkpoints.merge_newest keeps the newer of the two per partition. A shadow
group that does not exist is no live checkpoint (the row stands). Only the latest is read this way: a failover
``--as-of`` a past time reads the table's history alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from drkit.config import FlowConfig
from drkit.core.checkpoints import RecordedCheckpoint
from drkit.core.live_checkpoints import SHADOW_PREFIX, live_checkpoints, merge_newest, shadow_group
from drkit.core.ports import ClusterAdmin
from drkit.errors import AccessDenied, DrkitError


@dataclass(frozen=True)
class Newest:
    """The checkpoints to use, and why the live ones were left out when the target refused to show them."""

    recorded: list[RecordedCheckpoint]
    refused: str | None = None


def not_read(exc: DrkitError, then: str = "") -> str:
    """The line for live checkpoints that could not be read: the rows alone stand (older: re-reads, no loss)."""
    line = (
        f"the live checkpoints were not read ({exc}): the checkpoints table's rows alone were used, older ones "
        "re-read more"
    )
    return f"{line}; {then}" if then else line


def with_live(
    admin: ClusterAdmin,
    flow: FlowConfig,
    groups: list[str],
    recorded: list[RecordedCheckpoint],
    confirmed_at: Callable[[str], int | None],
) -> Newest:
    """``recorded`` with each partition's live checkpoint where it is newer (``admin``: the flow's target). A
    principal that may not read the shadow groups gets the rows alone and the line saying so: older checkpoints
    cost re-reads, never records, and a failover must not stop for them."""
    if not flow.checkpoint.follow_commits or not groups:
        return Newest(recorded)
    shadows = {shadow_group(flow.name, g): g for g in groups}
    try:
        offsets = admin.committed_offsets_many(shadows)
    except AccessDenied as exc:
        grant = f"grant DESCRIBE on the groups prefixed {SHADOW_PREFIX}{flow.name}. (docs/security.md, follow_commits)"
        return Newest(recorded, not_read(exc, grant))
    live = [c for name, found in offsets.items() for c in live_checkpoints(flow.name, shadows[name], found)]
    return Newest(merge_newest(recorded, live, confirmed_at) if live else recorded)
