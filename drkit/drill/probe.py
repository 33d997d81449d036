"""A probe drill: a failover of one group rehearsed on the clusters as they run, with no outage.

Steps (each timed): check the flow's mirror holds its lease and the group has checkpoints; read the group's
committed offsets and the ends on the source; plan the group's failover with the facade's ``plan_failover``
(the code ``drkit failover`` runs); commit the planned offsets to a drill group on the target
(drkit.core.probe.drill_group); read from there as the group would, until every record of the window was read
or the wait ended; read the source's records; account for every record (drkit.core.probe).

What it never does: commit to the group itself, on either cluster; write a record to any topic; leave a drill
group behind (this run's is deleted when it ends, whatever happened; an interrupted run's, by the next probe of
the group).
Bad input (no mirror holding the lease, a group without checkpoints, a target refusing the drill group's
commit) is one line and changes nothing.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from drkit._version import __version__
from drkit.core.mirror_lease import LeaseView, fold, lease_report
from drkit.core.probe import (
    PartitionEvidence,
    ProbeBudget,
    ProbeReport,
    ProbeTimings,
    ReadRecord,
    SourceRecord,
    drill_group,
    drill_group_prefix,
    judge_partition,
    judge_probe,
    partition_done,
)
from drkit.core.refusals import RefusalReason
from drkit.errors import ClusterError, DrkitError, RefusedError
from drkit.kafka import probe_reads

if TYPE_CHECKING:
    from drkit.config import ClusterConfig, DrkitConfig, FlowConfig
    from drkit.core.plan import Plan
    from drkit.core.ports import ClusterAdmin
    from drkit.operate.context import OperateContext

Key = tuple[str, int]
#: Per partition, at most this many records beyond the window are read (re-reads before it included).
READ_CAP_MARGIN = 100_000
#: How long reading the source's window may take.
SOURCE_READ_SECONDS = 120.0

ReadSource = Callable[["ClusterConfig", str, Mapping[Key, tuple[int, int]], float], dict[Key, list[SourceRecord]]]
ReadAsGroup = Callable[
    ["ClusterConfig", str, str, Sequence[Key], str, Callable[[Key, Sequence[ReadRecord], bool], bool], float, int],
    tuple[dict[Key, list[ReadRecord]], float | None],
]


class ProbeFacade(Protocol):
    """What a probe asks of the facade (``drkit.service.Drkit``)."""

    @property
    def config(self) -> DrkitConfig: ...

    @property
    def context(self) -> OperateContext: ...

    def plan_failover(self, flow: str, groups: list[str] | None) -> Plan: ...


@dataclass(frozen=True)
class ProbeRequest:
    flow: FlowConfig
    group: str
    max_records: int = 10_000  # per partition: the window's length at most
    wait_seconds: float = 30.0
    budget: ProbeBudget = field(default_factory=ProbeBudget)


def _ms(since: float) -> int:
    return round((time.monotonic() - since) * 1000)


class Probe:
    def __init__(
        self,
        facade: ProbeFacade,
        request: ProbeRequest,
        read_source: ReadSource = probe_reads.read_source,
        read_as_group: ReadAsGroup = probe_reads.read_as_group,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.facade = facade
        self.request = request
        self.read_source = read_source
        self.read_as_group = read_as_group
        self.clock_ms = clock_ms
        self.id = uuid.uuid4().hex[:12]

    def run(self) -> ProbeReport:
        flow, group = self.request.flow, self.request.group
        ctx = self.facade.context
        started_ms = self.clock_ms()
        target = ctx.clusters.admin(flow.target)
        source = ctx.clusters.admin(flow.source)
        self._require_mirror(ctx, flow)
        began = time.monotonic()
        plan = self.facade.plan_failover(flow.name, [group])
        unknown = [r for r in plan.refusals if r.reason is RefusalReason.UNKNOWN_GROUP]
        if unknown:
            raise RefusedError(
                f"group {group!r} has no checkpoints in flow {flow.name}: nothing to probe; run `drkit checkpoint` "
                "for the flow (and check the flow's groups selection includes it)"
            )
        plan_ms = _ms(began)
        # A group active on the target would be refused by failover, and says nothing of what it would read.
        refusals = tuple(f"{r.reason.value}: {r.detail}" for r in plan.refusals)
        moves = [m for m in plan.moves if m.group == group and m.new is not None]
        untranslated = [f"{m.from_topic}/{m.partition}" for m in plan.moves if m.group == group and m.new is None]
        warnings = [f"not translatable now, not probed: {', '.join(untranslated)}"] if untranslated else []
        committed = {(o.topic, o.partition): o.offset for o in source.committed_offsets(group) if o.offset >= 0}
        topics = sorted({m.from_topic for m in moves})
        counts = source.partition_counts()
        ends = source.end_offsets({t: counts[t] for t in topics if t in counts})
        probed = []
        for m in moves:
            key = (m.from_topic, m.partition)
            if key not in committed or key not in ends:
                warnings.append(f"{m.from_topic}/{m.partition}: no committed offset on {flow.source} now, not probed")
                continue
            c = committed[key]
            probed.append((m, c, min(ends[key], c + self.request.max_records)))
        # An interrupted probe's drill group goes first; then this one's, whatever happens.
        leftovers = [g for g in target.list_groups() if g.startswith(drill_group_prefix(flow.name, group))]
        self._delete(target, leftovers)
        name = drill_group(flow.name, group, self.id)
        try:
            began = time.monotonic()
            target.commit_offsets(name, {(m.to_topic, m.partition): m.new for m, _, _ in probed if m.new is not None})
            commit_ms = _ms(began)
            began = time.monotonic()
            by_target = {(m.to_topic, m.partition): (m, c, w) for m, c, w in probed}

            def done(key: Key, read: Sequence[ReadRecord], at_end: bool) -> bool:
                _, c, w = by_target[key]
                return partition_done(c, w, read, at_end)

            cap = self.request.max_records + READ_CAP_MARGIN
            reads, first = self.read_as_group(
                ctx.config.clusters[flow.target],
                flow.target,
                name,
                list(by_target),
                flow.source,
                done,
                self.request.wait_seconds,
                cap,
            )
            read_ms = _ms(began)
        except BaseException:
            # The first error is the one to show (a commit the target refused: its ACL); the drill group goes
            # if it can, and a refusal to delete it too does not hide that error.
            with contextlib.suppress(DrkitError):
                self._delete(target, [name])
            raise
        self._delete(target, [name])
        progress = ctx.syncs.progress(flow.name)
        ranges: dict[Key, tuple[int, int]] = {}
        for m, c, w in probed:
            origins = [r.origin for r in reads[(m.to_topic, m.partition)] if r.origin is not None]
            ranges[(m.from_topic, m.partition)] = (min([c, *origins]), w)
        records = self.read_source(ctx.config.clusters[flow.source], flow.source, ranges, SOURCE_READ_SECONDS)
        partitions = []
        for m, c, w in probed:
            key = (m.from_topic, m.partition)
            synced = progress.get(key)
            evidence = PartitionEvidence(
                m.from_topic,
                m.to_topic,
                m.partition,
                c,
                m.new if m.new is not None else 0,
                w,
                tuple(records[key]),
                tuple(reads[(m.to_topic, m.partition)]),
                0 if synced is None else synced.next_upstream,
            )
            partitions.append(judge_partition(evidence))
        verdict, reasons = judge_probe(partitions, refusals, self.request.budget)
        complete = all(p.verified == p.expected for p in partitions)
        timings = ProbeTimings(
            plan_ms, commit_ms, None if first is None else round(first * 1000), read_ms if complete else None
        )
        return ProbeReport(
            self.id,
            flow.name,
            group,
            name,
            verdict,
            reasons,
            tuple(partitions),
            timings,
            started_ms,
            self.clock_ms(),
            __version__,
            tuple(warnings),
        )

    @staticmethod
    def _require_mirror(ctx: OperateContext, flow: FlowConfig) -> None:
        """A probe measures a running mirror: one whose lease (on the target) runs now."""
        entries = ctx.clusters.admin(flow.target).lease_entries(flow.name)
        report = None if entries is None else lease_report(fold(LeaseView(), entries), int(ctx.now_ms()))
        if report is None or report.active is None or not report.active.running:
            raise RefusedError(
                f"flow {flow.name}: no mirror holds its lease on {flow.target} (none runs, or its lease ran out): "
                "start `drkit mirror` for the flow; a probe measures a running mirror"
            )

    @staticmethod
    def _delete(target: ClusterAdmin, groups: list[str]) -> None:
        refused = target.delete_groups(groups) if groups else {}
        if refused:
            raise ClusterError("; ".join(refused.values()))
