"""Failover and failback plans: which offsets to commit for which groups, and why not.

Pure: the adapters gather the facts (checkpoints or live offsets, sync indexes, the destination
groups' state and current offsets); this module decides the moves and the refusals. A plan with
refusals is never applied. Every refusal says what to do about it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from drkit.core.translate import Position, SyncIndex


@dataclass(frozen=True)
class Move:
    """One partition of one group: from where it is on the destination to where it should be."""

    group: str
    from_topic: str  # the topic the offset was committed on (source side of the translation)
    to_topic: str  # the topic on the destination cluster
    partition: int
    committed: int  # the offset translated (source committed offset, or target offset for failback)
    current: int | None  # the group's offset on the destination now (None: no commit)
    new: int | None  # the offset to commit (None: cannot translate)
    position: str
    age_seconds: float | None = None  # age of the checkpoint the offset came from
    via: str = ""  # which flow's syncs translated it

    @property
    def changes(self) -> bool:
        return self.new is not None and self.new != self.current


@dataclass(frozen=True)
class Refusal:
    reason: str  # machine-readable kind: active_group, stale, unknown_group, untranslatable, lagging
    group: str
    detail: str


@dataclass
class Plan:
    action: str  # failover | failback
    flow: str
    destination: str  # cluster alias the offsets are committed on
    moves: list[Move] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.refusals

    def commits(self) -> dict[str, dict[tuple[str, int], int]]:
        """group -> {(destination topic, partition): offset} for every translatable move."""
        out: dict[str, dict[tuple[str, int], int]] = {}
        for m in self.moves:
            if m.new is not None:
                out.setdefault(m.group, {})[(m.to_topic, m.partition)] = m.new
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action, "flow": self.flow, "destination": self.destination, "ok": self.ok,
            "moves": [asdict(m) | {"changes": m.changes} for m in self.moves],
            "refusals": [asdict(r) for r in self.refusals],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class GroupFacts:
    """What the destination cluster says about a group."""

    active: bool
    members: tuple[str, ...]  # "client_id@host" of each member
    offsets: Mapping[tuple[str, int], int]


@dataclass(frozen=True)
class CheckpointFact:
    group: str
    source_topic: str
    target_topic: str
    partition: int
    upstream_offset: int
    age_seconds: float


def _group_refusals(plan: Plan, groups: Iterable[str], facts: Mapping[str, GroupFacts], known: set[str]) -> None:
    for group in groups:
        if group not in known:
            plan.refusals.append(Refusal("unknown_group", group,
                                         f"no checkpoint or committed offset for group {group!r}: check the name "
                                         "and that the flow's groups selection includes it"))
            continue
        fact = facts.get(group)
        if fact is not None and fact.active:
            members = ", ".join(fact.members) or "members joining"
            plan.refusals.append(Refusal("active_group", group,
                                         f"group {group!r} has active members on {plan.destination} ({members}); "
                                         "stop those consumers first"))


def failover_plan(
    flow: str,
    destination: str,
    groups: list[str],
    checkpoints: Iterable[CheckpointFact],
    indexes: Mapping[tuple[str, int], SyncIndex],
    facts: Mapping[str, GroupFacts],
    max_age_seconds: float,
    allow_stale: bool = False,
) -> Plan:
    """Move ``groups`` to the flow's target from their checkpoints, re-translated with the syncs now."""
    plan = Plan("failover", flow, destination)
    wanted = set(groups)
    rows = sorted((c for c in checkpoints if c.group in wanted),
                  key=lambda c: (c.group, c.source_topic, c.partition))
    _group_refusals(plan, groups, facts, {c.group for c in rows})
    for c in rows:
        index = indexes.get((c.source_topic, c.partition))
        t = index.translate(c.upstream_offset) if index is not None else None
        current = facts[c.group].offsets.get((c.target_topic, c.partition)) if c.group in facts else None
        move = Move(c.group, c.source_topic, c.target_topic, c.partition, c.upstream_offset, current,
                    t.offset if t is not None else None,
                    (t.position if t is not None else Position.UNMIRRORED).value, round(c.age_seconds, 3), flow)
        plan.moves.append(move)
        if move.new is None:
            plan.refusals.append(Refusal("untranslatable", c.group,
                                         f"{c.source_topic}/{c.partition}: committed offset {c.upstream_offset} "
                                         "cannot be translated (nothing of the partition was mirrored)"))
        if c.age_seconds > max_age_seconds:
            detail = (f"{c.source_topic}/{c.partition}: checkpoint is {c.age_seconds:.0f}s old "
                      f"(limit {max_age_seconds:.0f}s)")
            if allow_stale:
                plan.warnings.append(f"group {c.group}: {detail}; allowed by --allow-stale")
            else:
                plan.refusals.append(Refusal("stale", c.group,
                                             f"{detail}; is the checkpoint process running? "
                                             "Use --allow-stale to accept it"))
        if move.current is not None and move.new is not None and move.new < move.current:
            plan.warnings.append(f"group {c.group} {c.target_topic}/{c.partition}: moves back from "
                                 f"{move.current} to {move.new} (records will be read again on the target)")
    return plan


@dataclass(frozen=True)
class LiveOffset:
    """A group's committed offset on the cluster it is leaving (failback reads them live)."""

    group: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Route:
    """How offsets on one topic of the cluster being left translate to the destination.

    ``inverse`` True: the topic is a copy made by the forward flow (e.g. ``A.orders`` on B), so the
    offset goes back through the inverse of the forward syncs to the original topic. False: the
    topic is local to the cluster being left (records produced there during the outage) and the
    reverse flow copied it to the destination (``B.orders`` on A); translate forward with its syncs.
    """

    to_topic: str
    inverse: bool
    via: str


def failback_plan(
    flow: str,
    destination: str,
    groups: list[str],
    offsets: Iterable[LiveOffset],
    routes: Mapping[str, Route],
    indexes: Mapping[tuple[str, str, int], SyncIndex],
    facts: Mapping[str, GroupFacts],
    caught_up: Mapping[tuple[str, int], tuple[int, int]],
) -> Plan:
    """Move ``groups`` back to the flow's source.

    ``indexes`` is keyed by (flow name, source topic of that flow, partition). ``caught_up`` holds,
    for each local topic-partition of the cluster being left, (end offset there, next offset the
    reverse flow will mirror): failback refuses while the reverse flow has not caught up.
    """
    plan = Plan("failback", flow, destination)
    wanted = set(groups)
    rows = sorted((o for o in offsets if o.group in wanted), key=lambda o: (o.group, o.topic, o.partition))
    _group_refusals(plan, groups, facts, {o.group for o in rows})
    for o in rows:
        route = routes.get(o.topic)
        if route is None:
            plan.warnings.append(f"group {o.group}: offsets on {o.topic} are not covered by the flows; left alone")
            continue
        if route.inverse:
            index = indexes.get((route.via, route.to_topic, o.partition))
            t = index.inverse(o.offset) if index is not None else None
        else:
            index = indexes.get((route.via, o.topic, o.partition))
            t = index.translate(o.offset) if index is not None else None
            end, mirrored = caught_up.get((o.topic, o.partition), (0, 0))
            if mirrored < end:
                plan.refusals.append(Refusal("lagging", o.group,
                                             f"{o.topic}/{o.partition}: reverse flow {route.via} has mirrored up to "
                                             f"{mirrored} of {end}; run the reverse mirror until it catches up"))
        current = facts[o.group].offsets.get((route.to_topic, o.partition)) if o.group in facts else None
        move = Move(o.group, o.topic, route.to_topic, o.partition, o.offset, current,
                    t.offset if t is not None else None,
                    (t.position if t is not None else Position.UNMIRRORED).value, None, route.via)
        plan.moves.append(move)
        if move.new is None:
            plan.refusals.append(Refusal("untranslatable", o.group,
                                         f"{o.topic}/{o.partition}: offset {o.offset} cannot be translated back "
                                         f"(flow {route.via} has no syncs for it)"))
    return plan
