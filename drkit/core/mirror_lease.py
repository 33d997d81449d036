"""Which process mirrors a flow: the lease its mirror processes keep on the flow's target cluster.

Every ``drkit mirror`` process of a flow, on any host, appends small entries to one partition of the target's
lease topic (:data:`LEASE_TOPIC`, keyed by flow): a claim, renewals of its own claim, a release when it stops,
and standby beats. The topic stamps each entry with the broker's append time, so every process reads one
order (offsets) and one clock (the broker's). :func:`fold` reads entries in offset order; everyone who read the
same prefix holds the same :class:`LeaseView`.

Invariants (what :func:`fold` accepts):

* a claim is valid only when no lease is running at its append time (no holder, or the holder's lease ended
  at or before it): at most one holder at any broker time;
* a renewal is valid only from the holder, of its own claim, and moves its end to append time + lease; a
  holder whose lease ran out may renew as long as nobody claimed meanwhile (a target outage longer than the
  lease does not hand the flow over when no other process wants it);
* a release ends the holder's lease at once (a graceful stop hands over without waiting for the lease).

A process believes it holds the lease only until :func:`believed_until`: the local clock when it *sent* its
latest renewal that the fold accepted, plus the lease, less a margin for clock-rate drift. The broker appended
that renewal after it was sent, so the process stops believing before the broker's lease ends, and so before
any other process can claim: copies and sync appends stop first (drkit.mirror.lease gates them), and the
syncs are also fenced in the state store by the holder's epoch (drkit.store.offset_syncs).

The epoch is not an offset of this topic (a re-created topic starts again at 0): it is the fence version the
holder commits to ``offset_syncs`` when it takes over, one above the last (drkit.store.offset_syncs). It
names the holder's Spark checkpoint and is written on every copy (:data:`EPOCH_HEADER`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

#: The topic on each target cluster holding its flows' leases (one partition: one order).
LEASE_TOPIC = "_drkit.mirror-lease"

#: The header every copy carries: the epoch of the mirror process that made it (decimal ASCII).
EPOCH_HEADER = "drkit.epoch"

#: The share of the lease a process gives up to clock-rate drift between its host and the broker's.
DRIFT_SHARE = 0.05

#: Standbys not seen for this many leases are no longer listed.
STANDBY_FORGOTTEN_LEASES = 3


class LeaseAct(StrEnum):
    """What a lease entry says."""

    CLAIM = "claim"
    RENEW = "renew"
    RELEASE = "release"
    STANDBY = "standby"


@dataclass(frozen=True)
class Instance:
    """One mirror process: a unique id per run, and where it runs (for the operator)."""

    id: str
    host: str
    pid: int

    def describe(self) -> str:
        return f"{self.host} pid {self.pid} ({self.id})"


@dataclass(frozen=True)
class LeaseEntry:
    """One entry of the lease topic, as read back: its offset and the broker's append time."""

    offset: int
    at_ms: int
    act: LeaseAct
    instance: Instance
    lease_ms: int
    #: For a renewal or a release: the offset of the claim it continues; -1 for a claim or a beat.
    claim: int = -1
    #: The holder's epoch once it fenced (renewals carry it); 0 before.
    epoch: int = 0
    #: What must be equal between every process of the flow (drkit.mirror.lease: topics, policy, delivery...).
    settings: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Tenure:
    """The holder of a flow's lease, as the fold knows it."""

    instance: Instance
    claim: int
    since_ms: int
    ends_ms: int
    epoch: int
    settings: Mapping[str, str]


@dataclass(frozen=True)
class Standby:
    instance: Instance
    seen_ms: int
    lease_ms: int
    settings: Mapping[str, str]


@dataclass(frozen=True)
class LeaseView:
    """What the entries read so far say: the holder (None: nobody), the standbys, the broker's latest time."""

    holder: Tenure | None = None
    standbys: tuple[Standby, ...] = ()
    #: The latest append time read: the broker's clock was at least this when the reader got here.
    now_ms: int = 0
    #: The offset after the last entry read.
    next_offset: int = 0

    def waiting(self) -> tuple[Standby, ...]:
        """The standbys: processes that beat recently and are not the holder."""
        return tuple(s for s in self.standbys if self.holder is None or s.instance.id != self.holder.instance.id)

    def running(self) -> bool:
        """Whether the holder's lease still runs at the broker's latest time read."""
        return self.holder is not None and self.now_ms < self.holder.ends_ms

    def claimable(self) -> bool:
        return not self.running()

    def holds(self, instance_id: str, claim: int) -> bool:
        """Whether ``instance_id``'s claim at ``claim`` is the current tenure (running or lapsed, not taken)."""
        return self.holder is not None and self.holder.instance.id == instance_id and self.holder.claim == claim


def fold(view: LeaseView, entries: Iterable[LeaseEntry]) -> LeaseView:
    """``view`` after ``entries`` (in offset order, those at or after ``view.next_offset``)."""
    holder, now, after = view.holder, view.now_ms, view.next_offset
    standbys = {s.instance.id: s for s in view.standbys}
    for e in entries:
        if e.offset < after:
            continue  # read again (a consumer that re-fetched): already folded
        after, now = e.offset + 1, max(now, e.at_ms)
        if e.act is LeaseAct.STANDBY:
            standbys[e.instance.id] = Standby(e.instance, e.at_ms, e.lease_ms, dict(e.settings))
            continue
        ours = holder is not None and holder.instance.id == e.instance.id and holder.claim == e.claim
        if e.act is LeaseAct.CLAIM:
            if holder is None or e.at_ms >= holder.ends_ms:
                holder = Tenure(e.instance, e.offset, e.at_ms, e.at_ms + e.lease_ms, 0, dict(e.settings))
                standbys.pop(e.instance.id, None)
        elif e.act is LeaseAct.RENEW and ours and holder is not None:
            holder = replace(holder, ends_ms=e.at_ms + e.lease_ms, epoch=max(holder.epoch, e.epoch))
        elif e.act is LeaseAct.RELEASE and ours:
            holder = None
    kept = tuple(
        s
        for s in sorted(standbys.values(), key=lambda s: s.instance.id)
        if now - s.seen_ms <= STANDBY_FORGOTTEN_LEASES * s.lease_ms
    )
    return LeaseView(holder, kept, now, after)


def renewal_accepted(view: LeaseView, instance_id: str, claim: int, renewal: LeaseEntry) -> bool:
    """Whether ``view`` (folded at least up to ``renewal``) took ``renewal`` as the holder's: the lease then
    ends at its append time + lease (a later renewal may have moved it further)."""
    return (
        view.holds(instance_id, claim)
        and view.holder is not None
        and view.holder.ends_ms >= renewal.at_ms + renewal.lease_ms
    )


def believed_until(sent_at: float, lease_ms: int) -> float:
    """Until when (local monotonic seconds) a process may act as holder after a renewal it sent at ``sent_at``
    was accepted: the lease less :data:`DRIFT_SHARE` of it, so a local clock up to that much faster than the
    broker's still stops first."""
    return sent_at + lease_ms * (1.0 - DRIFT_SHARE) / 1000.0


def checkpoint_sources(found: Iterable[int], epoch: int) -> tuple[int | None, tuple[int, ...]]:
    """Of the epochs whose streaming checkpoints exist, the one the holder of ``epoch`` goes on from (the newest
    earlier one; None: it starts anew) and those it may delete (every epoch older than that: no holder goes on
    from them again, and their processes are fenced twice over)."""
    earlier = sorted(e for e in set(found) if e < epoch)
    if not earlier:
        return None, ()
    return earlier[-1], tuple(earlier[:-1])


def settings_difference(mine: Mapping[str, str], theirs: Mapping[str, str]) -> str | None:
    """The first setting two processes of a flow disagree on (``name: mine here, theirs on the active``), or
    None. A key only one of them names is not compared: a process of another drkit version may say less."""
    for key in sorted(set(mine) | set(theirs)):
        if key in mine and key in theirs and mine[key] != theirs[key]:
            return f"{key}: {mine[key]} here, {theirs[key]} on the active"
    return None


@dataclass(frozen=True)
class ActiveMirror:
    """The holder of a flow's lease as ``drkit status`` shows it."""

    host: str
    pid: int
    instance: str
    epoch: int
    since_ms: int
    #: Whether its lease still ran when status read the topic (on the reader's clock, or the broker's when later).
    running: bool
    #: Seconds until its lease ends without a renewal (negative: ended that long ago).
    ends_in_seconds: float


@dataclass(frozen=True)
class StandbyMirror:
    host: str
    pid: int
    instance: str
    #: Seconds since its latest beat.
    seen_seconds_ago: float


@dataclass(frozen=True)
class LeaseReport:
    """Who mirrors a flow, read from its target's lease topic: the active process (None: nobody holds the
    lease, or its holder released it) and the processes standing by."""

    active: ActiveMirror | None
    standbys: tuple[StandbyMirror, ...]


def lease_report(view: LeaseView, now_ms: int) -> LeaseReport:
    """``view`` told at ``now_ms`` (the reader's clock; the broker's latest append time when that is later:
    an age is never younger than the truth)."""
    now = max(now_ms, view.now_ms)
    holder = view.holder
    active = (
        None
        if holder is None
        else ActiveMirror(
            holder.instance.host,
            holder.instance.pid,
            holder.instance.id,
            holder.epoch,
            holder.since_ms,
            now < holder.ends_ms,
            round((holder.ends_ms - now) / 1000, 1),
        )
    )
    standbys = tuple(
        StandbyMirror(s.instance.host, s.instance.pid, s.instance.id, round((now - s.seen_ms) / 1000, 1))
        for s in view.waiting()
    )
    return LeaseReport(active, standbys)
