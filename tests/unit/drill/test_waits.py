"""The drill's waits end when they see what they wait for, or at their deadline; a facade error is asked again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from drkit.core.audit import Action
from drkit.core.plan import Move, Plan
from drkit.core.refusals import RefusalReason, active_group, untranslatable
from drkit.core.status import StatusReport, Verdict
from drkit.core.translate import Position
from drkit.drill import waits
from drkit.errors import ClusterError, RefusedError


class Clock:
    """time for drkit.drill.waits: sleeping moves it on, nothing waits."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(waits, "time", fake)
    return fake


def move(position: Position) -> Move:
    return Move("g", "orders", "A.orders", 0, 5, None, None if position is Position.UNMIRRORED else 5, position)


def plans(*answers: Plan | Exception) -> waits.PlanFailover:
    """The facade's plan_failover answering in turn (the last answer again once they are used up)."""
    queue = list(answers)

    def plan_failover(flow: str, groups: list[str] | None) -> Plan:
        assert (flow, groups) == ("A->B", ["g"])
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return plan_failover


UNTRANSLATED = Plan(Action.FAILOVER, "A->B", "B", (move(Position.UNMIRRORED),), (untranslatable("g", "orders", 0, 5),))
READY = Plan(Action.FAILOVER, "A->B", "B", (move(Position.PAST_END),), (active_group("g", "B", ()),))
MIRRORED = Plan(Action.FAILOVER, "A->B", "B", (move(Position.MIRRORED),))


def ready(plan_failover: waits.PlanFailover, **kwargs: object) -> None:
    args: dict[str, object] = {"alive": lambda: None, "mirror": True, "translator": True}
    args["target_topic_exists"] = lambda: False
    waits.until_ready(plan_failover, "A->B", "g", 60, **(args | kwargs))  # type: ignore[arg-type]


def test_ready_once_a_plan_translates_every_partition_whatever_else_it_refuses(clock: Clock) -> None:
    ready(plans(ClusterError("not yet"), UNTRANSLATED, READY))
    assert clock.now == 2.0  # asked three times, a second apart
    assert READY.refusals[0].reason is RefusalReason.ACTIVE_GROUP


def test_a_job_that_ended_stops_the_wait(clock: Clock) -> None:
    def alive() -> None:
        if clock.now >= 3:
            raise RefusedError("drkit mirror ended (exit 1): boom")

    with pytest.raises(RefusedError, match="mirror ended"):
        ready(plans(UNTRANSLATED), alive=alive)
    assert clock.now == 3.0


def test_broken_setups_on_purpose_wait_only_for_what_they_have(clock: Clock) -> None:
    ready(plans(UNTRANSLATED), mirror=False)
    assert clock.now == 0.0  # no mirror: nothing to wait for
    ready(plans(UNTRANSLATED), translator=False, target_topic_exists=lambda: clock.now >= 4)
    assert clock.now == 4.0  # no translator: ready once the mirror made its copy of the topic


def test_every_wait_ends_at_its_deadline(clock: Clock) -> None:
    ready(plans(UNTRANSLATED))
    assert clock.now == 60.0
    clock.now = 0.0
    waits.until_mirrored_past_group(plans(READY), "A->B", "g", 30)
    assert clock.now == 30.0  # past the synced end on a partition: not yet mirrored past the group


def test_mirrored_past_the_group_on_every_partition(clock: Clock) -> None:
    waits.until_mirrored_past_group(plans(ClusterError("not yet"), READY, MIRRORED), "A->B", "g", 30)
    assert clock.now == 1.0


def test_the_disaster_is_detected_when_status_shows_it(clock: Clock) -> None:
    def report(verdict: Verdict, mirror_running: bool) -> StatusReport:
        flow = SimpleNamespace(verdict=verdict, mirror_running=mirror_running)
        return StatusReport(verdict, (flow,))  # type: ignore[arg-type]

    seen = [report(Verdict.HEALTHY, True), report(Verdict.SOURCE_UNREACHABLE, True)]
    detected = waits.detect(lambda flow: seen.pop(0), "A->B")
    assert detected is not None and detected > 1_700_000_000_000 and clock.now == 0.5
    assert waits.detect(lambda flow: report(Verdict.HEALTHY, False), "A->B") is not None
    clock.now = 0.0
    assert waits.detect(lambda flow: report(Verdict.LAGGING, True), "A->B", timeout=10) is None
    assert clock.now == 10.0


class Consumer:
    """Reads one more record on each of the first ``reads`` looks, then nothing."""

    def __init__(self, clock: Clock, reads: int, alive_until: float = 1e9) -> None:
        self.clock, self.reads, self.alive_until = clock, reads, alive_until
        self.processed: list[tuple[str, int]] = []

    def is_alive(self) -> bool:
        if self.reads and self.clock.now >= 5:  # joining the group takes seconds
            self.reads -= 1
            self.processed.append(("k", len(self.processed)))
        return self.clock.now < self.alive_until


def test_idle_once_nothing_new_came_for_idle_seconds(clock: Clock) -> None:
    consumer = Consumer(clock, reads=3)
    waits.until_idle(consumer, idle_seconds=8)  # type: ignore[arg-type]
    assert len(consumer.processed) == 3 and clock.now == pytest.approx(5.4 + 8, abs=0.3)  # looked at every 0.2 s


def test_a_consumer_that_reads_nothing_is_given_up_on_and_one_that_died_ends_the_wait(clock: Clock) -> None:
    waits.until_idle(Consumer(clock, reads=0), idle_seconds=8, first_within=120)  # type: ignore[arg-type]
    assert clock.now == pytest.approx(120, abs=0.3)
    clock.now = 0.0
    waits.until_idle(Consumer(clock, reads=0, alive_until=2), idle_seconds=8)  # type: ignore[arg-type]
    assert clock.now == pytest.approx(2, abs=0.3)
