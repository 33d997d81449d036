"""A drill's verdict: every record of the drill's workload accounted for, and RPO/RTO from its clock.

The drill's producer writes per-key sequence numbers; the source consumer records what the group
processed (only what it committed); after failover the target consumer records what the group read
there. Each acknowledged record ends in exactly one of these classes:

* **processed on the source** (committed there before the disaster);
* **not mirrored** (acknowledged by the source, never on the target): the RPO, a property of
  asynchronous replication and measured against the drill's budget, not a drkit loss;
* **read on the target** after failover;
* **lost**: on the target, never processed on the source and never read there. A failover that skips
  records does this. Must be 0;
* **not resumed**: the same, when the group never resumed on the target (the failover was refused):
  nothing was skipped, the drill failed for that reason;
* **read after failback**: with a failback leg, the records the group read on the source once it was
  moved back. The source keeps every record it acknowledged (a killed or partitioned broker comes back
  with its log), so after a failback every acknowledged record must have been processed somewhere: the
  unmirrored ones (the RPO) are read there, and one never read anywhere is **lost**.

Every time past the first that the group processed a record, on one cluster or across them, is a
**re-delivery** (a failover placed the group before it, or a consumer read it again before its commit):
the facts are counted record by record, repeats kept, never collapsed to sets. A key whose records the
group saw out of sequence was reordered. Both fail the drill unless its spec allows them. Pure: the
runner gathers the facts, the copies on the target by its own read of the target topic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

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


Key = tuple[str, int]  # (record key, sequence number)


@dataclass(frozen=True)
class Sent:
    key: str
    seq: int
    at_ms: int  # when the source acknowledged it
    #: Where the source's delivery report placed it (None: not known, as in hand-made accounts).
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class Budget:
    rpo_records: int | None = None  # None: not judged
    redelivered: int = 0
    lost: int = 0


@dataclass(frozen=True)
class Accounting:
    acked: int
    processed_on_source: int
    not_mirrored: int
    read_on_target: int
    lost: int
    redelivered: int
    not_resumed: int
    out_of_order_keys: int
    corrupt: int
    lost_examples: tuple[Key, ...] = ()
    redelivered_examples: tuple[Key, ...] = ()
    oldest_unmirrored_ms: int | None = None
    read_after_failback: int = 0
    failed_back: bool = False
    #: Acknowledged records the target holds more than once, beyond the first copy (the mirror's
    #: re-copies): not judged by themselves; a copy the group reads twice is a re-delivery.
    extra_copies_on_target: int = 0
    #: Acknowledged records the group read on the target of which the drill's own read of the target found
    #: no copy: that read fell short, so every figure built on it (not mirrored, RPO) is wrong.
    read_without_copy: int = 0
    read_without_copy_examples: tuple[Key, ...] = ()


@dataclass(frozen=True)
class RecordTrace:
    """One acknowledged record, and how many times each place held or processed it (``records.json``)."""

    key: str
    seq: int
    partition: int | None
    offset: int | None
    processed_on_source: int
    copies_on_target: int
    read_on_target: int
    read_after_failback: int

    @property
    def ident(self) -> Key:
        return self.key, self.seq

    @property
    def processed(self) -> int:
        """How many times the group processed it, anywhere."""
        return self.processed_on_source + self.read_on_target + self.read_after_failback


def traces(
    acked: Iterable[Sent],
    processed: Sequence[Key],
    mirrored: Iterable[Key],
    read_on_target: Sequence[Key],
    read_after_failback: Sequence[Key] | None = None,
) -> tuple[RecordTrace, ...]:
    """Every acknowledged record in acknowledgement order, each place counted record by record (a record
    seen twice counts 2). An identity acknowledged twice is refused: the producer's sequence numbers make
    each one unique, so a repeat means the facts are wrong, and a count built on them would be too."""
    sent = list(acked)
    repeated = [k for k, n in Counter((s.key, s.seq) for s in sent).items() if n > 1]
    if repeated:
        raise ValueError(f"records acknowledged more than once: {sorted(repeated)[:5]}")
    done, copies = Counter(processed), Counter(mirrored)
    read, back = Counter(read_on_target), Counter(read_after_failback or ())
    return tuple(
        RecordTrace(s.key, s.seq, s.partition, s.offset, done[k], copies[k], read[k], back[k])
        for s in sent
        for k in [(s.key, s.seq)]
    )


def account(
    acked: Iterable[Sent],
    processed: Sequence[Key],
    mirrored: Iterable[Key],
    read_on_target: Sequence[Key],
    corrupt: int = 0,
    resumed: bool = True,
    read_after_failback: Sequence[Key] | None = None,
) -> Accounting:
    """Classify every acknowledged record (see the module docstring); sequences keep the order seen and
    their repeats: a record processed twice, wherever, is a re-delivery counted once per extra time.
    ``resumed`` False: the group never resumed on the target. ``read_after_failback`` None: no failback
    leg ran (not asked for, or refused)."""
    sent = list(acked)
    at = {(s.key, s.seq): s.at_ms for s in sent}
    rows = traces(sent, processed, mirrored, read_on_target, read_after_failback)
    unmirrored = [r for r in rows if r.copies_on_target == 0 and r.processed_on_source == 0]
    if read_after_failback is None:
        unread = [r for r in rows if r.copies_on_target and not r.processed_on_source and not r.read_on_target]
    else:
        unread = [r for r in rows if r.processed == 0]
    lost = sorted(r.ident for r in unread) if resumed else []
    # Every record of the run the group processed, acknowledged or not (a record whose acknowledgement
    # was lost with the source can still be read twice).
    seen = Counter(processed) + Counter(read_on_target) + Counter(read_after_failback or ())
    redelivered = sorted(k for k, n in seen.items() if n > 1)
    uncounted = sorted(r.ident for r in rows if r.read_on_target and not r.copies_on_target)
    return Accounting(
        acked=len(rows),
        processed_on_source=sum(1 for r in rows if r.processed_on_source),
        not_mirrored=len(unmirrored),
        read_on_target=sum(1 for r in rows if r.read_on_target),
        lost=len(lost),
        not_resumed=0 if resumed else len(unread),
        redelivered=sum(n - 1 for n in seen.values() if n > 1),
        out_of_order_keys=len(_out_of_order([*processed, *read_on_target, *(read_after_failback or ())])),
        corrupt=corrupt,
        lost_examples=tuple(lost[:5]),
        redelivered_examples=tuple(redelivered[:5]),
        oldest_unmirrored_ms=min((at[r.ident] for r in unmirrored), default=None),
        read_after_failback=sum(1 for r in rows if r.read_after_failback),
        failed_back=read_after_failback is not None,
        extra_copies_on_target=sum(r.copies_on_target - 1 for r in rows if r.copies_on_target > 1),
        read_without_copy=len(uncounted),
        read_without_copy_examples=tuple(uncounted[:5]),
    )


@dataclass(frozen=True)
class Shortfall:
    """A partition a read did not take to the end offset fetched before it started."""

    partition: int
    reached: int  # the next offset the read would have returned
    end: int


def shortfalls(ends: Mapping[int, int], reached: Mapping[int, int]) -> tuple[Shortfall, ...]:
    """The partitions whose read stopped short of its end (``reached`` missing: nothing was read)."""
    return tuple(Shortfall(p, reached.get(p, 0), end) for p, end in sorted(ends.items()) if reached.get(p, 0) < end)


def shortfall_detail(topic: str, alias: str, short: Sequence[Shortfall], seconds: float) -> str:
    """One line: which partitions of which topic on which cluster were not read to their end."""
    missing = sum(s.end - s.reached for s in short)
    parts = ", ".join(f"{s.partition} at {s.reached} of {s.end}" for s in short[:5])
    more = f" and {len(short) - 5} more" if len(short) > 5 else ""
    return (
        f"the drill could not read {topic} on cluster {alias} to its end offsets within {seconds:.0f}s: "
        f"{missing} offsets unread (partition {parts}{more}); the drill cannot count the copies"
    )


def _out_of_order(seen: Sequence[Key]) -> set[str]:
    """Keys with a sequence number below one already seen and not itself seen before (a record seen
    again is a re-delivery, counted as such, not a reordering)."""
    top: dict[str, int] = {}
    before: set[Key] = set()
    bad: set[str] = set()
    for key, seq in seen:
        if key in top and seq < top[key] and (key, seq) not in before:
            bad.add(key)
        top[key] = max(seq, top.get(key, seq))
        before.add((key, seq))
    return bad


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


def accounting_dict(a: Accounting) -> dict[str, Any]:
    d = asdict(a)
    d["lost_examples"] = [list(k) for k in a.lost_examples]
    d["redelivered_examples"] = [list(k) for k in a.redelivered_examples]
    d["read_without_copy_examples"] = [list(k) for k in a.read_without_copy_examples]
    return d


def rpo(accounting: Accounting, disaster_ms: int) -> dict[str, float | int | None]:
    """RPO as measured by the drill: records not mirrored, and the age of the oldest at the disaster."""
    oldest = accounting.oldest_unmirrored_ms
    return {
        "rpo_records": accounting.not_mirrored,
        "rpo_seconds": 0.0 if oldest is None else round(max(0, disaster_ms - oldest) / 1000, 3),
    }


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
