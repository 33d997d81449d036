"""Failover and failback: gather the facts, build the plan (drkit.core.plan), apply, verify, audit.

Failover never talks to the source cluster except, optionally and with a short timeout, to
measure how many records were not mirrored: it works with the source gone. Every run, dry runs
and refusals included, is appended to the ``operations`` table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from drkit.checkpoint.job import read_source_ends
from drkit.config import FlowConfig
from drkit.core.plan import (
    CheckpointFact,
    GroupFacts,
    LiveOffset,
    Plan,
    Route,
    failback_plan,
    failover_plan,
)
from drkit.core.selection import group_selector, topic_selector
from drkit.core.translate import SyncIndex
from drkit.errors import ClusterError, DrkitError, RefusedError
from drkit.kafka import clients, groups
from drkit.kafka.topics import end_offsets, partition_counts
from drkit.store.checkpoints import CheckpointStore
from drkit.store.offset_syncs import OffsetSyncStore
from drkit.store.operations import Operation, OperationStore

if TYPE_CHECKING:
    from drkit.service import Drkit

#: How long failover waits for the source before calling it unreachable.
SOURCE_PROBE_SECONDS = 5.0


@dataclass
class Outcome:
    plan: Plan
    status: str  # dry_run | refused | applied | declined
    rpo: dict[str, Any] = field(default_factory=dict)
    verified: dict[str, dict[str, int]] = field(default_factory=dict)
    operation_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "operation_id": self.operation_id, "plan": self.plan.as_dict(),
                "rpo": self.rpo, "verified": self.verified}


def _indexes(syncs: OffsetSyncStore, flow: str) -> dict[tuple[str, int], SyncIndex]:
    return {key: SyncIndex(rs) for key, rs in syncs.ranges(flow).items()}


def _facts(admin: Any, alias: str, names: list[str]) -> dict[str, GroupFacts]:
    states = groups.describe(admin, alias, names)
    out = {}
    for name in names:
        state = states.get(name)
        members = tuple(f"{m.client_id}@{m.host}" for m in state.members) if state else ()
        out[name] = GroupFacts(bool(state and state.active), members, groups.offsets_of(admin, alias, name))
    return out


class Operator:
    """The operations of one config: failover, failback (plan, dry run, apply, verify, audit)."""

    def __init__(self, service: Drkit) -> None:
        self.service = service
        self.config = service.config
        self.syncs = OffsetSyncStore(service.spark, service.tables)
        self.checkpoints = CheckpointStore(service.spark, service.tables)
        self.operations = OperationStore(service.spark, service.tables)

    # -- failover -----------------------------------------------------------------------------

    def failover(self, flow_name: str, group_names: list[str] | None, as_of: datetime | None = None,
                 allow_stale: bool = False, apply: bool = False,
                 confirm: Callable[[Plan], bool] | None = None) -> Outcome:
        started = datetime.now(UTC)
        flow = self.config.flow(flow_name)
        recorded = self.checkpoints.latest(flow.name, group_names, as_of=as_of)
        names = group_names or sorted({r.checkpoint.group for r in recorded})
        if not names:
            raise RefusedError(f"flow {flow.name} has no checkpoints: run `drkit checkpoint` first")
        reference = (as_of or started).timestamp()
        facts_in = [
            CheckpointFact(r.checkpoint.group, r.checkpoint.source_topic, r.checkpoint.target_topic,
                           r.checkpoint.partition, r.checkpoint.upstream_offset,
                           max(0.0, reference - r.checkpointed_at_ms / 1000))
            for r in recorded
        ]
        indexes = _indexes(self.syncs, flow.name)
        admin = clients.admin(self.config.clusters[flow.target], flow.target)
        facts = _facts(admin, flow.target, names)
        plan = failover_plan(flow.name, flow.target, names, facts_in, indexes, facts,
                             flow.checkpoint.max_age_seconds, allow_stale)
        rpo = self.rpo(flow)
        return self._finish(plan, flow, names, as_of, apply, confirm, admin, started, rpo)

    def rpo(self, flow: FlowConfig) -> dict[str, Any]:
        """How much the mirror had not copied: live when the source answers, else last observed."""
        progress = self.syncs.progress(flow.name)
        source = self.config.clusters[flow.source]
        ends: dict[tuple[str, int], int] | None = None
        observed_at_ms: int | None = None
        reachable = True
        try:
            admin = clients.admin(source, flow.source, timeout_ms=int(SOURCE_PROBE_SECONDS * 1000))
            counts = partition_counts(admin, flow.source, timeout=SOURCE_PROBE_SECONDS)
            selector = topic_selector(flow.topics.include, flow.topics.exclude, flow.policy(), flow.target,
                                      frozenset(self.config.clusters))
            ends = end_offsets(admin, flow.source, {t: counts[t] for t in selector.select(counts)},
                               timeout=SOURCE_PROBE_SECONDS)
            observed_at_ms = int(datetime.now(UTC).timestamp() * 1000)
        except ClusterError:
            reachable = False
            last = read_source_ends(self.config, flow)
            if last is not None:
                observed_at_ms, ends = last
        now_ms = datetime.now(UTC).timestamp() * 1000
        partitions = []
        for key in sorted(set(progress) | set(ends or {})):
            last_upstream, _, synced_ms = progress.get(key, (-1, -1, None))
            end = (ends or {}).get(key)
            partitions.append({
                "topic": key[0], "partition": key[1], "mirrored_up_to": last_upstream + 1, "source_end": end,
                "unmirrored_offsets": None if end is None else max(0, end - (last_upstream + 1)),
                "last_sync_age_seconds": None if synced_ms is None else round((now_ms - synced_ms) / 1000, 1),
            })
        known = [p["unmirrored_offsets"] for p in partitions if p["unmirrored_offsets"] is not None]
        return {
            "source_reachable": reachable,
            "source_ends_from": "live" if reachable else ("last observation" if ends is not None else "unknown"),
            "observed_at": None if observed_at_ms is None
            else datetime.fromtimestamp(observed_at_ms / 1000, UTC).isoformat(),
            "unmirrored_offsets": sum(known) if known else None,
            "note": "offsets the mirror had not copied (transaction markers count as offsets: an upper bound)",
            "partitions": partitions,
        }

    # -- failback -----------------------------------------------------------------------------

    def failback(self, flow_name: str, group_names: list[str] | None, apply: bool = False,
                 confirm: Callable[[Plan], bool] | None = None) -> Outcome:
        """Move groups from the flow's target back to its source (the original cluster)."""
        started = datetime.now(UTC)
        flow = self.config.flow(flow_name)
        origin, current = flow.source, flow.target
        reverse = next((f for f in self.config.flows if f.source == current and f.target == origin), None)
        admin_current = clients.admin(self.config.clusters[current], current)
        if group_names:
            names = group_names
        else:
            selector = group_selector(flow.groups.include, flow.groups.exclude)
            names = selector.select(groups.list_groups(admin_current, current))
        live = [LiveOffset(c.group, c.topic, c.partition, c.offset)
                for g in names for c in groups.committed_offsets(admin_current, current, g) if c.offset >= 0]
        forward_targets = {tgt: src for src, tgt in self.syncs.target_topics(flow.name).items()}
        routes: dict[str, Route] = {}
        indexes: dict[tuple[str, str, int], SyncIndex] = {}
        for (topic, p), index in _indexes(self.syncs, flow.name).items():
            indexes[(flow.name, topic, p)] = index
        reverse_selector = None
        if reverse is not None:
            reverse_selector = topic_selector(reverse.topics.include, reverse.topics.exclude, reverse.policy(),
                                              reverse.target, frozenset(self.config.clusters))
            for (topic, p), index in _indexes(self.syncs, reverse.name).items():
                indexes[(reverse.name, topic, p)] = index
        caught_up: dict[tuple[str, int], tuple[int, int]] = {}
        local_topics: dict[str, int] = {}
        counts = partition_counts(admin_current, current)
        for topic in {o.topic for o in live}:
            if topic in forward_targets:
                routes[topic] = Route(forward_targets[topic], True, flow.name)
            elif reverse is not None and reverse_selector is not None and reverse_selector.matches(topic):
                routes[topic] = Route(reverse.policy().target_topic(current, topic), False, reverse.name)
                local_topics[topic] = counts.get(topic, 0)
        if local_topics and reverse is not None:
            ends = end_offsets(admin_current, current, local_topics)
            progress = self.syncs.progress(reverse.name)
            for key, end in ends.items():
                caught_up[key] = (end, progress.get(key, (-1, -1, 0))[0] + 1)
        admin_origin = clients.admin(self.config.clusters[origin], origin)
        facts = _facts(admin_origin, origin, names)
        plan = failback_plan(flow.name, origin, names, live, routes, indexes, facts, caught_up)
        if reverse is None and any(o.topic not in forward_targets for o in live):
            plan.warnings.append(f"no reverse flow {current}->{origin} is configured: records produced on "
                                 f"{current} cannot be brought back")
        return self._finish(plan, flow, names, None, apply, confirm, admin_origin, started, {})

    # -- shared -------------------------------------------------------------------------------

    def _finish(self, plan: Plan, flow: FlowConfig, names: list[str], as_of: datetime | None, apply: bool,
                confirm: Callable[[Plan], bool] | None, admin: Any, started: datetime,
                rpo: dict[str, Any]) -> Outcome:
        outcome = Outcome(plan, "dry_run", rpo)
        error: str | None = None
        try:
            if not plan.ok:
                outcome.status = "refused"
            elif apply:
                if confirm is not None and not confirm(plan):
                    outcome.status = "declined"
                else:
                    outcome.verified = self._apply(plan, admin)
                    outcome.status = "applied"
        except DrkitError as exc:
            error = str(exc)
            raise
        finally:
            result = {"status": outcome.status if error is None else "failed", "error": error,
                      "verified": outcome.verified, "rpo": rpo}
            op = Operation(plan.action, flow.name, names, as_of.isoformat() if as_of else None, not apply,
                           plan.as_dict(), result, started, datetime.now(UTC))
            self.operations.append(op)
            outcome.operation_id = op.id
        return outcome

    @staticmethod
    def _apply(plan: Plan, admin: Any) -> dict[str, dict[str, int]]:
        """Commit every group's offsets, then read them back: what is there must be what was planned."""
        verified: dict[str, dict[str, int]] = {}
        for group, offsets in plan.commits().items():
            groups.commit_offsets(admin, plan.destination, group, offsets)
            now = groups.offsets_of(admin, plan.destination, group)
            wrong = {k: (v, now.get(k)) for k, v in offsets.items() if now.get(k) != v}
            if wrong:
                (topic, p), (want, got) = next(iter(wrong.items()))
                raise ClusterError(f"cluster {plan.destination}: group {group} {topic}/{p} reads back {got} "
                                   f"after committing {want}; run the command again")
            verified[group] = {f"{t}/{p}": o for (t, p), o in sorted(offsets.items())}
        return verified
