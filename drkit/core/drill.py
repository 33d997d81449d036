"""A drill's verdict and report: pass, or fail with every reason that applies; RPO/RTO from its clock.

Pure. The accounting (drkit.core.drill_accounting) places every acknowledged record in one class; this
module judges it against the spec's budget and drkit's own figures (a refused failover or failback, the
RPO drkit reported), and writes the report. Re-deliveries and reordered keys fail the drill unless its
spec allows them; the not-mirrored records (the RPO) fail it only past the spec's budget.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from drkit.core.drill_accounting import Accounting, accounting_dict, rpo
from drkit.core.outcome import OperationResult
from drkit.core.status import RpoReport


class DisasterKind(StrEnum):
    KILL_SOURCE = "kill_source"  # SIGKILL of the source cluster's broker (local clusters)
    STOP_MIRROR = "stop_mirror"  # the mirror process is killed; the source stays up
    #: The source's broker is frozen (SIGSTOP) and thawed (SIGCONT) after the drill: connections hang
    #: and time out, as across a network partition, instead of being refused as with a dead broker.
    PARTITION_SOURCE = "partition_source"

    @property
    def needs_local_source(self) -> bool:
        """drkit only signals brokers it started (scripts/local-kafka)."""
        return self in (DisasterKind.KILL_SOURCE, DisasterKind.PARTITION_SOURCE)


class DrillVerdict(StrEnum):
    PASSED = "pass"
    FAILED = "fail"

    @property
    def exit_code(self) -> int:
        return 0 if self is DrillVerdict.PASSED else 30


class FailReason(StrEnum):
    NO_TRAFFIC = "no_traffic"  # nothing was mirrored or processed before the disaster
    FAILOVER_REFUSED = "failover_refused"  # drkit refused the failover (stale, active group, ...)
    LOST = "lost"
    REDELIVERED = "redelivered"
    OUT_OF_ORDER = "out_of_order"
    CORRUPT = "corrupt"  # a record read back does not match its checksum
    RPO_BUDGET = "rpo_budget"  # more records were not mirrored than the spec allows
    RPO_BOUND = "rpo_bound"  # drkit's lower bound of unmirrored records exceeds the records really lost
    NO_RESUME = "no_resume"  # the group read nothing on the target after failover
    FAILBACK_REFUSED = "failback_refused"  # drkit refused to move the group back to the source
    TARGET_UNCOUNTED = "target_uncounted"  # the group read copies the drill's own read of the target did not find


@dataclass(frozen=True)
class Budget:
    rpo_records: int | None = None  # None: not judged
    redelivered: int = 0
    lost: int = 0


@dataclass(frozen=True)
class Timeline:
    """Epoch milliseconds of the drill's events (None: did not happen)."""

    disaster_ms: int
    detected_ms: int | None
    failover_started_ms: int | None
    failover_finished_ms: int | None
    first_read_on_target_ms: int | None
    #: The failback leg: the source is back, the failback call, the group's first record on the source.
    source_back_ms: int | None = None
    failback_started_ms: int | None = None
    failback_finished_ms: int | None = None
    first_read_after_failback_ms: int | None = None

    def rto(self) -> dict[str, float | None]:
        """Seconds: RTO (disaster to first record read on the target) and its parts; with a failback leg,
        the failback call and the time from the source's return to the group's first record there."""
        return {
            "rto_seconds": _span(self.disaster_ms, self.first_read_on_target_ms),
            "detection_seconds": _span(self.disaster_ms, self.detected_ms),
            "failover_seconds": _span(self.failover_started_ms, self.failover_finished_ms),
            "consumer_restart_seconds": _span(self.failover_finished_ms, self.first_read_on_target_ms),
            "failback_seconds": _span(self.failback_started_ms, self.failback_finished_ms),
            "back_on_source_seconds": _span(self.source_back_ms, self.first_read_after_failback_ms),
        }


def _span(start: int | None, end: int | None) -> float | None:
    return None if start is None or end is None else round((end - start) / 1000, 3)


@dataclass(frozen=True)
class Judgement:
    verdict: DrillVerdict
    reasons: tuple[tuple[FailReason, str], ...] = field(default_factory=tuple)


def judge(
    accounting: Accounting,
    budget: Budget,
    refused: str | None = None,
    reported_unmirrored: int | None = None,
    failback_refused: str | None = None,
) -> Judgement:
    """Pass, or fail with every reason that applies (each says what was seen and what to look at)."""
    reasons: list[tuple[FailReason, str]] = []
    a = accounting
    if refused is not None:
        reasons.append((FailReason.FAILOVER_REFUSED, f"drkit refused the failover: {refused}"))
    if failback_refused is not None:
        reasons.append((FailReason.FAILBACK_REFUSED, f"drkit refused the failback: {failback_refused}"))
    if a.processed_on_source == 0 and a.acked - a.not_mirrored == 0:
        reasons.append((FailReason.NO_TRAFFIC, "nothing was mirrored or processed before the disaster"))
    if refused is None and a.read_on_target == 0 and a.acked - a.not_mirrored - a.processed_on_source > 0:
        reasons.append((FailReason.NO_RESUME, "the group read nothing on the target after failover"))
    if a.read_without_copy:
        reasons.append(
            (
                FailReason.TARGET_UNCOUNTED,
                f"the group read {a.read_without_copy} records on the target that the drill's own read of the "
                f"target did not find, e.g. {list(a.read_without_copy_examples)}: the drill's count of the target "
                "is short, so its RPO and not-mirrored figures cannot be trusted",
            )
        )
    if a.lost > budget.lost:
        what = (
            "acknowledged records were never read by the group, failover and failback"
            if a.failed_back
            else ("mirrored records were never read by the group")
        )
        reasons.append((FailReason.LOST, f"{a.lost} {what}, e.g. {list(a.lost_examples)}"))
    if a.redelivered > budget.redelivered:
        reasons.append(
            (
                FailReason.REDELIVERED,
                f"{a.redelivered} records were delivered to the group twice (allowed {budget.redelivered}), "
                f"e.g. {list(a.redelivered_examples)}: was the translator running (checkpoint age)?",
            )
        )
    if a.out_of_order_keys:
        reasons.append((FailReason.OUT_OF_ORDER, f"{a.out_of_order_keys} keys were read out of sequence"))
    if a.corrupt:
        reasons.append((FailReason.CORRUPT, f"{a.corrupt} records read back do not match their checksum"))
    if budget.rpo_records is not None and a.not_mirrored > budget.rpo_records:
        reasons.append(
            (
                FailReason.RPO_BUDGET,
                f"{a.not_mirrored} records were not mirrored at the disaster (budget {budget.rpo_records}): "
                "the mirror lags; check `drkit status`",
            )
        )
    if reported_unmirrored is not None and reported_unmirrored > a.not_mirrored:
        reasons.append(
            (
                FailReason.RPO_BOUND,
                f"drkit reported at least {reported_unmirrored} unmirrored records, only {a.not_mirrored} were",
            )
        )
    return Judgement(DrillVerdict.FAILED if reasons else DrillVerdict.PASSED, tuple(reasons))


class DrillPhase(StrEnum):
    PREPARE = "prepare"
    START_JOBS = "start jobs"
    WAIT_READY = "wait for mirror and checkpoints"
    WARMUP = "traffic"
    STOP_CONSUMERS = "stop consumers"
    MIRROR_STOPS = "mirror stops (lag)"
    BYSTANDER = "group member on target"
    DISASTER = "disaster"
    DETECT = "detect"
    FAILOVER = "failover"
    RESUME = "resume on target"
    SOURCE_BACK = "source back"
    FAILBACK = "failback"
    RESUME_ON_SOURCE = "resume on source"
    VERIFY = "verify"
    RESTORE = "restore"


@dataclass(frozen=True)
class DrillReport:
    """One drill run: what happened, every record accounted for, RPO and RTO, and the verdict."""

    id: str
    name: str
    flow: str
    disaster: DisasterKind
    judgement: Judgement
    accounting: Accounting
    timeline: Timeline
    failover: OperationResult | None  # the failover result as the facade returned it (None if never run)
    spec: dict[str, Any]
    drkit_version: str
    started_ms: int
    finished_ms: int
    report_dir: str = ""
    failback: OperationResult | None = None  # the failback result (None if none ran)

    @property
    def reported_rpo(self) -> RpoReport | None:
        """What drkit's failover reported (its lower bound, its estimate): the failover's own figure."""
        return None if self.failover is None else self.failover.rpo

    @property
    def verdict(self) -> DrillVerdict:
        return self.judgement.verdict

    def measured(self) -> dict[str, Any]:
        return {**rpo(self.accounting, self.timeline.disaster_ms), **self.timeline.rto()}

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "flow": self.flow,
            "disaster": self.disaster.value,
            "verdict": self.verdict.value,
            "reasons": [{"reason": r.value, "detail": d} for r, d in self.judgement.reasons],
            "records": accounting_dict(self.accounting),
            "measured": self.measured(),
            "timeline_ms": asdict(self.timeline),
            "reported_rpo": {} if self.reported_rpo is None else self.reported_rpo.as_dict(),
            "failover": {} if self.failover is None else self.failover.as_dict(),
            "failback": {} if self.failback is None else self.failback.as_dict(),
            "spec": self.spec,
            "drkit_version": self.drkit_version,
            "started_ms": self.started_ms,
            "finished_ms": self.finished_ms,
            "report_dir": self.report_dir,
        }

    def markdown(self) -> str:
        a, m = self.accounting, self.measured()
        lines = [
            f"# Drill {self.name}: {self.verdict.value.upper()}",
            "",
            f"- id `{self.id}`, flow `{self.flow}`, disaster `{self.disaster.value}`, drkit {self.drkit_version}",
            "",
            "## Records",
            "",
            "| acknowledged | processed on source | not mirrored (RPO) | read on target | read after failback "
            "| lost | re-delivered | not resumed | keys out of order | corrupt |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            f"| {a.acked} | {a.processed_on_source} | {a.not_mirrored} | {a.read_on_target} "
            f"| {a.read_after_failback if a.failed_back else '-'} | {a.lost} "
            f"| {a.redelivered} | {a.not_resumed} | {a.out_of_order_keys} | {a.corrupt} |",
            "",
            "## RPO and RTO",
            "",
            "| RPO records | RPO seconds | RTO seconds | detection | failover | consumer restart | failback "
            "| source back to first record |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
            "| {rpo_records} | {rpo_seconds} | {rto_seconds} | {detection_seconds} | {failover_seconds} "
            "| {consumer_restart_seconds} | {failback_seconds} | {back_on_source_seconds} |".format(
                **{k: "-" if v is None else v for k, v in m.items()}
            ),
            "",
            f"drkit's failover reported: {_reported(self.reported_rpo)}",
        ]
        if self.judgement.reasons:
            lines += ["", "## Why it failed", ""] + [f"- **{r.value}**: {d}" for r, d in self.judgement.reasons]
        return "\n".join(lines) + "\n"


def _reported(rpo: RpoReport | None) -> str:
    """drkit's own RPO figure as the failover printed it: exact when live, else a bound and an estimate."""
    if rpo is None:
        return "- (no failover ran)"
    n = rpo.unmirrored_offsets
    figure = "unknown" if n is None else (f"at least {n}" if rpo.lower_bound else str(n))
    text = f"{figure} unmirrored offsets (source ends from {rpo.source_ends_from.value}"
    if rpo.observation_age_seconds is not None:
        text += f", observed {rpo.observation_age_seconds}s before"
    text += ")"
    if rpo.estimated_since_observation is not None:
        text += f", estimated {rpo.estimated_since_observation} more produced after the observation"
    return text


@dataclass(frozen=True)
class DrillRecord:
    """A row of the ``drills`` table (``drkit drill history``)."""

    id: str
    name: str
    flow: str
    disaster: str
    verdict: str
    reasons: tuple[str, ...]
    acked: int
    lost: int
    redelivered: int
    rpo_records: int
    rpo_ms: int
    rto_ms: int | None
    report: str
    drkit_version: str
    started_ms: int
    finished_ms: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
