"""The result of a failover or failback: the plan, how it ended, what was verified, the RPO.

What the CLI renders, notebooks show and drills check; the same object in every case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drkit.core.audit import OperationStatus
from drkit.core.plan import Plan
from drkit.core.status import RpoReport


def decide_status(plan: Plan, apply: bool, confirmed: bool | None) -> OperationStatus:
    """A plan with refusals is never applied; without ``apply`` it is a dry run; an apply the
    operator did not confirm (``confirmed`` False) changes nothing."""
    if not plan.ok:
        return OperationStatus.REFUSED
    if not apply:
        return OperationStatus.DRY_RUN
    if confirmed is False:
        return OperationStatus.DECLINED
    return OperationStatus.APPLIED


@dataclass(frozen=True)
class OperationResult:
    plan: Plan
    status: OperationStatus
    operation_id: str
    rpo: RpoReport | None = None  # failover only
    verified: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # group -> "topic/p" -> offset

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "operation_id": self.operation_id,
            "plan": self.plan.as_dict(),
            "rpo": {} if self.rpo is None else self.rpo.as_dict(),
            "verified": {g: dict(v) for g, v in self.verified.items()},
        }
