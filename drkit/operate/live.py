"""Failover's newest checkpoint per partition: the ``checkpoints`` table's row or the follower's live one.

With ``[flows.checkpoint] follow_commits``, the translator's follower keeps each source group's newest commit as
a record of the target's checkpoint topic (drkit.core.live_checkpoints): one read of that topic gives every
group's newest, and drkit.core.live_checkpoints.merge_newest keeps the newer of the two per partition. A group
without a record (or no topic at all) has no live checkpoint (the row stands). Only the latest is read this
way: a failover ``--as-of`` a past time reads the table's history alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from drkit.config import FlowConfig
from drkit.core.checkpoints import RecordedCheckpoint
from drkit.core.live_checkpoints import CHECKPOINT_TOPIC, decode_value, merge_newest
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
    principal that may not read the checkpoint topic gets the rows alone and the line saying so: older
    checkpoints cost re-reads, never records, and a failover must not stop for them."""
    if not flow.checkpoint.follow_commits or not groups:
        return Newest(recorded)
    try:
        values = admin.live_checkpoint_values(flow.name)
    except AccessDenied as exc:
        grant = f"grant READ and DESCRIBE on topic {CHECKPOINT_TOPIC} (docs/security.md, follow_commits)"
        return Newest(recorded, not_read(exc, grant))
    if not values:
        return Newest(recorded)
    live = [c for g in groups if g in values for c in decode_value(flow.name, g, values[g])]
    return Newest(merge_newest(recorded, live, confirmed_at) if live else recorded)
