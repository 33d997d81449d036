"""Applying a plan: confirm, take the groups' lease, commit, read back, and audit every run whatever its end.

Every run, dry runs and refusals included, is appended to the audit trail. An apply writes its intent
(what it will commit) before any commit and its outcome (what reads back) after; it commits only while
it holds its groups' lease (drkit.core.lease) and the offsets it planned from have not moved, so two
applies never interleave on a group and none silently rewinds one.
"""

from __future__ import annotations

import getpass
import logging
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NoReturn

from drkit._version import __version__
from drkit.core.audit import HOOK_KEY, OperationRecord, OperationStatus, fold, last_apply, to_complete
from drkit.core.fencing import FENCING_KEY, FencingPlan
from drkit.core.hooks import should_run
from drkit.core.lease import decide_lease, open_intents
from drkit.core.outcome import OperationResult, decide_apply, decide_status, drifted
from drkit.core.plan import Plan
from drkit.core.ports import ClusterAdmin, TopicPartition
from drkit.core.status import RpoReport
from drkit.errors import DrkitError, RefusedError, StoreError
from drkit.operate.context import OperateContext
from drkit.operate.fencing import apply_fencing
from drkit.operate.groups import real_offsets
from drkit.operate.hooks import AfterApply
from drkit.runtime.signals import stop_on_signals

log = logging.getLogger(__name__)

#: The key of the fencing plan shown by every run's audit row (what the apply's ``fencing`` key made).
FENCING_PLAN_KEY = "fencing_plan"
#: Asked with the plan before an apply; False declines (nothing changes).
Confirm = Callable[[Plan], bool]


def operator_user() -> str:
    """Who runs the command, as the audit trail names them."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def finish(
    ctx: OperateContext,
    plan: Plan,
    names: list[str],
    as_of: str | None,
    apply: bool,
    confirm: Confirm | None,
    admin: ClusterAdmin,
    started: datetime,
    rpo: RpoReport | None,
    fence: tuple[str, ...] = (),
    after: AfterApply | None = None,
    fencing: FencingPlan | None = None,
) -> OperationResult:
    """Apply when asked and allowed, and record the run in the audit trail whatever happens. ``fence``: the
    transactional ids of an exactly-once mirror writing to the destination, fenced before the commits.
    ``after``: the flow's after-apply hook, run once the outcome is recorded and only when it is applied
    (drkit.core.hooks); its outcome is recorded too, and whatever it is, the offsets stay committed. ``fencing``:
    the ACL changes of ``[flows.fencing]`` (drkit.operate.fencing), shown by every run and made by an apply
    before its commits."""
    confirmed = None
    if plan.ok and apply and confirm is not None:
        confirmed = confirm(plan)
    status = decide_status(plan, apply, confirmed)
    audit = _Audit(ctx, uuid.uuid4().hex, plan, names, as_of, not apply, started, rpo, fencing)
    if status is not OperationStatus.APPLIED:
        audit.write({"status": status.value, "error": None, "verified": {}})
        return OperationResult(plan, status, audit.id, rpo, fencing=fencing)
    result = replace(_apply(ctx, plan, admin, audit, fence, fencing), fencing=fencing)
    if after is None or not should_run(result.status, audit.dry_run):
        return result
    hook = after(result)
    audit.write(audit.written[-1] | {HOOK_KEY: hook.as_dict()})
    return replace(result, hook=hook)


@dataclass(frozen=True)
class _Audit:
    """Writes the rows of one operation (one id): the intent and the outcome of an apply, or the one row."""

    ctx: OperateContext
    id: str
    plan: Plan
    names: list[str]
    as_of: str | None
    dry_run: bool
    started: datetime
    rpo: RpoReport | None
    fencing: FencingPlan | None = None
    written: list[dict[str, Any]] = field(default_factory=list)  # the results written, oldest first

    def write(self, result: dict[str, Any], intent: bool = False) -> None:
        self.written.append(result)
        self.ctx.operations.append(
            OperationRecord(
                self.id,
                self.plan.action,
                self.plan.flow,
                tuple(self.names),
                self.as_of,
                self.dry_run,
                self.plan.as_dict(),
                result
                | {"rpo": {} if self.rpo is None else self.rpo.as_dict()}
                | ({} if self.fencing is None else {FENCING_PLAN_KEY: self.fencing.as_dict()}),
                operator_user(),
                socket.gethostname(),
                __version__,
                self.started,
                None if intent else self.ctx.clock(),
            )
        )


def _apply(
    ctx: OperateContext,
    plan: Plan,
    admin: ClusterAdmin,
    audit: _Audit,
    fence: tuple[str, ...] = (),
    fencing: FencingPlan | None = None,
) -> OperationResult:
    """Record the intent, take the groups' lease, commit what differs in batches, read back, record the outcome.

    ``fence``: an exactly-once mirror's transactional ids, fenced first. A mirror that died with a transaction
    open holds its target partitions' last stable offset, so the groups (read_committed) would wait for the
    broker's transaction timeout; fencing aborts it now, and stops that mirror if it still runs. Best effort:
    a refusal is recorded and logged, and the groups are moved anyway. ``fencing``: the ACL changes, made next
    (before any commit, so no producer adds records the plan did not count), each recorded as it is made; one
    that fails fails the apply before anything is committed.

    From the intent on, SIGINT and SIGTERM only ask the apply to stop between batches: the outcome
    row is always written, naming what was committed and what was not (a rerun completes it).
    """
    planned = plan.commits()
    completes = to_complete(fold(ctx.operations.recent(HISTORY_READ)), plan.action, plan.flow, planned)
    stop, received = threading.Event(), list[int]()
    base: dict[str, Any] = {"completes": completes}
    with stop_on_signals(stop, received):
        audit.write(base | {"status": OperationStatus.APPLYING.value, "commits": _keyed(planned)}, intent=True)
        try:
            recent = ctx.operations.recent(HISTORY_READ)
            intents = open_intents(recent, ctx.operations.versions(r.id for r in recent if r.intent))
            try:
                lease = decide_lease(audit.id, intents, ctx.now_ms())
            except ValueError:
                raise StoreError(
                    f"the operations table does not show the intent of operation {audit.id} just written: nothing "
                    "was committed; check that [state] root is one folder every host sees whole, then run again"
                ) from None
            stale = tuple(i.describe() for i in lease.stale)
            base |= {"stale_intents": list(stale)}
            if not lease.granted:
                assert lease.holder is not None
                _refuse(audit, base | {"holder": lease.holder.id}, lease.refusal())
            moved = drifted(plan, _held(admin, planned))
            if moved:
                more = f" (and {len(moved) - 1} more)" if len(moved) > 1 else ""
                last = last_apply(fold(recent), planned, audit.id)
                by = "" if last is None else f" (last moved by {last.describe()})"
                _refuse(
                    audit,
                    base,
                    f"{plan.action} {plan.flow}: offsets on {plan.destination} changed since the plan was made{by}, "
                    f"{moved[0]}{more}: nothing was committed; run the command again to see the new plan",
                )
            if fence:
                base |= _fence(admin, plan, fence)
            if fencing is not None and fencing.changes:

                def made(entry: dict[str, Any]) -> None:
                    base[FENCING_KEY] = entry

                apply_fencing(ctx, fencing, made)
            errors: dict[str, str] = {}
            todo = _changes(plan)
            groups = sorted(todo)
            for i in range(0, len(groups), COMMIT_BATCH_GROUPS):
                if stop.is_set():
                    break
                errors |= admin.commit_offsets_many({g: todo[g] for g in groups[i : i + COMMIT_BATCH_GROUPS]})
            outcome = decide_apply(planned, _held(admin, planned), errors, stop.is_set())
        except RefusedError:
            raise
        except Exception as exc:  # a cluster or the store failed mid-way: what holds on the cluster is unknown
            audit.write(base | {"status": OperationStatus.FAILED.value, "error": str(exc), "verified": {}})
            raise
        result = base | {
            "status": outcome.status.value,
            "error": next(iter(outcome.errors.values()), None),
            "verified": outcome.as_dict()["committed"],
        }
        audit.write(result | outcome.as_dict())
    return OperationResult(
        plan,
        outcome.status,
        audit.id,
        audit.rpo,
        outcome.committed if outcome.status is OperationStatus.APPLIED else {},
        outcome,
        completes,
        stale,
        received[0] if received else None,
    )


#: Groups whose commits are in flight at once; a stop request (SIGINT, SIGTERM) is honoured between batches.
COMMIT_BATCH_GROUPS = 50
#: Rows read back from the audit trail to find open intents and the unfinished apply a rerun completes.
HISTORY_READ = 1000


def _fence(admin: ClusterAdmin, plan: Plan, ids: tuple[str, ...]) -> dict[str, Any]:
    """Fence ``ids`` on the destination (see ``_apply``); what to record of it."""
    try:
        admin.fence_transactions(ids)
    except DrkitError as exc:
        log.warning(
            "%s %s: the mirror's transactions were not fenced (%s): a transaction it left open holds its target "
            "partitions until the broker's transaction timeout",
            plan.action,
            plan.flow,
            exc,
        )
        return {"fenced": [], "fence_error": str(exc)}
    return {"fenced": list(ids)}


def _refuse(audit: _Audit, base: dict[str, Any], message: str) -> NoReturn:
    audit.write(base | {"status": OperationStatus.REFUSED.value, "error": message, "verified": {}})
    raise RefusedError(message)


def _held(
    admin: ClusterAdmin, planned: Mapping[str, Mapping[TopicPartition, int]]
) -> dict[str, dict[TopicPartition, int]]:
    now = admin.committed_offsets_many(planned)
    return {group: real_offsets(now.get(group, [])) for group in planned}


def _changes(plan: Plan) -> dict[str, dict[TopicPartition, int]]:
    """Only what differs from the destination's offsets: a rerun commits what an earlier apply left."""
    out: dict[str, dict[TopicPartition, int]] = {}
    for m in plan.moves:
        if m.changes and m.new is not None:
            out.setdefault(m.group, {})[(m.to_topic, m.partition)] = m.new
    return out


def _keyed(commits: Mapping[str, Mapping[TopicPartition, int]]) -> dict[str, dict[str, int]]:
    return {g: {f"{t}/{p}": o for (t, p), o in sorted(offsets.items())} for g, offsets in sorted(commits.items())}
