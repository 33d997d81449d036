"""``drkit recover``: the records a flow's failover left on its source, and how many the target holds now.

Reads the audit trail (which failover, and its RPO per partition), the offset-syncs, the source's end offsets
when it answers, the target's copies past the synced end (origin headers) when it answers; drkit.core.recovery
decides. The records are copied by the flow's mirror, run again once the source answers (runbooks/failover.md,
section 7): this report follows the gap closing. ``--dismiss`` gives up what is still missing: one audit row,
nothing changed on any cluster.
"""

from __future__ import annotations

import socket
import uuid

from drkit._version import __version__
from drkit.config import FlowConfig
from drkit.core.audit import FLOW_TRAIL_ROWS, Action, OperationRecord, OperationStatus, fold
from drkit.core.recovery import OpenGap, RecoveryReport, RecoveryVerdict, open_gap, recovery_report
from drkit.errors import RefusedError
from drkit.operate.apply import operator_user
from drkit.operate.context import OperateContext
from drkit.operate.lag import source_ends
from drkit.operate.reach import probing
from drkit.operate.rpo import copied_past_syncs


def recovery(ctx: OperateContext, flow: FlowConfig, dismiss: bool = False) -> RecoveryReport:
    """The gap of ``flow``'s open failover (drkit.core.recovery.open_gap) and what of it is on the target; with
    ``dismiss``, that gap given up (refused, nothing written, when nothing is left behind or it is not known)."""
    started = ctx.clock()
    reaches = probing(ctx, (flow.source, flow.target))
    gap = open_failover(ctx, flow)
    progress = ctx.syncs.progress(flow.name)
    reach = reaches.result()
    ends = (
        source_ends(ctx.clusters.admin(flow.source, probe=True), ctx.config.topic_selector(flow))
        if reach[flow.source].reachable
        else None
    )
    copied = copied_past_syncs(ctx, flow, progress) if gap is not None and reach[flow.target].reachable else {}
    report = recovery_report(flow.name, gap, progress, copied, ends)
    if not dismiss:
        return report
    # A gap of unknown size may be given up too: a source lost for good never tells its end.
    if gap is None or report.verdict in (RecoveryVerdict.RECOVERED, RecoveryVerdict.DISMISSED):
        raise RefusedError(f"recover {flow.name}: nothing to dismiss: {_why_not(report)}; nothing was written")
    dismissal = OperationRecord(
        uuid.uuid4().hex,
        Action.DISMISS,
        flow.name,
        (),
        None,
        False,
        {"failover_id": gap.failover.id, "partitions": [p.as_dict() for p in report.partitions]},
        {"status": OperationStatus.APPLIED.value, "error": None, "unrecovered": report.unrecovered},
        operator_user(),
        socket.gethostname(),
        __version__,
        started,
        ctx.clock(),
    )
    ctx.operations.append(dismissal)
    return recovery_report(flow.name, OpenGap(gap.failover, dismissal), progress, copied, ends)


def open_failover(ctx: OperateContext, flow: FlowConfig) -> OpenGap | None:
    """The failover whose records left behind are open (drkit.core.recovery.open_gap), from the audit trail."""
    return open_gap(fold(ctx.operations.list(flow.name, FLOW_TRAIL_ROWS)), flow.name)


def _why_not(report: RecoveryReport) -> str:
    if report.verdict is RecoveryVerdict.NO_FAILOVER:
        return "no failover since the last failback"
    if report.verdict is RecoveryVerdict.DISMISSED:
        return (
            f"the gap of failover {report.failover_id} was dismissed by {report.dismissed_by} at {report.dismissed_at}"
        )
    return "every record left behind is on the target"
