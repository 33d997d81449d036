"""The result of a failover or failback: the plan, how it ended, what was verified, the RPO.

What the CLI renders, notebooks show and drills check; the same object in every case. How an apply
ended is decided from what was planned and what the destination reads back, never from what was
sent: a partition is committed when the broker holds the planned offset, whatever the commit
requests said (an interrupted request may have landed, a refused group holds its old offsets).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drkit.core.audit import HOOK_KEY, OperationStatus
from drkit.core.fencing import FENCING_KEY, FencingPlan
from drkit.core.hooks import HookOutcome
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


Offsets = Mapping[str, Mapping[tuple[str, int], int]]  # group -> (topic, partition) -> offset


def _key(tp: tuple[str, int]) -> str:
    return f"{tp[0]}/{tp[1]}"


@dataclass(frozen=True)
class ApplyOutcome:
    """How an apply ended, partition by partition (keys ``topic/partition``, as in the audit row)."""

    status: OperationStatus
    committed: Mapping[str, Mapping[str, int]]  # group -> partition -> the planned offset, read back
    not_committed: Mapping[str, Mapping[str, Mapping[str, int | None]]]  # group -> partition -> planned, held
    errors: Mapping[str, str]  # group -> why the destination refused its commit

    @property
    def counts(self) -> tuple[int, int]:
        """(partitions committed, partitions planned)."""
        done = sum(len(v) for v in self.committed.values())
        return done, done + sum(len(v) for v in self.not_committed.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "committed": {g: dict(v) for g, v in self.committed.items()},
            "not_committed": {g: {k: dict(x) for k, x in v.items()} for g, v in self.not_committed.items()},
            "errors": dict(self.errors),
        }


def decide_apply(planned: Offsets, held: Offsets, errors: Mapping[str, str], stopped: bool) -> ApplyOutcome:
    """Compare every planned partition with what the destination holds after the apply.

    ``held``: the groups' offsets read back; ``errors``: the groups whose commit the destination refused;
    ``stopped``: a signal stopped the apply before every group was sent. Every planned partition
    read back at its planned offset: applied (even when stopped: nothing is missing). Otherwise
    interrupted when stopped, partial when some partition is committed, failed when none is.
    """
    committed: dict[str, dict[str, int]] = {}
    missing: dict[str, dict[str, dict[str, int | None]]] = {}
    for group in sorted(planned):
        now = held.get(group, {})
        for tp, want in sorted(planned[group].items()):
            got = now.get(tp)
            if got == want:
                committed.setdefault(group, {})[_key(tp)] = want
            else:
                missing.setdefault(group, {})[_key(tp)] = {"planned": want, "held": got}
    if not missing:
        status = OperationStatus.APPLIED
    elif stopped:
        status = OperationStatus.INTERRUPTED
    elif committed:
        status = OperationStatus.PARTIAL
    else:
        status = OperationStatus.FAILED
    return ApplyOutcome(status, committed, missing, {g: errors[g] for g in sorted(errors)})


def drifted(plan: Plan, held: Offsets) -> list[str]:
    """The partitions whose offset on the destination is no longer the one the plan was made from
    (another apply, or a consumer, moved them since): committing the plan could rewind them."""
    out = []
    for m in plan.moves:
        if m.new is None:
            continue
        now = held.get(m.group, {}).get((m.to_topic, m.partition))
        if now != m.current and now != m.new:
            out.append(
                f"group {m.group} {m.to_topic}/{m.partition}: {'-' if m.current is None else m.current} -> {now}"
            )
    return out


@dataclass(frozen=True)
class OperationResult:
    plan: Plan
    status: OperationStatus
    operation_id: str
    rpo: RpoReport | None = None  # failover only
    verified: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # group -> "topic/p" -> offset
    outcome: ApplyOutcome | None = None  # an apply: what was committed and what was not
    completes: str | None = None  # the unfinished apply (interrupted, partial, failed) this one completes
    stale: tuple[str, ...] = ()  # intents on the same groups past their lease, never ended: reported
    signal: int | None = None  # interrupted: the number of the signal that stopped the apply
    hook: HookOutcome | None = None  # applied, with an after-apply hook configured: how it ended
    fencing: FencingPlan | None = None  # [flows.fencing]: the ACL changes planned (an apply made them)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "status": self.status.value,
            "operation_id": self.operation_id,
            "plan": self.plan.as_dict(),
            "rpo": {} if self.rpo is None else self.rpo.as_dict(),
            "verified": {g: dict(v) for g, v in self.verified.items()},
        }
        if self.outcome is not None:
            out |= self.outcome.as_dict() | {"completes": self.completes, "stale_intents": list(self.stale)}
        if self.hook is not None:
            out[HOOK_KEY] = self.hook.as_dict()
        if self.fencing is not None:
            out[FENCING_KEY] = self.fencing.as_dict()
        return out
