"""The audit trail's records: every failover and failback, dry runs and refusals included.

A record is written whatever happened, so the trail answers "who moved which groups where, when,
and what did drkit report" without gaps. An apply writes two rows with one id: the intent
(``applying``: what it is about to commit) before any offset is committed, and the outcome after;
an operation whose last row is its intent never recorded an end (the process was killed, or it
is still running). An applied operation with an after-apply hook writes a third row after the hook:
the outcome again, with the hook's outcome under ``hook``. :func:`fold` gives one record per
operation, its latest stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

#: Rows of one flow's audit trail read to find its state (the bindings fencing added, the open failover): up to
#: three per operation (intent, outcome, hook). A binding added longer ago is never lifted (a DENY left in place,
#: never one deleted that drkit did not add); a failover longer ago is not one whose gap is open.
FLOW_TRAIL_ROWS = 5_000
#: The key of an outcome row's result under which the row written after the hook holds its outcome.
HOOK_KEY = "hook"


class Action(StrEnum):
    FAILOVER = "failover"
    FAILBACK = "failback"
    FENCE = "fence"  # drkit fence: ACLs only (drkit.core.fencing), no group moved
    DISMISS = "dismiss"  # drkit recover --dismiss: the records a failover left behind given up (drkit.core.recovery)


class OperationStatus(StrEnum):
    """How an operation ended."""

    DRY_RUN = "dry_run"  # planned and shown, nothing changed
    REFUSED = "refused"  # a safety check refused the plan, nothing changed
    DECLINED = "declined"  # the operator did not confirm, nothing changed
    APPLIED = "applied"  # committed and read back
    FAILED = "failed"  # an error while applying, nothing read back at the planned offsets (the record holds it)
    PARTIAL = "partial"  # some partitions read back at the planned offsets, others not (the record names both)
    INTERRUPTED = "interrupted"  # SIGINT or SIGTERM stopped the apply before every partition was committed
    APPLYING = "applying"  # the intent row of an apply: written before any commit, followed by the outcome row

    @property
    def unfinished(self) -> bool:
        """An apply that left the groups between their old and planned offsets: a rerun completes it."""
        return self in _UNFINISHED


_UNFINISHED = frozenset(
    {OperationStatus.FAILED, OperationStatus.PARTIAL, OperationStatus.INTERRUPTED, OperationStatus.APPLYING}
)


#: The statuses of an apply that may have moved groups (see ``OperationRecord.moved_groups``).
_MOVED = frozenset(s.value for s in (OperationStatus.APPLIED, OperationStatus.PARTIAL, OperationStatus.INTERRUPTED))


@dataclass(frozen=True)
class OperationRecord:
    id: str
    action: Action
    flow: str
    groups: tuple[str, ...]
    as_of: str | None
    dry_run: bool
    plan: Mapping[str, Any]
    result: Mapping[str, Any]
    user: str
    host: str
    drkit_version: str
    started_at: datetime
    finished_at: datetime | None

    @property
    def status(self) -> str | None:
        value = self.result.get("status")
        return None if value is None else str(value)

    def describe(self) -> str:
        return f"{self.action} {self.flow} (operation {self.id[:12]}, {self.user}@{self.host})"

    @property
    def intent(self) -> bool:
        return self.status == OperationStatus.APPLYING.value

    @property
    def moved_groups(self) -> bool:
        """A failover or failback that may have moved groups: applied, partial, or interrupted (an interrupted
        apply stops between batches of commits). A dry run, a refusal, a declined or failed apply (nothing reads
        back as planned), a ``fence`` and a ``dismiss`` moved nothing."""
        moves = self.action in (Action.FAILOVER, Action.FAILBACK)
        return moves and not self.dry_run and self.status in _MOVED

    @property
    def stage(self) -> int:
        """The order of an operation's rows: its intent (0), its outcome (1), its after-apply hook's (2), which
        repeats the outcome with the hook's (drkit.core.hooks)."""
        if HOOK_KEY in self.result:
            return 2
        return 0 if self.intent else 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": self.action.value,
            "flow": self.flow,
            "groups": list(self.groups),
            "as_of": self.as_of,
            "dry_run": self.dry_run,
            "user": self.user,
            "host": self.host,
            "drkit_version": self.drkit_version,
            "started_at": self.started_at.isoformat(),
            "finished_at": None if self.finished_at is None else self.finished_at.isoformat(),
            "plan": dict(self.plan),
            "result": dict(self.result),
        }


def fold(records: Iterable[OperationRecord]) -> list[OperationRecord]:
    """One record per operation id, in the order of first appearance: its latest stage's row (the hook's
    row after an applied outcome, else the outcome, else the intent of an apply that never recorded its
    end), whatever order the rows come in (rows of one operation share their start time)."""
    by_id: dict[str, OperationRecord] = {}
    for r in records:
        held = by_id.get(r.id)
        if held is None or r.stage > held.stage:
            by_id[r.id] = r
    return list(by_id.values())


def to_complete(records: Iterable[OperationRecord], action: Action, flow: str, groups: Iterable[str]) -> str | None:
    """The id of the operation a new apply of ``action`` on ``flow`` for ``groups`` completes: the newest
    apply (``records`` newest first, folded) of the same action and flow on any of those groups, when it
    ended unfinished (interrupted, partial, failed, or no outcome); None when the newest ended otherwise."""
    wanted = set(groups)
    for r in records:
        if r.action is not action or r.flow != flow or r.dry_run or not wanted & set(r.groups):
            continue
        status = r.status
        if status in (OperationStatus.REFUSED.value, OperationStatus.DECLINED.value, OperationStatus.DRY_RUN.value):
            continue  # changed nothing: look further back
        return r.id if status is not None and OperationStatus(status).unfinished else None
    return None


def last_apply(records: Iterable[OperationRecord], groups: Iterable[str], other_than: str) -> OperationRecord | None:
    """The newest apply (``records`` newest first, folded) on any of ``groups`` other than ``other_than``
    that may have committed offsets: the operation to name when a plan finds its groups moved."""
    wanted = set(groups)
    changed = {OperationStatus.APPLIED.value} | {s.value for s in _UNFINISHED}
    return next(
        (r for r in records if r.id != other_than and r.status in changed and wanted & set(r.groups)),
        None,
    )
