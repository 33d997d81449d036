"""Run a drill: traffic, the mirror and the translator as real processes, a disaster, failover, verify.

The drill's own steps go through the facade (``plan_failover`` to know it is ready, ``status`` to
detect the disaster, ``failover`` to move the group), the same calls the CLI and the runbooks make.
The mirror and the translator run as the operator runs them: ``drkit mirror`` and ``drkit checkpoint``
processes, their output kept in the drill's folder. Records are accounted for one by one
(drkit.core.drill), the copies by the drill's own read of the target topic to its end (an error, not a
verdict, when that read cannot be done); nothing here decides a verdict. ``records.json`` in the
drill's folder lists every acknowledged record with where it was held and processed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import IO, TYPE_CHECKING, Protocol

from drkit._version import __version__
from drkit.core.audit import OperationStatus
from drkit.core.drill import DisasterKind, DrillPhase, DrillReport, Timeline, judge
from drkit.core.drill_accounting import Key, account, traces
from drkit.core.refusals import RefusalReason
from drkit.core.status import Verdict
from drkit.core.translate import Position
from drkit.drill.spec import DrillSpec
from drkit.drill.workload import Bystander, GroupConsumer, OnAcked, Producer, copies
from drkit.errors import ConfigError, DrkitError, RefusedError
from drkit.localdev.clusters import LocalKafka

if TYPE_CHECKING:
    from drkit.config import DrkitConfig
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


def _now_ms() -> int:
    return int(time.time() * 1000)


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
        if spec.drill.disaster.needs_local_source:
            local = LocalKafka(spec.local_state())
            try:
                cluster = local.describe(flow.source)
            except (OSError, ValueError):
                cluster = None
            if cluster is None or not cluster.running or cluster.bootstrap_servers != self.source.bootstrap_servers:
                raise RefusedError(
                    f"disaster {spec.drill.disaster.value} needs cluster {flow.source} "
                    f"({self.source.bootstrap_servers}) to be a local cluster of "
                    f"scripts/local-kafka under {spec.local_state()} (set [local_kafka] state_dir); "
                    "drkit signals no broker it did not start"
                )

    def run(self) -> DrillReport:
        """The drill, and whatever happens, the source given back (thawed; restarted if ``restore``)."""
        self._disaster_struck = False
        try:
            return self._run()
        finally:
            self._restore()

    def _run(self) -> DrillReport:
        spec, w = self.spec, self.spec.workload
        started = _now_ms()
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
        with self._jobs() as jobs:
            producer.start()
            consumer.start()
            self.on_phase(DrillPhase.WAIT_READY, "the mirror copies and the translator checkpoints the group")
            self._wait_ready(jobs)
            self.on_phase(DrillPhase.WARMUP, f"{w.warmup_seconds:.0f}s at {w.rate_per_second:.0f} records/s")
            time.sleep(w.warmup_seconds)
            if w.consumers_stop_before_disaster_seconds > 0:
                self.on_phase(DrillPhase.STOP_CONSUMERS, f"{w.consumers_stop_before_disaster_seconds:.0f}s before")
                consumer.finish(30)
                time.sleep(w.consumers_stop_before_disaster_seconds)
                self._wait_mirrored_past_group()
            if spec.jobs.mirror_lag_seconds > 0 and "mirror" in jobs:
                self.on_phase(DrillPhase.MIRROR_STOPS, f"{spec.jobs.mirror_lag_seconds:.0f}s before the disaster")
                self._kill(jobs["mirror"])
                time.sleep(spec.jobs.mirror_lag_seconds)
            if spec.jobs.group_active_on_target:
                bystander = Bystander(self.target, self.flow.target, self.target_topic, w.group)
                self.on_phase(DrillPhase.BYSTANDER, f"a member of {w.group} consumes on {self.flow.target}")
                if not bystander.start():
                    raise RefusedError(f"the drill's member of {w.group} could not join on {self.flow.target}")
            self.on_phase(DrillPhase.DISASTER, spec.drill.disaster.value)
            disaster = self._disaster(jobs)

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
            detected = self._detect()
            self._stop_jobs(jobs, wait=False)  # the mirror has nothing left to copy; not part of the RTO
            self.on_phase(DrillPhase.FAILOVER, f"drkit failover --flow '{self.flow.name}' --group {w.group} --apply")
            failover_started = _now_ms()
            failover, refused = self._move(self.service.failover, "failover")
            reported = None if failover is None else failover.rpo
            if refused is not None and not self.spec.jobs.translator:
                refused += " (the translator, `drkit checkpoint`, was not running: it writes the checkpoints)"
            failover_finished = _now_ms()
            if bystander is not None:
                bystander.finish()
            if refused is None:
                self.on_phase(DrillPhase.RESUME, f"group {w.group} on {self.flow.target} reads {self.target_topic}")
                resumed = GroupConsumer(self.target, self.flow.target, self.target_topic, self.tag, w.group)
                resumed.start()
                self._wait_idle(resumed)
                resumed.finish(30)
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
                disaster,
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
            finished_ms=_now_ms(),
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
        self._restore()
        back.source_back_ms = _now_ms()
        self.on_phase(DrillPhase.FAILBACK, f"drkit failback --flow '{self.flow.name}' --group {w.group} --apply")
        back.started_ms = _now_ms()
        result, refused = self._move(self.service.failback, "failback")
        back.finished_ms = _now_ms()
        if refused is None:
            self.on_phase(DrillPhase.RESUME_ON_SOURCE, f"group {w.group} on {self.flow.source} reads {w.topic}")
            home = GroupConsumer(self.source, self.flow.source, w.topic, self.tag, w.group)
            home.start()
            self._wait_idle(home)
            home.finish(30)
            back.ran, back.processed, back.corrupt, back.first_ms = True, home.processed, home.corrupt, home.first_ms
        return result, refused

    def _restore(self) -> None:
        """Undo the disaster: a frozen source is always thawed; a killed one restarted if the spec says so."""
        if not getattr(self, "_disaster_struck", False):
            return
        kind, local = self.spec.drill.disaster, LocalKafka(self.spec.local_state())
        if kind is DisasterKind.PARTITION_SOURCE:
            # Thawed, the broker finds its controller session expired and is fenced until it registers
            # again: the source is back once it serves a produce and a fetch again.
            if local.thaw(self.flow.source):
                local.wait_ready(self.flow.source, time.monotonic() + 120)
            self._disaster_struck = False
        elif kind is DisasterKind.KILL_SOURCE and (self.spec.local_kafka.restore or self.spec.drill.failback):
            self.on_phase(DrillPhase.RESTORE, f"scripts/local-kafka start {self.flow.source}")
            local.start(self.flow.source)
            self._disaster_struck = False

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
    def _jobs(self) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
        jobs: dict[str, subprocess.Popen[bytes]] = {}
        logs: list[IO[bytes]] = []
        config = str(self.service.config.source_path)
        commands = {
            "mirror": ["mirror", "-c", config, "--flow", self.flow.name],
            "checkpoint": ["checkpoint", "-c", config, "--flow", self.flow.name],
        }
        wanted = {"mirror": self.spec.jobs.mirror, "checkpoint": self.spec.jobs.translator}
        self.on_phase(DrillPhase.START_JOBS, ", ".join(f"drkit {n}" for n in commands if wanted[n]) or "none")
        try:
            for name, args in commands.items():
                if not wanted[name]:
                    continue
                log = (self.dir / f"{name}.log").open("wb")
                logs.append(log)
                jobs[name] = subprocess.Popen(
                    [sys.executable, "-m", "drkit.cli.app", *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            yield jobs
        finally:
            self._stop_jobs(jobs, wait=True)
            for opened in logs:
                opened.close()

    def _stop_jobs(self, jobs: dict[str, subprocess.Popen[bytes]], wait: bool) -> None:
        for proc in jobs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGINT)
        if not wait:
            return
        for proc in jobs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)

    def _wait_ready(self, jobs: dict[str, subprocess.Popen[bytes]]) -> None:
        """Until a failover plan for the group would translate every partition (mirrored and checkpointed); a
        drill without the translator until the mirror created its copy of the topic, one without the mirror
        at once: each goes on to fail as it would in life."""
        deadline = time.monotonic() + self.spec.workload.ready_timeout_seconds
        while time.monotonic() < deadline:
            for name, proc in jobs.items():
                if proc.poll() is not None:
                    tail = (self.dir / f"{name}.log").read_text(errors="replace").strip().splitlines()[-1:]
                    raise RefusedError(f"drkit {name} ended (exit {proc.returncode}): {' '.join(tail)}")
            try:
                plan = self.service.plan_failover(self.flow.name, [self.spec.workload.group])
                if plan.moves and not any(r.reason is RefusalReason.UNTRANSLATABLE for r in plan.refusals):
                    return
            except DrkitError:
                pass
            if not self.spec.jobs.mirror:
                return  # a broken setup on purpose: nothing to wait for
            if not self.spec.jobs.translator and self._target_topic_exists():
                return  # no translator on purpose: ready once the mirror copies (the drill reads the copies)
            time.sleep(1.0)

    def _target_topic_exists(self) -> bool:
        from drkit.kafka import clients

        with contextlib.suppress(Exception):  # not yet answering: asked again until the deadline
            meta = clients.admin(self.target, self.flow.target).list_topics(self.target_topic, timeout=10)
            found = meta.topics.get(self.target_topic)
            return found is not None and found.error is None and bool(found.partitions)
        return False

    def _wait_mirrored_past_group(self) -> None:
        """Until the mirror has copied records the stopped group has not processed, on every partition,
        and the translator has its last commit (at most ready_timeout_seconds): the group then has
        something to resume on the target, and the RTO a first record to measure."""
        if not (self.spec.jobs.mirror and self.spec.jobs.translator):
            return  # a broken setup on purpose: nothing to wait for
        deadline = time.monotonic() + self.spec.workload.ready_timeout_seconds
        while time.monotonic() < deadline:
            with contextlib.suppress(DrkitError):
                plan = self.service.plan_failover(self.flow.name, [self.spec.workload.group])
                if plan.moves and all(m.position is Position.MIRRORED for m in plan.moves):
                    return
            time.sleep(0.5)

    def _disaster(self, jobs: dict[str, subprocess.Popen[bytes]]) -> int:
        kind = self.spec.drill.disaster
        at = _now_ms()
        # Struck only once the signal went out: a PID file refused (RefusedError, drkit.localdev.broker_process)
        # signalled nothing, and there is nothing to thaw or restart.
        if kind is DisasterKind.KILL_SOURCE:
            LocalKafka(self.spec.local_state()).stop(self.flow.source, kill=True)
        elif kind is DisasterKind.PARTITION_SOURCE:
            LocalKafka(self.spec.local_state()).freeze(self.flow.source)
        elif kind is DisasterKind.STOP_MIRROR and "mirror" in jobs:
            self._kill(jobs["mirror"])
        self._disaster_struck = True
        return at

    @staticmethod
    def _kill(job: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            job.wait(10)  # reaped: the job is gone for status at once, as a killed process is on a host

    def _detect(self, timeout: float = 120.0) -> int | None:
        """When ``drkit status`` first shows the disaster (source unreachable, or the mirror not running)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(DrkitError):
                [flow] = self.service.status(self.flow.name).flows
                if flow.verdict is Verdict.SOURCE_UNREACHABLE or not flow.mirror_running:
                    return _now_ms()
            time.sleep(0.5)
        return None

    def _wait_idle(self, consumer: GroupConsumer, first_within: float = 120.0) -> None:
        """Until the target consumer, once it read its first record (joining the group takes seconds),
        has read nothing new for ``idle_seconds``; or an error stopped it."""
        idle = self.spec.workload.idle_seconds
        started = time.monotonic()
        seen, quiet_since = 0, started
        while consumer.is_alive():
            now = time.monotonic()
            if len(consumer.processed) != seen:
                seen, quiet_since = len(consumer.processed), now
            elif (seen == 0 and now - started >= first_within) or (seen and now - quiet_since >= idle):
                return
            time.sleep(0.2)
