"""What a cluster says about a consumer group: its state and members.

Kafka refuses offset commits for a group with members, and a commit racing a live consumer would
be overwritten by it, so every plan that moves a group asks :attr:`GroupState.active` first.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Kafka group states in which consumers are (or are becoming) members.
ACTIVE_STATES = frozenset({"STABLE", "PREPARINGREBALANCE", "COMPLETINGREBALANCE", "ASSIGNING", "RECONCILING"})


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str

    def __str__(self) -> str:
        return f"{self.client_id}@{self.host}"


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # Kafka's group state: Empty, Stable, PreparingRebalance, Dead, Unknown, ...
    members: tuple[Member, ...] = ()

    @property
    def active(self) -> bool:
        """True when consumers are in the group: committing offsets for it would race with them."""
        return bool(self.members) or self.state.upper() in ACTIVE_STATES
