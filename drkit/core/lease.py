"""Who may apply to a group: the lease an apply's intent row holds on its groups.

Invariant: of two applies whose open intents share a group, at most one is granted, and it is the
one whose intent was committed to the ``operations`` table first (the lower Delta commit version; the
table orders every writer, on every host sharing the state root). An intent is open until its
operation's outcome row is written. An open intent older than :data:`LEASE_SECONDS` is stale: its
process was killed or lost before recording an end. It no longer blocks, and it is reported (in the
new operation's warnings and result), never silently taken over. Pure: the store reads the rows and
their commit versions, this module decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from drkit.core.audit import OperationRecord, fold

#: How long an intent without an outcome holds its groups. An apply commits in seconds (one admin
#: request per group, all in flight at once, with a 30 s timeout): an intent this old is a process that died.
LEASE_SECONDS = 600.0


@dataclass(frozen=True)
class Intent:
    """An open intent: an apply that has not recorded its outcome."""

    id: str
    action: str
    flow: str
    groups: frozenset[str]
    user: str
    host: str
    started_ms: float
    version: int | None  # the Delta commit of the intent row; None: older than the versions read

    def describe(self) -> str:
        return f"{self.action} {self.flow} (operation {self.id[:12]}, {self.user}@{self.host})"

    def order(self) -> tuple[int, str]:
        """Earlier first; an unknown version is older than every known one; the id breaks a tie."""
        return (-1 if self.version is None else self.version, self.id)


@dataclass(frozen=True)
class LeaseDecision:
    granted: bool
    holder: Intent | None = None  # refused: the operation that holds the group first
    group: str | None = None  # refused: a group both applies would commit
    stale: tuple[Intent, ...] = ()  # open intents on the same groups older than the lease: reported

    def refusal(self) -> str:
        assert self.holder is not None and self.group is not None
        return (
            f"group {self.group} is being moved by {self.holder.describe()}, started first: "
            "wait for it to end (see `drkit history`), then run the command again to see the new plan"
        )


def open_intents(records: Iterable[OperationRecord], versions: Mapping[str, int]) -> list[Intent]:
    """Every operation whose last row is its intent, with its commit version where ``versions`` has it."""
    return [
        Intent(
            r.id,
            r.action.value,
            r.flow,
            frozenset(r.groups),
            r.user,
            r.host,
            r.started_at.timestamp() * 1000,
            versions.get(r.id),
        )
        for r in fold(records)
        if r.intent
    ]


def decide_lease(
    mine: str, intents: Iterable[Intent], now_ms: float, lease_seconds: float = LEASE_SECONDS
) -> LeaseDecision:
    """Whether the apply whose intent is ``mine`` may commit, given every open intent (its own included)."""
    found = list(intents)
    own = next((i for i in found if i.id == mine), None)
    if own is None:  # its own intent is not visible: never commit on a lease that cannot be shown
        raise ValueError(f"intent {mine} is not among the open intents")
    rivals = [i for i in found if i.id != mine and i.groups & own.groups]
    stale = tuple(sorted((i for i in rivals if now_ms - i.started_ms > lease_seconds * 1000), key=Intent.order))
    live = [i for i in rivals if i not in stale and i.order() < own.order()]
    if live:
        holder = min(live, key=Intent.order)
        return LeaseDecision(False, holder, min(holder.groups & own.groups), stale)
    return LeaseDecision(True, stale=stale)
