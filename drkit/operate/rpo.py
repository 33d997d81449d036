"""The RPO of a failover: how many records the mirror had not copied when the source was lost.

Live when the source answers; otherwise from the freshest observation of the source's ends (the mirror's
per batch, the translator's per run, read through the run log). Records the continuous copy put on the
target past the synced end (their origin headers tell) count as copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future

from drkit.config import FlowConfig
from drkit.core.origin import copied_through, tail_spans
from drkit.core.ports import SyncProgress, TopicPartition
from drkit.core.reach import Reach
from drkit.core.status import RpoReport, rpo_report
from drkit.errors import DrkitError, StoreError
from drkit.layout import JobKind
from drkit.operate.context import OperateContext
from drkit.operate.lag import source_ends
from drkit.operate.reach import probing


def measure_rpo(ctx: OperateContext, flow: FlowConfig, reaches: Future[dict[str, Reach]] | None = None) -> RpoReport:
    """How much the mirror had not copied: live when the source answers, else from the freshest
    observation of the source's ends (the mirror's per batch or the translator's per run). ``reaches``:
    the probe of the source (started here when not given); one that did not answer is not asked again."""
    if reaches is None:
        reaches = probing(ctx, (flow.source,))
    progress = ctx.syncs.progress(flow.name)
    live = (
        source_ends(ctx.clusters.admin(flow.source, probe=True), ctx.config.topic_selector(flow))
        if reaches.result()[flow.source].reachable
        else None
    )
    # The freshest observation, and for the produce rate the newest one before it, whichever job made them.
    try:
        seen = [o for kind in (JobKind.MIRROR, JobKind.TRANSLATOR) for o in ctx.runs.source_ends(kind, flow.name)]
    except StoreError:
        if live is None:
            raise  # the source is down: the damaged file was the only measure of the RPO
        seen = []  # the live ends measure it; the damaged file is replaced at the next observation
    observations = sorted((o for o in seen if o is not None), key=lambda o: o.at_ms, reverse=True)
    latest = observations[0] if observations else None
    previous = next((o for o in observations if latest is not None and o.at_ms < latest.at_ms), None)
    target = reaches.result().get(flow.target)
    copied = copied_past_syncs(ctx, flow, progress) if target is not None and target.reachable else {}
    return rpo_report(progress, live, latest, previous, ctx.now_ms(), copied)


def copied_past_syncs(
    ctx: OperateContext, flow: FlowConfig, progress: Mapping[TopicPartition, SyncProgress]
) -> dict[TopicPartition, int]:
    """Per source partition whose target holds records past the synced end, one past the greatest source
    offset they copy (their origin headers): the continuous copy puts records there before a batch syncs
    them. Asked only of a target the probe reached; one that fails meanwhile gives nothing (the RPO then
    counts from the syncs, as without copies ahead)."""
    try:
        admin = ctx.clusters.admin(flow.target)
        targets = ctx.syncs.target_topics(flow.name)
        starts = {key: p.last_downstream + 1 for key, p in progress.items() if key[0] in targets}
        if not starts:
            return {}
        counts = admin.partition_counts()
        ends = admin.end_offsets({t: counts[t] for t in {targets[k[0]] for k in starts} if t in counts})
        spans = tail_spans(
            starts, {key: ends[(targets[key[0]], key[1])] for key in starts if (targets[key[0]], key[1]) in ends}
        )
        out: dict[TopicPartition, int] = {}
        for key, (start, end) in sorted(spans.items()):
            through = copied_through(admin.read_tail(targets[key[0]], key[1], start, end, flow.source))
            if through is not None:
                out[key] = through
        return out
    except DrkitError:
        return {}
