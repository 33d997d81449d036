"""Run a drill: traffic, the mirror and the translator as real processes, a disaster, failover, verify.

The drill's own steps go through the facade (``plan_failover`` to know it is ready, ``status`` to
detect the disaster, ``failover`` to move the group), the same calls the CLI and the runbooks make.
The mirror and the translator run as the operator runs them: ``drkit mirror`` and ``drkit checkpoint``
processes, their output kept in the drill's folder (drkit.drill.jobs); the disaster is struck and
undone by drkit.drill.disaster; every wait polls the facade (drkit.drill.waits). Records are accounted
for one by one (drkit.core.drill_accounting), the copies by the drill's own read of the target topic to
its end (an error, not a verdict, when that read cannot be done); nothing here decides a verdict.
``records.json`` in the drill's folder lists every acknowledged record with where it was held and processed.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Protocol

from drkit._version import __version__
from drkit.core.audit import OperationStatus
from drkit.core.drill import DrillPhase, DrillReport, Timeline, judge
from drkit.core.drill_accounting import Key, account, traces
from drkit.drill import jobs, waits
from drkit.drill.clock import now_ms
from drkit.drill.disaster import Disaster, require_local_source
from drkit.drill.spec import DrillSpec
from drkit.drill.workload import Bystander, GroupConsumer, OnAcked, Producer, copies
from drkit.errors import ConfigError, DrkitError, RefusedError

if TYPE_CHECKING:
    from drkit.config import ClusterConfig, DrkitConfig
    from drkit.core.outcome import OperationResult
    from drkit.core.plan import Plan
    from drkit.core.status import RpoReport, StatusReport
    from drkit.layout import StateLayout


class DrillFacade(Protocol):
    """What a drill asks of the facade (``drkit.service.Drkit``): the same calls the CLI and runbooks make.

    A protocol, so the drill depends on the calls it makes and not on the facade's module (which runs drills).
    """

    @property
    def config(self) -> DrkitConfig: ...

    @property
    def layout(self) -> StateLayout: ...

    def failover(self, flow: str, groups: list[str] | None, *, apply: bool = False) -> OperationResult: ...

    def failback(self, flow: str, groups: list[str] | None, *, apply: bool = False) -> OperationResult: ...

    def plan_failover(self, flow: str, groups: list[str] | None) -> Plan: ...

    def status(self, flow: str | None = None) -> StatusReport: ...


#: Told each phase as it starts, with a detail line (the CLI shows it as progress).
OnPhase = Callable[[DrillPhase, str], None]


@dataclass
class _Leg:
    """What the failback leg saw (filled in as it goes; ``ran`` once the group read on the source)."""

    ran: bool = False
    processed: list[Key] = field(default_factory=list)
    corrupt: int = 0
    source_back_ms: int | None = None
    started_ms: int | None = None
    finished_ms: int | None = None
    first_ms: int | None = None


class DrillRunner:
    def __init__(
        self,
        service: DrillFacade,
        spec: DrillSpec,
        on_phase: OnPhase | None = None,
        on_acked: OnAcked | None = None,
    ) -> None:
        """``on_acked``: told every delivery report of the drill's producer, as the client got it (a
        check of the drill's own account against the source's acknowledgements)."""
        self.service = service
        self.spec = spec
        self.on_phase = on_phase or (lambda phase, detail: None)
        self.on_acked = on_acked
        config = service.config
        self.flow = config.flow(spec.drill.flow)
        self.source = config.clusters[self.flow.source]
        self.target = config.clusters[self.flow.target]
        self.target_topic = self.flow.policy().target_topic(self.flow.source, spec.workload.topic)
        self.tag = uuid.uuid4().hex[:6]  # in every record's key: earlier runs' records are not this drill's
        self.id = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{spec.drill.name}-{self.tag}"
        self.dir = service.layout.drill_dir(self.id)
        self.disaster = Disaster(spec, self.flow.source, self.on_phase)
        self._check()

    def _check(self) -> None:
        """Refuse a drill that cannot work before touching anything (one line, what to change)."""
        spec, flow, config = self.spec, self.flow, self.service.config
        if config.source_path is None:
            raise ConfigError("a drill runs the mirror and the translator as processes: load the config from a file")
        if not config.topic_selector(flow).matches(spec.workload.topic):
            raise ConfigError(
                f"drill topic {spec.workload.topic} is not selected by flow {flow.name}: add it to the flow's topics"
            )
        if not flow.group_selector().matches(spec.workload.group):
            raise ConfigError(
                f"drill group {spec.workload.group} is not selected by flow {flow.name}: add it to the flow's groups"
            )
        require_local_source(spec, flow.source, self.source)

    def run(self) -> DrillReport:
        """The drill, and whatever happens, the source given back (thawed; restarted if ``restore``)."""
        self.disaster.struck = False
        try:
            return self._run()
        finally:
            self.disaster.restore()

    def _run(self) -> DrillReport:
        spec, w = self.spec, self.spec.workload
        started = now_ms()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.on_phase(DrillPhase.PREPARE, f"topic {w.topic} ({w.partitions} partitions), group {w.group}")
        self._ensure_topic()
        producer = Producer(self.source, self.flow.source, w.topic, self.tag, w.keys, w.rate_per_second, self.on_acked)
        consumer = GroupConsumer(self.source, self.flow.source, w.topic, self.tag, w.group)
        refused = failback_refused = None
        failover: OperationResult | None = None
        failback: OperationResult | None = None
        reported: RpoReport | None = None
        detected = failover_started = failover_finished = None
        back = _Leg()
        resumed: GroupConsumer | None = None
        bystander: Bystander | None = None
        with self._jobs() as running:
            producer.start()
            consumer.start()
            self.on_phase(DrillPhase.WAIT_READY, "the mirror copies and the translator checkpoints the group")
            self._wait_ready(running)
            self.on_phase(DrillPhase.WARMUP, f"{w.warmup_seconds:.0f}s at {w.rate_per_second:.0f} records/s")
            time.sleep(w.warmup_seconds)
            if w.consumers_stop_before_disaster_seconds > 0:
                self.on_phase(DrillPhase.STOP_CONSUMERS, f"{w.consumers_stop_before_disaster_seconds:.0f}s before")
                consumer.finish(30)
                time.sleep(w.consumers_stop_before_disaster_seconds)
                if spec.jobs.mirror and spec.jobs.translator:  # else a broken setup on purpose: nothing to wait for
                    waits.until_mirrored_past_group(
                        self.service.plan_failover, self.flow.name, w.group, w.ready_timeout_seconds
                    )
            if spec.jobs.mirror_lag_seconds > 0 and "mirror" in running:
                self.on_phase(DrillPhase.MIRROR_STOPS, f"{spec.jobs.mirror_lag_seconds:.0f}s before the disaster")
                jobs.kill(running["mirror"])
                time.sleep(spec.jobs.mirror_lag_seconds)
            if spec.jobs.group_active_on_target:
                bystander = Bystander(self.target, self.flow.target, self.target_topic, w.group)
                self.on_phase(DrillPhase.BYSTANDER, f"a member of {w.group} consumes on {self.flow.target}")
                if not bystander.start():
                    raise RefusedError(f"the drill's member of {w.group} could not join on {self.flow.target}")
            self.on_phase(DrillPhase.DISASTER, spec.drill.disaster.value)
            struck_ms = self.disaster.strike(running)

            # The workload winds down while drkit detects and fails over, as applications do not wait for
            # the operator: the producer's flush towards a dead source (its message timeout) is not drkit's
            # detection time. Joined before anything reads its records or the source comes back. A source
            # that stays up (stop_mirror) still takes the group's commits: its consumers stop first, so the
            # translator, stopped after the detection, has seen their last commit.
            source_gone = spec.drill.disaster.needs_local_source
            if not source_gone:
                consumer.finish(30)

            def wind_down() -> None:
                producer.finish(10)
                if source_gone:
                    consumer.finish(30)

            winding = threading.Thread(target=wind_down, name="drkit-drill-wind-down", daemon=True)
            winding.start()
            self.on_phase(DrillPhase.DETECT, "drkit status")
            detected = waits.detect(self.service.status, self.flow.name)
            jobs.stop(running, wait=False)  # the mirror has nothing left to copy; not part of the RTO
            self.on_phase(DrillPhase.FAILOVER, f"drkit failover --flow '{self.flow.name}' --group {w.group} --apply")
            failover_started = now_ms()
            failover, refused = self._move(self.service.failover, "failover")
            reported = None if failover is None else failover.rpo
            if refused is not None and not self.spec.jobs.translator:
                refused += " (the translator, `drkit checkpoint`, was not running: it writes the checkpoints)"
            failover_finished = now_ms()
            if bystander is not None:
                bystander.finish()
            if refused is None:
                resumed = self._read_until_idle(DrillPhase.RESUME, self.target, self.flow.target, self.target_topic)
                winding.join()  # the source's records are final before the source comes back
                if spec.drill.failback:
                    failback, failback_refused = self._failback_leg(back)
            winding.join()
        self.on_phase(DrillPhase.VERIFY, "every record, one by one")
        mirrored = copies(self.target, self.flow.target, self.target_topic, self.tag)
        sent, on_target = producer.sent(), [] if resumed is None else resumed.processed
        after_failback = back.processed if back.ran else None
        accounting = account(
            sent,
            consumer.processed,
            mirrored,
            on_target,
            consumer.corrupt + (0 if resumed is None else resumed.corrupt) + back.corrupt,
            resumed=resumed is not None,
            read_after_failback=after_failback,
        )
        rows = traces(sent, consumer.processed, mirrored, on_target, after_failback)
        (self.dir / "records.json").write_text(json.dumps([asdict(r) for r in rows]) + "\n")
        lower = reported.unmirrored_offsets if reported is not None and not reported.source_reachable else None
        judgement = judge(accounting, spec.budget_rules(), refused, lower, failback_refused)
        report = DrillReport(
            id=self.id,
            name=spec.drill.name,
            flow=self.flow.name,
            disaster=spec.drill.disaster,
            judgement=judgement,
            accounting=accounting,
            timeline=Timeline(
                struck_ms,
                detected,
                failover_started,
                failover_finished,
                None if resumed is None else resumed.first_ms,
                back.source_back_ms,
                back.started_ms,
                back.finished_ms,
                back.first_ms,
            ),
            failover=failover,
            failback=failback,
            spec=spec.model_dump(mode="json"),
            drkit_version=__version__,
            started_ms=started,
            finished_ms=now_ms(),
            report_dir=str(self.dir),
        )
        (self.dir / "report.json").write_text(json.dumps(report.as_dict(), indent=2, default=str) + "\n")
        (self.dir / "report.md").write_text(report.markdown())
        return report

    def _move(self, call: Callable[..., OperationResult], what: str) -> tuple[OperationResult | None, str | None]:
        """One facade call (failover or failback of the drill's group, applied): its result, and why drkit
        refused if it did."""
        try:
            result = call(self.flow.name, [self.spec.workload.group], apply=True)
        except DrkitError as exc:
            return None, str(exc)
        refused = None
        if result.plan.refusals:
            refused = "; ".join(f"{r.reason.value}: {r.detail}" for r in result.plan.refusals)
        elif result.status is not OperationStatus.APPLIED:
            refused = f"the {what} was not applied ({result.status})"
        return result, refused

    def _failback_leg(self, back: _Leg) -> tuple[OperationResult | None, str | None]:
        """The source comes back; failback moves the group home; it reads there until idle."""
        w = self.spec.workload
        self.on_phase(DrillPhase.SOURCE_BACK, f"{self.flow.source} ({self.spec.drill.disaster.value} undone)")
        self.disaster.restore()
        back.source_back_ms = now_ms()
        self.on_phase(DrillPhase.FAILBACK, f"drkit failback --flow '{self.flow.name}' --group {w.group} --apply")
        back.started_ms = now_ms()
        result, refused = self._move(self.service.failback, "failback")
        back.finished_ms = now_ms()
        if refused is None:
            home = self._read_until_idle(DrillPhase.RESUME_ON_SOURCE, self.source, self.flow.source, w.topic)
            back.ran, back.processed, back.corrupt, back.first_ms = True, home.processed, home.corrupt, home.first_ms
        return result, refused

    # -- steps ----------------------------------------------------------------------------------

    def _ensure_topic(self) -> None:
        from confluent_kafka.admin import NewTopic

        from drkit.kafka import clients

        admin = clients.admin(self.source, self.flow.source)
        w = self.spec.workload
        if w.topic in admin.list_topics(timeout=15).topics:
            return
        future = admin.create_topics([NewTopic(w.topic, w.partitions, 1)], request_timeout=15)[w.topic]
        with contextlib.suppress(Exception):  # created meanwhile: the listing below decides
            future.result(30)
        if w.topic not in admin.list_topics(timeout=15).topics:
            raise RefusedError(f"cannot create drill topic {w.topic} on {self.flow.source}: create it by hand")

    @contextlib.contextmanager
    def _jobs(self) -> Iterator[jobs.Jobs]:
        config = str(self.service.config.source_path)
        wanted = {"mirror": self.spec.jobs.mirror, "checkpoint": self.spec.jobs.translator}
        started = ", ".join(f"drkit {n}" for n in jobs.commands(config, self.flow.name) if wanted[n]) or "none"
        self.on_phase(DrillPhase.START_JOBS, started)
        with jobs.running(self.dir, config, self.flow.name, wanted) as running:
            yield running

    def _wait_ready(self, running: jobs.Jobs) -> None:
        """Until the group could fail over (see :func:`waits.until_ready`); refused when a job ended."""
        waits.until_ready(
            self.service.plan_failover,
            self.flow.name,
            self.spec.workload.group,
            self.spec.workload.ready_timeout_seconds,
            alive=lambda: jobs.require_running(running, self.dir),
            mirror=self.spec.jobs.mirror,
            translator=self.spec.jobs.translator,
            target_topic_exists=self._target_topic_exists,
        )

    def _target_topic_exists(self) -> bool:
        from drkit.kafka import clients

        with contextlib.suppress(Exception):  # not yet answering: asked again until the deadline
            meta = clients.admin(self.target, self.flow.target).list_topics(self.target_topic, timeout=10)
            found = meta.topics.get(self.target_topic)
            return found is not None and found.error is None and bool(found.partitions)
        return False

    def _read_until_idle(self, phase: DrillPhase, cluster: ClusterConfig, alias: str, topic: str) -> GroupConsumer:
        """The drill's group reads ``topic`` on ``alias`` until idle (see :func:`waits.until_idle`)."""
        group = self.spec.workload.group
        self.on_phase(phase, f"group {group} on {alias} reads {topic}")
        consumer = GroupConsumer(cluster, alias, topic, self.tag, group)
        consumer.start()
        waits.until_idle(consumer, self.spec.workload.idle_seconds)
        consumer.finish(30)
        return consumer
