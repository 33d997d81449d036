"""A mirror process's hold on its flow's lease, on a fake lease topic whose broker clock the test moves."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from support.fakes import FakeLeaseEntries, FakeLeaseTopic, FakeMirrorSyncs

from drkit.core.mirror_lease import Instance, LeaseAct
from drkit.errors import ClusterError, FencedError, RefusedError
from drkit.mirror.lease import LeaseLapsed, MirrorLease

FLOW = "A->B"
SETTINGS = {"delivery": "at_least_once", "topics": "orders"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lease(
    topic: FakeLeaseTopic, syncs: FakeMirrorSyncs, name: str, clock: Callable[[], float], **settings: str
) -> MirrorLease:
    return MirrorLease(
        FLOW,
        FakeLeaseEntries(topic, "B"),
        syncs,
        Instance(name, f"host-{name}", 1),
        {**SETTINGS, **settings},
        lease_ms=1_000,
        renew_ms=250,
        clock=clock,
    )


def test_the_first_process_holds_the_lease_takes_an_epoch_and_says_so_on_the_topic() -> None:
    topic, syncs, clock = FakeLeaseTopic(now_ms=0), FakeMirrorSyncs(), Clock()
    first = lease(topic, syncs, "a", clock)
    assert first.acquire(threading.Event(), wait=False)
    assert first.epoch == 1 and syncs.epochs == {FLOW: 1}
    assert [e.act for e in topic.entries] == [LeaseAct.CLAIM, LeaseAct.RENEW] and topic.entries[1].epoch == 1
    assert first.refusal() is None and first.remaining() == pytest.approx(0.95)
    clock.now += 0.96  # its own clock passed the end of what it may believe: it copies nothing more
    assert first.refusal() is not None and "lapsed" in str(first.refusal())
    with pytest.raises(LeaseLapsed):
        first.check()


def test_a_standby_waits_while_the_active_renews_and_takes_over_once_its_lease_ran_out() -> None:
    topic, syncs = FakeLeaseTopic(now_ms=0), FakeMirrorSyncs()
    active = lease(topic, syncs, "a", Clock())
    assert active.acquire(threading.Event(), wait=False)
    standby = lease(topic, syncs, "b", time.monotonic)  # it learns the broker's time from its own beats
    took = threading.Event()
    threading.Thread(target=lambda: standby.acquire(threading.Event()) and took.set(), daemon=True).start()
    time.sleep(0.3)
    assert not took.is_set() and any(e.act is LeaseAct.STANDBY and e.instance.id == "b" for e in topic.entries)
    topic.now_ms = 999  # one millisecond before the active's lease ends (claimed and renewed at 0)
    time.sleep(0.3)
    assert not took.is_set()
    topic.now_ms = 1_000
    assert took.wait(2.0)
    assert standby.epoch == 2 and syncs.epochs == {FLOW: 2}
    # The old active's next renewal finds the lease taken: lost for good, with one line naming the new holder.
    with pytest.raises(FencedError, match="taken over by host-b pid 1"):
        active.renew()
        active.check()
    assert active.lost.is_set()


def test_a_released_lease_is_taken_at_once() -> None:
    topic, syncs = FakeLeaseTopic(now_ms=0), FakeMirrorSyncs()
    active = lease(topic, syncs, "a", Clock())
    assert active.acquire(threading.Event(), wait=False)
    active.release()
    assert lease(topic, syncs, "b", Clock()).acquire(threading.Event(), wait=False)


def test_a_lapsed_holder_renews_again_when_nobody_claimed() -> None:
    topic, syncs, clock = FakeLeaseTopic(now_ms=0), FakeMirrorSyncs(), Clock()
    active = lease(topic, syncs, "a", clock)
    assert active.acquire(threading.Event(), wait=False)
    topic.down, clock.now, topic.now_ms = True, clock.now + 5, 5_000  # the target did not answer for 5 s
    with pytest.raises(ClusterError):
        active.renew()
    assert active.refusal() is not None and not active.lost.is_set()
    topic.down = False
    active.renew()
    assert active.refusal() is None and active.epoch == 1


def refusal_while_the_active_renews(active: MirrorLease, topic: FakeLeaseTopic, other: MirrorLease, wait: bool) -> str:
    """What ``other`` is refused with, standing by (or a one-shot run) while ``active`` renews its lease."""
    errors: list[Exception] = []

    def run() -> None:
        try:
            other.acquire(threading.Event(), wait=wait)
        except RefusedError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    for at in (300, 600, 900, 1_200):
        if errors:
            break
        time.sleep(0.1)
        topic.now_ms = at
        active.renew()
    thread.join(2.0)
    assert errors, "not refused while the active renewed"
    return str(errors[0])


def test_a_standby_with_other_settings_is_refused_in_one_line_naming_the_difference() -> None:
    topic, syncs = FakeLeaseTopic(now_ms=0), FakeMirrorSyncs()
    active = lease(topic, syncs, "a", Clock())
    assert active.acquire(threading.Event(), wait=False)
    message = refusal_while_the_active_renews(active, topic, lease(topic, syncs, "b", Clock(), delivery="x"), True)
    assert "delivery: x here, at_least_once on the active" in message and "\n" not in message
    assert syncs.epochs == {FLOW: 1}  # nothing taken


def test_a_one_shot_run_does_not_stand_by_while_the_active_lives() -> None:
    topic, syncs = FakeLeaseTopic(now_ms=0), FakeMirrorSyncs()
    active = lease(topic, syncs, "a", Clock())
    assert active.acquire(threading.Event(), wait=False)
    message = refusal_while_the_active_renews(active, topic, lease(topic, syncs, "b", Clock()), False)
    assert "has an active mirror (host-a pid 1 (a), epoch 1)" in message


def test_a_lease_left_by_a_dead_process_is_waited_out_not_refused_even_with_other_settings() -> None:
    """A process killed just before (its lease still runs) is not taken for an active one: a one-shot run, or
    a mirror of another state root, waits for its lease to end and takes it."""
    topic, syncs = FakeLeaseTopic(now_ms=0), FakeMirrorSyncs()
    assert lease(topic, syncs, "a", Clock()).acquire(threading.Event(), wait=False)  # then it dies
    took = threading.Event()
    other = lease(topic, syncs, "b", time.monotonic, state="another root")
    threading.Thread(target=lambda: other.acquire(threading.Event(), wait=False) and took.set(), daemon=True).start()
    time.sleep(0.3)
    assert not took.is_set()
    topic.now_ms = 1_000
    assert took.wait(2.0) and other.epoch == 2


def test_a_lease_topic_that_does_not_answer_is_one_line_and_nothing_is_taken() -> None:
    topic, syncs = FakeLeaseTopic(now_ms=0, down=True), FakeMirrorSyncs()
    with pytest.raises(ClusterError, match="cluster B"):
        lease(topic, syncs, "a", Clock()).acquire(threading.Event())
    assert syncs.epochs == {} and topic.entries == []


def test_a_stop_while_standing_by_returns_without_the_lease() -> None:
    topic, syncs = FakeLeaseTopic(now_ms=0), FakeMirrorSyncs()
    assert lease(topic, syncs, "a", Clock()).acquire(threading.Event(), wait=False)
    stop = threading.Event()
    stop.set()
    standby = lease(topic, syncs, "b", Clock())
    assert not standby.acquire(stop)
    assert standby.refusal() is not None
