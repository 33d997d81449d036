"""Fencing through ACLs (``[flows.fencing]``): the side the producers leave is denied to them.

A failover moves the producers to the target; one that still reaches the source must not write there (split
brain). So an applied failover adds, on the source, DENY WRITE on each of the flow's mirrored topics for each
principal named in ``producers``; an applied failback lifts it. With ``read_only_copies``, the copies on the
target are kept the same way until a failover: a failback adds DENY WRITE on the copies for those principals,
a failover lifts what drkit added. DENY, because Kafka's authorizers let a DENY win over any ALLOW:
the producers' own ALLOW bindings stay as they are. Only named principals, never ``User:*``: a DENY for every
principal would stop drkit's own mirror too.

Between failovers, ``drkit fence`` puts the flow's ACLs where its producers' side calls for
(:func:`producers_on`, from the trail): before any failover, or after a failback, the copies fenced
(``read_only_copies``: their first read-only state, and the copies the mirror created since) and drkit's
denials on the source lifted; after a failover, the source fenced (one that did not answer then) and drkit's
denials on the copies lifted. It is the plan a failback or a failover would make, so it is idempotent.

Invariants:

- drkit adds only bindings of one shape (TOPIC, LITERAL, host ``*``, WRITE, DENY, a named producer) and only
  where that exact binding is not there already: an operator's own binding is never drkit's.
- drkit deletes only what the operations trail shows it added (:func:`added_by_drkit`) and is still there.
- So fencing and then lifting gives back the cluster's bindings exactly as they were (a property test).
- Fencing needs the cluster to answer: an unreachable source is not fenced, and the plan says so (a warning,
  never a refusal: a failover must not wait for the cluster it leaves).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from drkit.core.acls import PatternType, Permission, TopicAcl
from drkit.core.audit import Action, OperationRecord, OperationStatus

#: The operation fencing denies.
FENCED_OPERATION = "WRITE"
#: The key of the fencing changes in an operation's audit result.
FENCING_KEY = "fencing"


class FenceSide(StrEnum):
    SOURCE = "source"  # the flow's source topics
    TARGET = "target"  # their copies on the target


def denial(topic: str, principal: str) -> TopicAcl:
    """The one binding drkit adds: ``principal`` may not write ``topic``."""
    return TopicAcl(PatternType.LITERAL, topic, principal, "*", FENCED_OPERATION, Permission.DENY)


@dataclass(frozen=True)
class AclChange:
    """The bindings to add to and delete from one cluster."""

    cluster: str
    side: FenceSide
    add: tuple[TopicAcl, ...] = ()
    delete: tuple[TopicAcl, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "side": self.side.value,
            "add": [a.as_dict() for a in self.add],
            "delete": [a.as_dict() for a in self.delete],
        }


@dataclass(frozen=True)
class FencingPlan:
    """What fencing changes, per cluster, and why something is not fenced (``warnings``)."""

    changes: tuple[AclChange, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not any(c.add or c.delete for c in self.changes)

    def as_dict(self) -> dict[str, Any]:
        return {"changes": [c.as_dict() for c in self.changes], "warnings": list(self.warnings)}


@dataclass(frozen=True)
class ClusterAcls:
    """What fencing knows of one cluster: its topic bindings now (None: it did not answer), and the bindings
    drkit added there that the operations trail shows are still drkit's."""

    alias: str
    present: frozenset[TopicAcl] | None
    added: frozenset[TopicAcl] = frozenset()


def fence(
    alias: str, side: FenceSide, topics: Iterable[str], producers: Iterable[str], present: Iterable[TopicAcl]
) -> AclChange:
    """Deny ``producers`` WRITE on ``topics``: the bindings missing."""
    there = set(present)
    wanted = sorted({denial(t, p) for t in topics for p in producers})
    return AclChange(alias, side, add=tuple(a for a in wanted if a not in there))


def lift(alias: str, side: FenceSide, added: Iterable[TopicAcl], present: Iterable[TopicAcl]) -> AclChange:
    """Delete what drkit added and is still there, nothing else."""
    there = set(present)
    return AclChange(alias, side, delete=tuple(sorted(a for a in set(added) if a in there)))


def plan_fencing(
    leaving: ClusterAcls,
    leaving_topics: Sequence[str],
    arriving: ClusterAcls,
    producers: Sequence[str],
    fence_arriving_too: bool,
    leaving_side: FenceSide,
    *,
    flow: str,
) -> FencingPlan:
    """The producers leave ``leaving`` (fenced there) for ``arriving`` (what drkit fenced there is lifted, when
    the copies are kept read-only: ``fence_arriving_too``). A failover leaves the source; a failback, the target."""
    changes: list[AclChange] = []
    warnings: list[str] = []
    arriving_side = FenceSide.TARGET if leaving_side is FenceSide.SOURCE else FenceSide.SOURCE
    if leaving.present is None:
        warnings.append(
            f"{leaving.alias} not fenced: it does not answer; once it is back a producer still pointed at it could "
            f"write there: run drkit fence --flow '{flow}' --apply then"
        )
    elif producers and (leaving_side is FenceSide.SOURCE or fence_arriving_too):
        changes.append(fence(leaving.alias, leaving_side, leaving_topics, producers, leaving.present))
    if arriving.present is not None and (arriving_side is FenceSide.SOURCE or fence_arriving_too):
        changes.append(lift(arriving.alias, arriving_side, arriving.added, arriving.present))
    elif arriving.present is None and arriving.added:
        warnings.append(
            f"{arriving.alias} not unfenced: it does not answer; drkit's denials there stay until it is back and "
            f"drkit fence --flow '{flow}' --apply lifts them"
        )
    return FencingPlan(tuple(c for c in changes if c.add or c.delete), tuple(warnings))


def producers_on(records: Iterable[OperationRecord], flow: str) -> FenceSide:
    """The side ``flow``'s producers belong on now, by its newest failover or failback that moved groups
    (``records`` newest first, folded): the target after a failover, else the source (before any, or after a
    failback). A dry run, a refusal, and an apply that failed (nothing reads back as planned) moved nothing:
    they are looked past."""
    for r in records:
        # The producers move with the groups (a hook runs only once applied; drkit.core.hooks).
        if r.flow == flow and r.moved_groups:
            return FenceSide.TARGET if r.action is Action.FAILOVER else FenceSide.SOURCE
    return FenceSide.SOURCE


@dataclass(frozen=True)
class FenceReport:
    """``drkit fence``: where the flow's producers belong (``producers_on``), the ACL changes that puts in
    place, and how the run ended (dry run, applied, failed: ``error`` names what failed)."""

    flow: str
    producers_on: FenceSide
    plan: FencingPlan
    status: OperationStatus
    operation_id: str
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "producers_on": self.producers_on.value,
            "status": self.status.value,
            "operation_id": self.operation_id,
            "error": self.error,
            FENCING_KEY: self.plan.as_dict(),
        }


def added_by_drkit(results: Iterable[Mapping[str, Any]], alias: str) -> frozenset[TopicAcl]:
    """The bindings drkit added on ``alias`` and has not deleted since, from the audit results of the applies
    that changed ACLs, oldest first (each holds ``FENCING_KEY``: the changes made)."""
    held: set[TopicAcl] = set()
    for result in results:
        for change in (result.get(FENCING_KEY) or {}).get("applied", []):
            if change.get("cluster") != alias:
                continue
            held |= {_acl(a) for a in change.get("add", [])}
            held -= {_acl(a) for a in change.get("delete", [])}
    return frozenset(held)


def _acl(d: Mapping[str, Any]) -> TopicAcl:
    return TopicAcl(
        PatternType(d["pattern"]), d["name"], d["principal"], d["host"], d["operation"], Permission(d["permission"])
    )
