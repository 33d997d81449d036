"""Whether a cluster answers, as an operator command sees it at its start, and what each command does
about a cluster that does not.

Invariant: every operator command (``status``, ``offsets``, ``failover``, ``failback``) asks each cluster
it involves once, all at the same time, whether it answers (a probe bounded by the cluster's
``probe_timeout_seconds``); a cluster that did not answer is asked nothing more, so no command waits on
one unreachable cluster after another. A cluster is declared unreachable only on evidence: every
bootstrap server refused the connection (nothing listens there: known in milliseconds), the client
failed (name resolution, TLS, authentication: its own error), or no answer came within the probe's
timeout, which the message names as such ("did not answer within 2.0 s"), never as "down". Which
cluster a command cannot do without is decided here (:func:`blocking`); status and offsets do without
either and say which side is unknown.

Pure: the adapters probe and classify (``drkit.kafka.probe``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class Unreachable(StrEnum):
    """Why a cluster counts as unreachable."""

    #: Every bootstrap server refused the connection: no broker listens there (stopped, killed).
    REFUSED = "refused"
    #: No answer within the probe's timeout: a frozen or partitioned broker, an address that drops
    #: packets, or a cluster slower than the timeout (``probe_timeout_seconds`` is the operator's call).
    NO_ANSWER = "no answer"
    #: The client failed before any answer: name resolution, TLS handshake, authentication (its error).
    FAILED = "failed"


@dataclass(frozen=True)
class Reach:
    """One cluster's answer to a probe: reachable when ``problem`` is None."""

    alias: str
    problem: Unreachable | None = None
    #: The bootstrap servers (refused), or the client's own error (failed); secrets masked by the adapter.
    detail: str = ""
    #: The probe's bound (``[clusters.<alias>] probe_timeout_seconds``).
    timeout_seconds: float = 0.0
    #: How long the probe took to decide.
    seconds: float = 0.0

    @property
    def reachable(self) -> bool:
        return self.problem is None

    def message(self) -> str:
        """The operator's line for an unreachable cluster (empty when it answered)."""
        if self.problem is None:
            return ""
        if self.problem is Unreachable.REFUSED:
            return f"cluster {self.alias} is unreachable: every bootstrap server refused the connection ({self.detail})"
        if self.problem is Unreachable.NO_ANSWER:
            return (
                f"cluster {self.alias} is unreachable: it did not answer within {self.timeout_seconds:g} s "
                f"(a frozen or partitioned broker, or one slower than [clusters.{self.alias}] probe_timeout_seconds)"
            )
        return f"cluster {self.alias} is unreachable: {self.detail}"

    def as_dict(self) -> dict[str, object]:
        return {
            "cluster": self.alias,
            "reachable": self.reachable,
            "problem": None if self.problem is None else self.problem.value,
            "detail": self.detail,
            "timeout_seconds": self.timeout_seconds,
            "seconds": round(self.seconds, 3),
            "message": self.message(),
        }


class Command(StrEnum):
    """The operator commands that probe clusters."""

    STATUS = "status"
    OFFSETS = "offsets"
    FAILOVER = "failover"
    FAILBACK = "failback"
    #: drkit fence: ACLs on both clusters (drkit.core.fencing).
    FENCE = "fence"
    #: The mirror at start (a running mirror waits out a cluster instead: drkit.core.outage).
    MIRROR = "mirror"


def blocking(command: Command, source: Reach, target: Reach) -> tuple[Reach, ...]:
    """The unreachable clusters of a flow (``source`` -> ``target``) that stop ``command``; () lets it go on.

    * status: nothing stops it; an unreachable side is its verdict (drkit.core.status.flow_verdict).
    * offsets: the target (the group's offsets there are part of the answer, as before the probe);
      the source's committed offsets are shown as unknown.
    * failover: the target, where it commits; never the source (failover is for when it is gone: its
      RPO then comes from the last observation).
    * failback: both: the group's offsets are read on the target and committed on the source.
    * fence: both: drkit's denials are planned against each cluster's ACLs as they are (one that did not
      answer may hold a denial to lift), and a failover's fence that found the source gone is made once it is
      back.
    * mirror (at start): both: nothing can be planned without the source or written without the target,
      and Spark's own clients would wait minutes before saying so.
    """
    needed: tuple[Reach, ...]
    if command is Command.STATUS:
        needed = ()
    elif command in (Command.OFFSETS, Command.FAILOVER):
        needed = (target,)
    else:
        needed = (source, target)
    return tuple(r for r in needed if not r.reachable)


def blocking_message(command: Command, flow: str, down: Iterable[Reach]) -> str:
    """One line naming every cluster that stops ``command`` and why; nothing was read or changed there."""
    reasons = "; ".join(r.message() for r in down)
    return f"{command.value} {flow}: {reasons}"


def mirror_start_refusal(flow: str, source: str, down: Iterable[Reach]) -> str:
    """The line of a mirror that does not start because a cluster of its flow did not answer: each cluster
    and why, that nothing was copied, and what to do (a lost source is failed over, not waited for)."""
    down = tuple(down)
    them = "it answers" if len(down) == 1 else "they answer"
    line = (
        f"{blocking_message(Command.MIRROR, flow, down)}; nothing was copied: start the mirror again once {them} "
        "(it resumes where it stopped)"
    )
    if any(r.alias == source for r in down):
        line += f"; if {source} is lost, fail the groups over: drkit failover --flow '{flow}'"
    return line


def refusal_line(command: Command, flow: str, source: str, down: Iterable[Reach]) -> str:
    """The one line of ``command`` stopped by the clusters ``down`` of ``flow`` (whose source is ``source``)."""
    if command is Command.MIRROR:
        return mirror_start_refusal(flow, source, down)
    return blocking_message(command, flow, down)


def unreachable_lines(reaches: Mapping[str, Reach], aliases: Iterable[str]) -> tuple[str, ...]:
    """The operator's lines for the clusters of ``aliases`` that did not answer, in that order."""
    return tuple(reaches[a].message() for a in dict.fromkeys(aliases) if a in reaches and not reaches[a].reachable)
