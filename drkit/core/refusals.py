"""Why a failover or failback plan is refused, in the operator's words.

Pure. The plans (drkit.core.plan) decide when a group is refused; this module names the reason and
words the refusal, and every refusal says what to do about it. A plan with a refusal is never applied.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

from drkit.core.consistency import TargetDivergence


class RefusalReason(StrEnum):
    UNKNOWN_GROUP = "unknown_group"  # no checkpoint or committed offset for the group
    BEFORE_CHECKPOINTS = "before_checkpoints"  # failover --as-of: the group's checkpoints start after that time
    ACTIVE_GROUP = "active_group"  # consumers are in the group on the destination
    STALE = "stale"  # the checkpoint is older than the flow's limit
    UNTRANSLATABLE = "untranslatable"  # nothing of the partition was mirrored
    LAGGING = "lagging"  # the reverse flow has not caught up (failback)
    NO_REVERSE_FLOW = "no_reverse_flow"  # failback: no flow copies the topics back that the group read on the target
    TARGET_DIVERGED = "target_diverged"  # the target partition holds fewer records than its syncs say


@dataclass(frozen=True)
class Refusal:
    reason: RefusalReason
    group: str
    detail: str


def unknown_group(group: str, checkpointed_later: bool = False) -> Refusal:
    """No checkpoint or committed offset for the group; ``checkpointed_later``: a failover ``--as-of`` earlier
    than the group's first checkpoint (a time too early, not a misnamed group)."""
    if checkpointed_later:
        reason, detail = (
            RefusalReason.BEFORE_CHECKPOINTS,
            f"group {group!r} has no checkpoint at the --as-of time: its checkpoints start later; give a later "
            "--as-of, or leave it out for the latest",
        )
    else:
        reason, detail = (
            RefusalReason.UNKNOWN_GROUP,
            f"no checkpoint or committed offset for group {group!r}: check the name "
            "and that the flow's groups selection includes it",
        )
    return Refusal(reason, group, detail)


def active_group(group: str, destination: str, members: Collection[str]) -> Refusal:
    """``members`` empty: the group is active with its members still joining."""
    names = ", ".join(members) or "members joining"
    return Refusal(
        RefusalReason.ACTIVE_GROUP,
        group,
        f"group {group!r} has active members on {destination} ({names}); stop those consumers first",
    )


def target_diverged(group: str, lost: TargetDivergence, destination: str, flow: str) -> Refusal:
    return Refusal(
        RefusalReason.TARGET_DIVERGED,
        group,
        f"target topic {lost.target_topic} on {destination} {lost.describe()}: it was deleted or truncated "
        f"and the syncs of flow {flow} no longer describe it; restore the topic's records, or start the "
        "flow over (see `drkit status`), then run the failover again",
    )


def untranslatable(group: str, topic: str, partition: int, committed: int) -> Refusal:
    """Failover: a source committed offset on a partition of which nothing was mirrored."""
    return Refusal(
        RefusalReason.UNTRANSLATABLE,
        group,
        f"{topic}/{partition}: committed offset {committed} "
        "cannot be translated (nothing of the partition was mirrored)",
    )


def untranslatable_back(group: str, topic: str, partition: int, offset: int, via: str) -> Refusal:
    """Failback: an offset on the cluster being left that flow ``via`` has no syncs for."""
    return Refusal(
        RefusalReason.UNTRANSLATABLE,
        group,
        f"{topic}/{partition}: offset {offset} cannot be translated back (flow {via} has no syncs for it)",
    )


def stale_detail(topic: str, partition: int, age_seconds: float, max_age_seconds: float) -> str:
    """The checkpoint's age against the flow's limit (a refusal, or a warning under --allow-stale)."""
    return f"{topic}/{partition}: checkpoint is {age_seconds:.0f}s old (limit {max_age_seconds:.0f}s)"


def stale(group: str, detail: str) -> Refusal:
    return Refusal(
        RefusalReason.STALE, group, f"{detail}; is the checkpoint process running? Use --allow-stale to accept it"
    )


def lagging(group: str, topic: str, partition: int, via: str, mirrored: int, end: int) -> Refusal:
    return Refusal(
        RefusalReason.LAGGING,
        group,
        f"{topic}/{partition}: reverse flow {via} has mirrored up to "
        f"{mirrored} of {end}; run the reverse mirror until it catches up",
    )


def no_reverse_flow(group: str, topics: Collection[str], leaving: str, destination: str) -> Refusal:
    """Refused like a lagging reverse flow: what the group read on ``topics`` exists only on the cluster
    being left, so applying would drop its position there; the operator chooses, not the plan."""
    return Refusal(
        RefusalReason.NO_REVERSE_FLOW,
        group,
        f"group {group!r} has offsets on {', '.join(sorted(topics))} on {leaving} and no reverse flow "
        f"{leaving}->{destination} is configured to bring that position back; configure flow "
        f"{leaving}->{destination} and run its mirror until it catches up, or delete the group's offsets "
        f"on those topics on {leaving} if it need not resume there",
    )
