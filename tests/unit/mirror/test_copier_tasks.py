"""The driver and its long-lived copy tasks over their real connection (in this process, tasks in threads as a
Spark job would run them), with fake copiers: a batch takes every owner's copies or none, a lost or failed task
makes the batch copy its own records, a stop abandons the take everywhere, a peer without the key is refused
before anything it sends is unpickled, and a task copies only while the driver grants it."""

from __future__ import annotations

import os
import pickle
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from multiprocessing.connection import AuthenticationError, Client
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from drkit import metrics
from drkit.core.continuous import TakeFailure
from drkit.mirror import copier_task, copier_tasks
from drkit.mirror.copied import COPY_SCHEMA
from drkit.mirror.copier_channel import CHANNEL_KEY, CHANNEL_SECTION, Grant, GrantedLease
from drkit.mirror.copier_task import CopierSpec, TaskSide
from drkit.mirror.copier_tasks import CopierTasks
from drkit.mirror.executor import CopyTask
from drkit.mirror.lanes import Taken
from drkit.mirror.reader import BatchAbandoned
from drkit.runtime.task_secrets import TaskSecrets


class FakeCopier:
    """A task's copier: its copies of a range are one sync range (downstream = upstream + 100)."""

    def __init__(self) -> None:
        self.asked: list[tuple[dict[Any, Any], dict[Any, Any]]] = []
        self.fail = ""
        self.block = False
        self.stopped_reading = self.closed = False
        self.saw_stop = threading.Event()

    def take(
        self,
        ranges: dict[tuple[str, int], tuple[int, int]],
        end: Mapping[tuple[str, int], int],
        topic_map: Mapping[str, str],
        producer_conf: dict[str, Any],
        stopping: Callable[[], bool],
    ) -> Taken:
        self.asked.append((dict(ranges), dict(end)))
        while self.block:
            if stopping():
                self.saw_stop.set()
                raise BatchAbandoned("stopping")
            time.sleep(0.01)
        if self.fail:
            return Taken(None, TakeFailure.LANE_FAILED, self.fail)
        rows = [
            {
                "source_topic": t,
                "target_topic": f"A.{t}",
                "partition": p,
                "upstream_first": since,
                "upstream_last": until - 1,
                "downstream_first": since + 100,
                "downstream_last": until + 99,
                "record_count": until - since,
                "bytes": 10 * (until - since),
                "max_timestamp": 0,
            }
            for (t, p), (since, until) in sorted(ranges.items())
        ]
        return Taken(pa.Table.from_pylist(rows, schema=COPY_SCHEMA))

    def stop_reading(self) -> None:
        self.stopped_reading = True

    def held(self) -> int:
        return 7

    def close(self) -> None:
        self.closed = True


class InlineSpark:
    """A Spark that runs a job's tasks in threads of this process (as executors would run them elsewhere)."""

    def __init__(self) -> None:
        self.sparkContext = self
        self.results: list[str] = []

    def setJobGroup(self, group: str, description: str, interrupt: bool) -> None:
        return None

    def cancelJobGroup(self, group: str) -> None:
        return None

    def parallelize(self, items: Iterable[int], n: int) -> InlineSpark:
        self._items = list(items)
        return self

    def mapPartitions(self, f: Callable[[Iterator[int]], Iterator[str]]) -> InlineSpark:
        self._f = f
        return self

    def collect(self) -> list[str]:
        threads = [threading.Thread(target=lambda i=i: self.results.extend(self._f(iter([i])))) for i in self._items]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return list(self.results)


class Lease:
    epoch = 3

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def refusal(self) -> str | None:
        return None if self.seconds > 0 else "lost"

    def is_lost(self) -> bool:
        return False

    def remaining(self) -> float:
        return self.seconds


def settings(producer_conf: dict[str, Any], topic_map: dict[str, str]) -> CopyTask:
    return CopyTask({}, dict(producer_conf), dict(topic_map), "A", "B", 1.0, False, False, epoch=3)


class Harness:
    def __init__(self, tmp_path: Path, tasks: int = 2, lease: float = 30.0, stall: float = 1.0) -> None:
        self.copiers = {i: FakeCopier() for i in range(tasks)}
        self.sides: dict[int, TaskSide] = {}
        self.lease = Lease(lease)
        self.driver = CopierTasks(
            "A->B",
            InlineSpark(),  # type: ignore[arg-type]
            tasks,
            settings,
            TaskSecrets(lambda path: None),
            ("127.0.0.1", "127.0.0.1", 0),
            stall,
            100,
            self.lease,
            self.serve,
        )

    def serve(self, spec: CopierSpec) -> Callable[[Iterable[int]], Iterator[str]]:
        def run(tasks: Iterable[int]) -> Iterator[str]:
            for task in tasks:
                key = bytes.fromhex(spec.channel.section(CHANNEL_SECTION)[CHANNEL_KEY])
                side = self.sides[task] = TaskSide(spec, Client(spec.address, authkey=key), self.copiers[task])  # type: ignore[arg-type]
                yield side.run(task, 0)

        return run

    def start(self) -> Harness:
        self.driver.start({"acks": "all"}, {"t": "A.t"})
        wait(lambda: len(self.driver.connected()) == len(self.copiers))
        return self

    def take(
        self,
        ranges: dict[tuple[str, int], tuple[int, int]],
        stopping: Callable[[], bool] = lambda: False,
        producer_conf: dict[str, Any] | None = None,
    ) -> Taken:
        end = {key: until for key, (_, until) in ranges.items()}
        return self.driver.take(ranges, end, {"t": "A.t"}, producer_conf or {"acks": "all"}, stopping)


def wait(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.01)


RANGES = {("t", p): (10 * p, 10 * p + 5) for p in range(4)}


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path).start()
    yield h
    h.driver.close()


def test_a_batch_takes_the_copies_of_every_owner_each_asked_only_for_its_own(harness: Harness) -> None:
    taken = harness.take(RANGES)
    assert taken.rows is not None and taken.failure is None
    assert sorted((r["partition"], r["upstream_first"], r["record_count"]) for r in taken.rows.to_pylist()) == [
        (p, 10 * p, 5) for p in range(4)
    ]
    asked = [set(c.asked[0][0]) for c in harness.copiers.values()]
    assert asked[0] | asked[1] == set(RANGES) and not asked[0] & asked[1] and asked[0] and asked[1]
    for copier in harness.copiers.values():  # each task learns only the ends of the partitions it owns
        ranges, end = copier.asked[0]
        assert set(end) == set(ranges)
    assert sorted(site.records for site in taken.sites) == [10, 10] and len(taken.sites) == 2
    assert harness.driver.held() == 14


def test_one_failed_task_makes_the_batch_copy_everything_itself_naming_the_task(harness: Harness) -> None:
    harness.copiers[1].fail = "a record could not be delivered"
    taken = harness.take(RANGES)
    assert taken.rows is None and taken.failure is TakeFailure.LANE_FAILED
    assert taken.reason.startswith("copy task 1 on ") and "could not be delivered" in taken.reason


def test_a_lost_task_fails_the_take_in_flight_and_its_partitions_go_to_the_other(harness: Harness) -> None:
    harness.copiers[1].block = True
    result: list[Taken] = []
    thread = threading.Thread(target=lambda: result.append(harness.take(RANGES)))
    thread.start()
    wait(lambda: bool(harness.copiers[1].asked))
    # The executor is gone: its connection ends.
    socket.socket(fileno=os.dup(harness.sides[1].conn.fileno())).shutdown(socket.SHUT_RDWR)
    thread.join(10)
    [taken] = result
    assert taken.rows is None and taken.failure is TakeFailure.LANE_FAILED and "copy task 1" in taken.reason
    assert "was lost" in taken.reason
    wait(lambda: set(harness.driver.connected()) == {0})
    gauge = metrics.MIRROR_COPY_TASKS.labels("A->B", "connected")._value.get()
    assert gauge == 1.0 and metrics.MIRROR_COPY_TASKS.labels("A->B", "wanted")._value.get() == 2.0
    again = harness.take(RANGES)
    assert again.rows is not None and again.rows.num_rows == 4
    assert set(harness.copiers[0].asked[-1][0]) == set(RANGES)  # all of them on the task that lives


def test_a_silent_task_fails_the_take_after_the_stall_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frozen executor: no answer and no lease request either."""
    monkeypatch.setattr(copier_tasks, "ANSWER_MARGIN_SECONDS", 0.1)
    h = Harness(tmp_path, stall=0.2).start()
    try:
        monkeypatch.setattr(copier_task, "PING_SECONDS", 60.0)  # the tasks' next lease request is a minute away
        time.sleep(0.2)
        h.copiers[0].block = True
        started = time.monotonic()
        taken = h.take(RANGES, producer_conf={"message.timeout.ms": 60_000})
        assert taken.failure is TakeFailure.NO_PROGRESS and "copy task 0 did not answer" in taken.reason
        assert 0.3 <= time.monotonic() - started < 10
    finally:
        h.copiers[0].block = False
        h.driver.close()


def test_a_task_heard_from_is_waited_for_as_long_as_its_producer_may_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its copier waits on a target that does not acknowledge (the task still asks for its lease): the take
    waits as the task's copier does, the producer's message timeout and the stall time, then gives up."""
    monkeypatch.setattr(copier_tasks, "ANSWER_MARGIN_SECONDS", 0.1)
    h = Harness(tmp_path, stall=0.2).start()
    try:
        h.copiers[0].block = True
        started = time.monotonic()
        taken = h.take(RANGES, producer_conf={"message.timeout.ms": 1_000})
        assert taken.failure is TakeFailure.NO_PROGRESS and "copy task 0 did not answer for 1s" in taken.reason
        assert "last heard from 0s ago" in taken.reason
        assert time.monotonic() - started >= 1.0 + 0.2 + 0.1
    finally:
        h.copiers[0].block = False
        h.driver.close()


def test_a_stopping_mirror_abandons_the_take_on_every_task(harness: Harness) -> None:
    harness.copiers[0].block = harness.copiers[1].block = True
    with pytest.raises(BatchAbandoned):
        harness.take(RANGES, stopping=lambda: True)
    wait(lambda: harness.copiers[0].saw_stop.is_set() and harness.copiers[1].saw_stop.is_set())


def test_stop_reading_and_close_reach_every_task_and_end_the_job(harness: Harness) -> None:
    harness.driver.stop_reading()
    wait(lambda: all(c.stopped_reading for c in harness.copiers.values()))
    harness.driver.close()
    wait(lambda: all(c.closed for c in harness.copiers.values()))
    spark = harness.driver.spark
    wait(lambda: sorted(spark.results) == ["closed by the driver"] * 2)  # type: ignore[attr-defined]


class Boom:
    exploded = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (Boom.explode, ())

    @staticmethod
    def explode() -> None:
        Boom.exploded = True


def test_a_peer_without_the_key_is_refused_before_anything_it_sends_is_unpickled(harness: Harness) -> None:
    address = harness.sides[0].spec.address
    with pytest.raises(AuthenticationError):
        Client(address, authkey=b"not the key")
    with socket.create_connection(address) as raw:  # a peer that skips the challenge and sends a pickle
        payload = pickle.dumps(Boom())
        raw.sendall(struct.pack("!i", len(payload)) + payload)
        raw.sendall(struct.pack("!i", len(payload)) + payload)
        time.sleep(0.3)
    assert not Boom.exploded
    assert set(harness.driver.connected()) == {0, 1}
    assert harness.take(RANGES).rows is not None  # the tasks were not disturbed


def test_a_task_copies_only_while_the_driver_grants_it(tmp_path: Path) -> None:
    h = Harness(tmp_path, lease=0.5).start()
    try:
        wait(lambda: all(side.lease.refusal() is None for side in h.sides.values()))
        assert all(side.lease.epoch == 3 for side in h.sides.values())
        h.lease.seconds = 0.0  # the driver's lease ended (lost, or it lapsed): the last grants run out
        wait(lambda: all(side.lease.refusal() is not None for side in h.sides.values()), 2.0)
        h.lease.seconds = 0.5  # renewed: the tasks may copy again
        wait(lambda: all(side.lease.refusal() is None for side in h.sides.values()), 2.0)
    finally:
        h.driver.close()


def test_a_grant_counts_from_when_it_was_asked_never_from_when_it_arrived() -> None:
    lease = GrantedLease(1)
    lease.asked(1)
    asked = time.monotonic()
    time.sleep(0.05)
    lease.granted(Grant(1, 0.2))  # arrives 50 ms late: the belief ends 0.2 s after the question, not the answer
    assert lease.refusal() is None and lease.remaining() <= 0.2 - (time.monotonic() - asked) + 1e-3
    lease.granted(Grant(9, 60.0))  # an answer to nothing asked counts for nothing
    assert lease.remaining() < 0.2
    time.sleep(0.2)
    assert lease.refusal() is not None
