"""Run a drill: traffic, the mirror and the translator as real processes, a disaster, failover, verify.

The drill's own steps go through the facade (``plan_failover`` to know it is ready, ``status`` to
detect the disaster, ``failover`` to move the group), the same calls the CLI and the runbooks make.
The mirror and the translator run as the operator runs them: ``drkit mirror`` and ``drkit checkpoint``
processes, their output kept in the drill's folder. Records are accounted for one by one
(drkit.core.drill); nothing here decides a verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

from drkit import __version__
from drkit.core.drill import (
    DisasterKind,
    DrillPhase,
    DrillReport,
    Timeline,
    account,
    judge,
)
from drkit.core.plan import RefusalReason
from drkit.core.status import Verdict
from drkit.core.translate import Position
from drkit.drill.spec import DrillSpec
from drkit.drill.workload import GroupConsumer, Producer, copies
from drkit.errors import ConfigError, DrkitError, RefusedError
from drkit.localdev.clusters import LocalKafka

if TYPE_CHECKING:
    from drkit.service import Drkit

#: Told each phase as it starts, with a detail line (the CLI shows it as progress).
OnPhase = Callable[[DrillPhase, str], None]


def _now_ms() -> int:
    return int(time.time() * 1000)


class DrillRunner:
    def __init__(self, service: Drkit, spec: DrillSpec, on_phase: OnPhase | None = None) -> None:
        self.service = service
        self.spec = spec
        self.on_phase = on_phase or (lambda phase, detail: None)
        config = service.config
        self.flow = config.flow(spec.drill.flow)
        self.source = config.clusters[self.flow.source]
        self.target = config.clusters[self.flow.target]
        self.target_topic = self.flow.policy().target_topic(self.flow.source, spec.workload.topic)
        self.id = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{spec.drill.name}-{uuid.uuid4().hex[:6]}"
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
        if spec.drill.disaster is DisasterKind.KILL_SOURCE:
            local = LocalKafka(spec.local_state())
            try:
                cluster = local.describe(flow.source)
            except (OSError, ValueError):
                cluster = None
            if cluster is None or not cluster.running or cluster.bootstrap_servers != self.source.bootstrap_servers:
                raise RefusedError(
                    f"disaster kill_source needs cluster {flow.source} ({self.source.bootstrap_servers}) to be a local "
                    f"cluster of scripts/local-kafka under {spec.local_state()} (set [local_kafka] state_dir); "
                    "drkit kills no broker it did not start"
                )

    def run(self) -> DrillReport:
        spec, w = self.spec, self.spec.workload
        started = _now_ms()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.on_phase(DrillPhase.PREPARE, f"topic {w.topic} ({w.partitions} partitions), group {w.group}")
        self._ensure_topic()
        producer = Producer(self.source, self.flow.source, w.topic, w.keys, w.rate_per_second)
        consumer = GroupConsumer(self.source, self.flow.source, w.topic, w.group)
        refused: str | None = None
        failover: dict[str, Any] = {}
        reported: dict[str, Any] = {}
        detected = failover_started = failover_finished = None
        resumed: GroupConsumer | None = None
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
            self.on_phase(DrillPhase.DISASTER, spec.drill.disaster.value)
            disaster = self._disaster(jobs)
            producer.finish(10)
            consumer.finish(30)
            self.on_phase(DrillPhase.DETECT, "drkit status")
            detected = self._detect()
            self._stop_jobs(jobs, wait=False)  # the mirror has nothing left to copy; not part of the RTO
            self.on_phase(DrillPhase.FAILOVER, f"drkit failover --flow '{self.flow.name}' --group {w.group} --apply")
            failover_started = _now_ms()
            try:
                result = self.service.failover(self.flow.name, [w.group], apply=True)
                failover = result.as_dict()
                reported = failover.get("rpo", {})
                if result.plan.refusals:
                    refused = "; ".join(f"{r.reason.value}: {r.detail}" for r in result.plan.refusals)
            except DrkitError as exc:
                refused = str(exc)
            if refused is not None and not self.spec.jobs.translator:
                refused += " (the translator, `drkit checkpoint`, was not running: it writes the checkpoints)"
            failover_finished = _now_ms()
            if refused is None:
                self.on_phase(DrillPhase.RESUME, f"group {w.group} on {self.flow.target} reads {self.target_topic}")
                resumed = GroupConsumer(self.target, self.flow.target, self.target_topic, w.group)
                resumed.start()
                self._wait_idle(resumed)
                resumed.finish(30)
        self.on_phase(DrillPhase.VERIFY, "every record, one by one")
        mirrored = copies(self.target, self.flow.target, self.target_topic)
        accounting = account(
            producer.sent(),
            consumer.processed,
            mirrored,
            [] if resumed is None else resumed.processed,
            consumer.corrupt + (0 if resumed is None else resumed.corrupt),
            resumed=resumed is not None,
        )
        lower = reported.get("unmirrored_offsets") if reported.get("source_reachable") is False else None
        judgement = judge(accounting, spec.budget_rules(), refused, lower)
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
            ),
            reported_rpo=reported,
            failover=failover,
            spec=spec.model_dump(mode="json"),
            drkit_version=__version__,
            started_ms=started,
            finished_ms=_now_ms(),
            report_dir=str(self.dir),
        )
        (self.dir / "report.json").write_text(json.dumps(report.as_dict(), indent=2, default=str) + "\n")
        (self.dir / "report.md").write_text(report.markdown())
        return report

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
        """Until a failover plan for the group would translate every partition (mirrored and checkpointed);
        a drill without the translator or the mirror goes on after the timeout, to fail as it would in life."""
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
            if not (self.spec.jobs.mirror and self.spec.jobs.translator):
                return  # a broken setup on purpose: nothing to wait for
            time.sleep(1.0)

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
        if kind is DisasterKind.KILL_SOURCE:
            LocalKafka(self.spec.local_state()).stop(self.flow.source, kill=True)
        elif kind is DisasterKind.STOP_MIRROR and "mirror" in jobs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(jobs["mirror"].pid, signal.SIGKILL)
        return at

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
