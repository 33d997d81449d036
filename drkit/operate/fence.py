"""``drkit fence``: a flow's ACLs put where its producers' side calls for, between failovers (drkit.core.fencing).

The side comes from the audit trail (:func:`drkit.core.fencing.producers_on`); the plan is the one a failover
(producers on the target) or a failback (producers on the source) would make, so a second run changes nothing.
It is how the copies are first made read-only (``read_only_copies``), how a copy the mirror created since is
fenced too, and how a source that did not answer at the failover is fenced once it is back.

Invariant: a dry run writes one row to the trail and changes no ACL. An apply records each change in the
trail as it is made (rows of the one operation, under ``fencing.applied``), so what drkit added is known
whatever fails next; only those records decide what a later failover or failback lifts.
"""

from __future__ import annotations

import socket
import uuid
from typing import Any

from drkit._version import __version__
from drkit.config import FlowConfig
from drkit.core.audit import FLOW_TRAIL_ROWS, Action, OperationRecord, OperationStatus, fold
from drkit.core.fencing import FENCING_KEY, FenceReport, FenceSide, producers_on
from drkit.core.reach import Command
from drkit.errors import ConfigError
from drkit.operate.apply import operator_user
from drkit.operate.context import OperateContext
from drkit.operate.fencing import apply_fencing, failback_fencing, failover_fencing
from drkit.operate.reach import probing, require


def fence_flow(ctx: OperateContext, flow: FlowConfig, apply: bool) -> FenceReport:
    """Plan ``flow``'s fencing for the side its producers are on and, with ``apply``, make it."""
    started = ctx.clock()
    if not flow.fencing.on:
        raise ConfigError(
            f"fence {flow.name}: the flow names no producers to fence: set [flows.fencing] producers "
            "(Kafka principals, docs/security.md); nothing was changed"
        )
    reaches = probing(ctx, (flow.source, flow.target)).result()
    require(Command.FENCE, flow, reaches)
    side = producers_on(fold(ctx.operations.list(flow.name, FLOW_TRAIL_ROWS)), flow.name)
    plan = failover_fencing(ctx, flow, reaches) if side is FenceSide.TARGET else failback_fencing(ctx, flow)
    assert plan is not None  # fencing is on
    operation = uuid.uuid4().hex
    planned = {"producers_on": side.value, FENCING_KEY: plan.as_dict()}

    def write(result: dict[str, Any], finished: bool = True) -> None:
        ctx.operations.append(
            OperationRecord(
                operation,
                Action.FENCE,
                flow.name,
                (),
                None,
                not apply,
                planned,
                result,
                operator_user(),
                socket.gethostname(),
                __version__,
                started,
                ctx.clock() if finished else None,
            )
        )

    if not apply:
        write({"status": OperationStatus.DRY_RUN.value, "error": None})
        return FenceReport(flow.name, side, plan, OperationStatus.DRY_RUN, operation)
    made: dict[str, Any] = {"applied": [], "warnings": list(plan.warnings)}

    def record(entry: dict[str, Any]) -> None:
        made.update(entry)
        write({"status": OperationStatus.APPLYING.value, FENCING_KEY: entry}, finished=False)

    try:
        apply_fencing(ctx, plan, record)
    except Exception as exc:  # a cluster refused a change midway: the rows so far say what was made
        write({"status": OperationStatus.FAILED.value, "error": str(exc), FENCING_KEY: made})
        raise
    write({"status": OperationStatus.APPLIED.value, "error": None, FENCING_KEY: made})
    return FenceReport(flow.name, side, plan, OperationStatus.APPLIED, operation)
