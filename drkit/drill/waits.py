"""The drill's waits: each asks the facade (or watches a consumer) until it sees what it waits for.

Every wait ends by its deadline, whatever it saw: a drill whose setup is broken on purpose goes on to
fail as it would in life, with the verdict's reason, not a wait's. A facade error is an answer not seen
yet (asked again). Nothing here decides a verdict.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from drkit.core.refusals import RefusalReason
from drkit.core.status import Verdict
from drkit.core.translate import Position
from drkit.drill.clock import now_ms
from drkit.drill.workload import GroupConsumer
from drkit.errors import DrkitError

if TYPE_CHECKING:
    from drkit.core.plan import Plan
    from drkit.core.status import StatusReport

#: ``Drkit.plan_failover(flow, groups)``.
PlanFailover = Callable[[str, list[str] | None], "Plan"]
#: ``Drkit.status(flow)``.
Status = Callable[[str], "StatusReport"]


def until_ready(
    plan_failover: PlanFailover,
    flow: str,
    group: str,
    timeout: float,
    *,
    alive: Callable[[], None],
    mirror: bool,
    translator: bool,
    target_topic_exists: Callable[[], bool],
) -> None:
    """Until a failover plan for the group would translate every partition (mirrored and checkpointed); a
    drill without the translator until the mirror created its copy of the topic, one without the mirror
    at once. ``alive`` raises when a job the drill needs has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive()
        try:
            plan = plan_failover(flow, [group])
            if plan.moves and not any(r.reason is RefusalReason.UNTRANSLATABLE for r in plan.refusals):
                return
        except DrkitError:
            pass
        if not mirror:
            return  # a broken setup on purpose: nothing to wait for
        if not translator and target_topic_exists():
            return  # no translator on purpose: ready once the mirror copies (the drill reads the copies)
        time.sleep(1.0)


def until_mirrored_past_group(plan_failover: PlanFailover, flow: str, group: str, timeout: float) -> None:
    """Until the mirror has copied records the stopped group has not processed, on every partition, and
    the translator has its last commit: the group then has something to resume on the target, and the
    RTO a first record to measure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(DrkitError):
            plan = plan_failover(flow, [group])
            if plan.moves and all(m.position is Position.MIRRORED for m in plan.moves):
                return
        time.sleep(0.5)


def detect(status: Status, flow: str, timeout: float = 120.0) -> int | None:
    """When ``drkit status`` first shows the disaster (source unreachable, or the mirror not running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(DrkitError):
            [seen] = status(flow).flows
            if seen.verdict is Verdict.SOURCE_UNREACHABLE or not seen.mirror_running:
                return now_ms()
        time.sleep(0.5)
    return None


def until_idle(consumer: GroupConsumer, idle_seconds: float, first_within: float = 120.0) -> None:
    """Until the consumer, once it read its first record (joining the group takes seconds), has read
    nothing new for ``idle_seconds``; or an error stopped it."""
    started = time.monotonic()
    seen, quiet_since = 0, started
    while consumer.is_alive():
        now = time.monotonic()
        if len(consumer.processed) != seen:
            seen, quiet_since = len(consumer.processed), now
        elif (seen == 0 and now - started >= first_within) or (seen and now - quiet_since >= idle_seconds):
            return
        time.sleep(0.2)
