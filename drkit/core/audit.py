"""The audit trail's record: one row per failover or failback, dry runs and refusals included.

A record is written whatever happened (applied, refused, declined, failed), so the trail answers
"who moved which groups where, when, and what did drkit report" without gaps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class Action(StrEnum):
    FAILOVER = "failover"
    FAILBACK = "failback"


class OperationStatus(StrEnum):
    """How an operation ended."""

    DRY_RUN = "dry_run"  # planned and shown, nothing changed
    REFUSED = "refused"  # a safety check refused the plan, nothing changed
    DECLINED = "declined"  # the operator did not confirm, nothing changed
    APPLIED = "applied"  # committed and read back
    FAILED = "failed"  # an error while applying (the record holds it)


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
