"""Failover and failback plans: which offsets to commit for which groups, and why not.

Pure: the adapters gather the facts (checkpoints or live offsets, sync indexes, the destination
groups' state and current offsets); this module decides the routes, the moves and the refusals
(worded in drkit.core.refusals). A plan with refusals is never applied. A plan is frozen: what was
shown in a dry run, recorded in the audit trail and applied is the same object.

No plan moves a group backwards on the destination without a warning. Failback resumes a group on
the origin by the rule of drkit.core.resume: never before what it is known to have processed there,
unless it was set back on the cluster being left before that point (then it follows, and warns)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

from drkit.core.audit import Action
from drkit.core.checkpoints import CommittedOffset
from drkit.core.consistency import TargetDivergence
from drkit.core.groups import GroupState
from drkit.core.incarnation import EraIndexes
from drkit.core.origin import TargetTail, resolve_tail, resolve_tail_back
from drkit.core.policy import ReplicationPolicy
from drkit.core.refusals import (
    Refusal,
    active_group,
    lagging,
    no_reverse_flow,
    stale,
    stale_detail,
    target_diverged,
    unknown_group,
    untranslatable,
    untranslatable_back,
)
from drkit.core.resume import Basis, Processed, known_processed, translate_back
from drkit.core.selection import NameSelector
from drkit.core.translate import UNMIRRORED, Position, SyncIndex, Translation, standing


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
    position: Position
    age_seconds: float | None = None  # age of the checkpoint the offset came from
    via: str = ""  # which flow's syncs translated it
    basis: Basis = Basis.TRANSLATION
    #: Failback through the inverse: what the group is known to have processed on the destination
    #: (the greater of its last checkpoint there and the offset it holds there); None: unknown.
    known: int | None = None

    @property
    def changes(self) -> bool:
        return self.new is not None and self.new != self.current


@dataclass(frozen=True)
class Plan:
    action: Action
    flow: str
    destination: str  # cluster alias the offsets are committed on
    moves: tuple[Move, ...] = ()
    refusals: tuple[Refusal, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.refusals

    @property
    def changed_moves(self) -> int:
        return sum(1 for m in self.moves if m.changes)

    def commits(self) -> dict[str, dict[tuple[str, int], int]]:
        """group -> {(destination topic, partition): offset} for every translatable move."""
        out: dict[str, dict[tuple[str, int], int]] = {}
        for m in self.moves:
            if m.new is not None:
                out.setdefault(m.group, {})[(m.to_topic, m.partition)] = m.new
        return out

    def as_dict(self) -> dict[str, Any]:
        return dict(self._as_dict)

    @cached_property
    def _as_dict(self) -> dict[str, Any]:
        # Built once (the audit row and the command's output both need it) and without
        # dataclasses.asdict, whose deep copy costs seconds over the 12,000 moves of a large failover.
        move_fields = [f.name for f in fields(Move)]
        return {
            "action": self.action.value,
            "flow": self.flow,
            "destination": self.destination,
            "ok": self.ok,
            "moves": [
                {name: getattr(m, name) for name in move_fields}
                | {"position": m.position.value, "basis": m.basis.value, "changes": m.changes}
                for m in self.moves
            ],
            "refusals": [{"reason": r.reason.value, "group": r.group, "detail": r.detail} for r in self.refusals],
            "warnings": list(self.warnings),
        }


@dataclass
class _Draft:
    """A plan while it is being decided (internal; every builder returns a frozen :class:`Plan`)."""

    action: Action
    flow: str
    destination: str
    moves: list[Move] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def refuse(self, refusal: Refusal) -> None:
        self.refusals.append(refusal)

    def freeze(self) -> Plan:
        return Plan(
            self.action, self.flow, self.destination, tuple(self.moves), tuple(self.refusals), tuple(self.warnings)
        )


@dataclass(frozen=True)
class GroupFacts:
    """What the destination cluster says about a group: its state (None: unknown there) and offsets."""

    state: GroupState | None
    offsets: Mapping[tuple[str, int], int]

    @property
    def active(self) -> bool:
        return self.state is not None and self.state.active

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(str(m) for m in self.state.members) if self.state is not None else ()


@dataclass(frozen=True)
class CheckpointFact:
    group: str
    source_topic: str
    target_topic: str
    partition: int
    upstream_offset: int
    age_seconds: float
    #: As the checkpoint recorded them: a partition with nothing to mirror keeps its answer (the
    #: target partition's start) with the source gone. None: not known (treated as unmirrored).
    position: Position | None = None
    downstream_offset: int | None = None
    #: When the checkpoint was written: which incarnation of a re-created topic it is of (core.incarnation).
    checkpointed_at_ms: float | None = None

    def recorded(self) -> Translation:
        """The checkpoint's own answer when the syncs have none: only "nothing to mirror" stands."""
        return standing(self.position, self.downstream_offset)


def _group_refusals(
    draft: _Draft,
    groups: Iterable[str],
    facts: Mapping[str, GroupFacts],
    known: set[str],
    later: Collection[str] = (),
) -> None:
    """``later``: groups with no checkpoint at a failover's ``--as-of`` that have some after it (a time too
    early, not a misnamed group)."""
    for group in groups:
        if group not in known:
            draft.refuse(unknown_group(group, checkpointed_later=group in later))
            continue
        fact = facts.get(group)
        if fact is not None and fact.active:
            draft.refuse(active_group(group, draft.destination, fact.members))


def _current(facts: Mapping[str, GroupFacts], group: str, topic: str, partition: int) -> int | None:
    fact = facts.get(group)
    return None if fact is None else fact.offsets.get((topic, partition))


def failover_plan(
    flow: str,
    destination: str,
    groups: list[str],
    checkpoints: Iterable[CheckpointFact],
    indexes: Mapping[tuple[str, int], SyncIndex],
    facts: Mapping[str, GroupFacts],
    max_age_seconds: float,
    allow_stale: bool = False,
    tails: Mapping[tuple[str, int], TargetTail] | None = None,
    diverged: Mapping[tuple[str, int], TargetDivergence] | None = None,
    eras: Mapping[tuple[str, int], EraIndexes] | None = None,
    checkpointed_later: Collection[str] = (),
) -> Plan:
    """Move ``groups`` to the flow's target from their checkpoints, re-translated with the syncs now.

    ``checkpointed_later``: groups without a checkpoint in ``checkpoints`` (read as of a past time) that have
    some after that time: refused as too early rather than as unknown.

    ``eras``: per partition of a topic deleted and created again, the syncs of each incarnation
    (drkit.core.incarnation): a checkpoint is translated with those of its own incarnation only, and one of
    an older incarnation is never placed among a newer one's copies (its unsynced tail is not read: the
    records past its end are the next incarnation's).

    ``tails``: per (source topic, partition), the target's records past the synced end (read where
    :func:`drkit.core.origin.tail_reads` says a committed offset lies past it); they place a group
    exactly on unsynced copies instead of before them.
    ``diverged``: per (source topic, partition), a target partition that no longer holds what its
    syncs say (drkit.core.consistency): a translation onto it would point at records that are gone."""
    draft = _Draft(Action.FAILOVER, flow, destination)
    wanted = set(groups)
    rows = sorted((c for c in checkpoints if c.group in wanted), key=lambda c: (c.group, c.source_topic, c.partition))
    _group_refusals(draft, groups, facts, {c.group for c in rows}, checkpointed_later)
    for c in rows:
        index = indexes.get((c.source_topic, c.partition))
        era = (eras or {}).get((c.source_topic, c.partition))
        newest = True
        if era is not None:
            index = era.at(c.checkpointed_at_ms)
            newest = index is era.at(None)
        # The syncs now win: records the mirror copied since the checkpoint are translated exactly.
        t = index.translate(c.upstream_offset) if index is not None else c.recorded()
        if tails and newest:
            t = resolve_tail(c.upstream_offset, t, tails.get((c.source_topic, c.partition)))
        move = Move(
            c.group,
            c.source_topic,
            c.target_topic,
            c.partition,
            c.upstream_offset,
            _current(facts, c.group, c.target_topic, c.partition),
            t.offset,
            t.position,
            round(c.age_seconds, 3),
            flow,
        )
        draft.moves.append(move)
        lost = (diverged or {}).get((c.source_topic, c.partition))
        if lost is not None:
            draft.refuse(target_diverged(c.group, lost, destination, flow))
        elif move.new is None:
            draft.refuse(untranslatable(c.group, c.source_topic, c.partition, c.upstream_offset))
        if c.age_seconds > max_age_seconds:
            detail = stale_detail(c.source_topic, c.partition, c.age_seconds, max_age_seconds)
            if allow_stale:
                draft.warnings.append(f"group {c.group}: {detail}; allowed by --allow-stale")
            else:
                draft.refuse(stale(c.group, detail))
        if move.current is not None and move.new is not None and move.new < move.current:
            draft.warnings.append(
                f"group {c.group} {c.target_topic}/{c.partition}: moves back from "
                f"{move.current} to {move.new} (records will be read again on the target)"
            )
    return draft.freeze()


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


@dataclass(frozen=True)
class ReverseFlow:
    """The flow that copies the cluster being left back to the destination (failback)."""

    name: str
    source: str  # alias of the cluster being left
    selector: NameSelector
    policy: ReplicationPolicy


def failback_routes(
    topics: Iterable[str],
    forward_flow: str,
    forward_copies: Mapping[str, str],
    reverse: ReverseFlow | None,
) -> dict[str, Route]:
    """Route every topic a group has offsets on: back through the forward flow's inverse when it is
    one of that flow's copies (``forward_copies``: target topic -> source topic), through the reverse
    flow when that flow mirrors it; topics on neither route are left out (the plan warns)."""
    routes: dict[str, Route] = {}
    for topic in sorted(set(topics)):
        if topic in forward_copies:
            routes[topic] = Route(forward_copies[topic], True, forward_flow)
        elif reverse is not None and reverse.selector.matches(topic):
            routes[topic] = Route(reverse.policy.target_topic(reverse.source, topic), False, reverse.name)
    return routes


def failback_plan(
    flow: str,
    destination: str,
    groups: list[str],
    offsets: Iterable[CommittedOffset],
    routes: Mapping[str, Route],
    indexes: Mapping[tuple[str, str, int], SyncIndex],
    facts: Mapping[str, GroupFacts],
    caught_up: Mapping[tuple[str, int], tuple[int, int]],
    leaving: str,
    reverse_flow: str | None,
    checkpoints: Mapping[tuple[str, str, int], int] | None = None,
    copied_back: Mapping[tuple[str, str, int], int] | None = None,
) -> Plan:
    """Move ``groups`` back to the flow's source.

    ``offsets`` are the groups' committed offsets on the cluster being left. ``indexes`` is keyed
    by (flow name, source topic of that flow, partition). ``caught_up`` holds, for each local
    topic-partition of the cluster being left, (end offset there, next offset the reverse flow
    will mirror): failback refuses while the reverse flow has not caught up. ``leaving`` is the
    alias of the cluster being left; ``reverse_flow`` None means no flow copies it back, so offsets
    on its own topics cannot come back. ``checkpoints`` holds the upstream offset of each group's
    last checkpoint of the forward flow, by (group, topic on the destination, partition): with the
    offsets the groups hold on the destination (``facts``), what they are known to have processed
    there (see :func:`translate_back`). ``copied_back`` holds, by (group, topic on the cluster being left,
    partition), one past the greatest original offset of the copies the group read past the synced end
    (their origin headers, drkit.core.origin.copied_below): it resumes after them, not at the synced end.
    """
    checkpoints = checkpoints or {}
    copied_back = copied_back or {}
    draft = _Draft(Action.FAILBACK, flow, destination)
    wanted = set(groups)
    rows = sorted(
        (o for o in offsets if o.group in wanted and o.offset >= 0), key=lambda o: (o.group, o.topic, o.partition)
    )
    _group_refusals(draft, groups, facts, {o.group for o in rows})
    stranded: dict[str, set[str]] = {}  # group -> its topics no flow brings back, when there is no reverse flow
    for o in rows:
        route = routes.get(o.topic)
        if route is None:
            if reverse_flow is None:
                stranded.setdefault(o.group, set()).add(o.topic)
            else:
                draft.warnings.append(f"group {o.group}: offsets on {o.topic} are not covered by the flows; left alone")
            continue
        current = _current(facts, o.group, route.to_topic, o.partition)
        known: Processed | None = None
        basis = Basis.TRANSLATION
        if route.inverse:
            index = indexes.get((route.via, route.to_topic, o.partition))
            known = known_processed(checkpoints.get((o.group, route.to_topic, o.partition)), current)
            t, basis = translate_back(o.offset, index, known)
            through = copied_back.get((o.group, o.topic, o.partition))
            if through is not None and t.position is Position.PAST_END and (t.offset is None or through > t.offset):
                t, basis = resolve_tail_back(t, through), Basis.TRANSLATION
        else:
            index = indexes.get((route.via, o.topic, o.partition))
            t = index.translate(o.offset) if index is not None else UNMIRRORED
            end, mirrored = caught_up.get((o.topic, o.partition), (0, 0))
            if mirrored < end:
                draft.refuse(lagging(o.group, o.topic, o.partition, route.via, mirrored, end))
        move = Move(
            o.group,
            o.topic,
            route.to_topic,
            o.partition,
            o.offset,
            current,
            t.offset,
            t.position,
            None,
            route.via,
            basis,
            None if known is None else known.offset,
        )
        draft.moves.append(move)
        if move.new is None:
            draft.refuse(untranslatable_back(o.group, o.topic, o.partition, o.offset, route.via))
        elif known is not None and move.new < known.offset:
            draft.warnings.append(
                f"group {o.group} {route.to_topic}/{o.partition}: moves back to {move.new}, before offset "
                f"{known.offset} ({known.known_from}) up to which it had processed on {destination}: its "
                f"offset on {leaving} ({o.topic}/{o.partition} {o.offset}) was set back before that point "
                f"({known.offset - move.new} offsets will be read again)"
            )
        elif move.current is not None and move.new < move.current:
            draft.warnings.append(
                f"group {o.group} {route.to_topic}/{o.partition}: moves back from {move.current} "
                f"to {move.new} (records will be read again on {destination})"
            )
    for group, topics in sorted(stranded.items()):
        draft.refuse(no_reverse_flow(group, topics, leaving, destination))
    return draft.freeze()
