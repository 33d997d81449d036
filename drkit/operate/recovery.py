"""``drkit recover``: the records a flow's failover left on its source, and how many the target holds now.

Reads only: the audit trail (which failover, and its RPO per partition), the offset-syncs, the source's end
offsets when it answers, the target's copies past the synced end (origin headers) when it answers;
drkit.core.recovery decides. The records are copied by the flow's mirror, run again once the source
answers (runbooks/failover.md, "Records left behind"): this report follows the gap closing.
"""

from __future__ import annotations

from drkit.config import FlowConfig
from drkit.core.audit import OperationRecord, fold
from drkit.core.recovery import RecoveryReport, gap_failover, recovery_report
from drkit.operate.context import OperateContext
from drkit.operate.lag import source_ends
from drkit.operate.reach import probing
from drkit.operate.rpo import copied_past_syncs

#: Audit rows read to find the flow's open failover (up to three per operation: intent, outcome, hook).
AUDIT_ROWS = 3_000


def recovery(ctx: OperateContext, flow: FlowConfig) -> RecoveryReport:
    """The gap of ``flow``'s open failover (drkit.core.recovery.gap_failover) and what of it is on the target."""
    reaches = probing(ctx, (flow.source, flow.target))
    failover = open_failover(ctx, flow)
    progress = ctx.syncs.progress(flow.name)
    reach = reaches.result()
    ends = (
        source_ends(ctx.clusters.admin(flow.source, probe=True), ctx.config.topic_selector(flow))
        if reach[flow.source].reachable
        else None
    )
    copied = copied_past_syncs(ctx, flow, progress) if failover is not None and reach[flow.target].reachable else {}
    return recovery_report(flow.name, failover, progress, copied, ends)


def open_failover(ctx: OperateContext, flow: FlowConfig) -> OperationRecord | None:
    """The failover whose records left behind are open (drkit.core.recovery.gap_failover), from the audit trail."""
    return gap_failover(fold(ctx.operations.list(flow.name, AUDIT_ROWS)), flow.name)
