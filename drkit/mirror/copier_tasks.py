"""The continuous copy on a Spark cluster: long-lived copy tasks on the executors, driven from the driver.

In local mode the driver copies records as they arrive (drkit.mirror.continuous). With a cluster master the
copies belong on the executors, and Spark stays in charge of where they run: the driver runs one Spark job
of long-lived tasks (as many as Spark's default parallelism, :func:`~drkit.mirror.copy_executors.slots`: the
executors' cores, at least 2 on a standalone master; a task beyond the cores waits for one, which an executor
added later gives it), each running that same continuous copier over the partitions the driver gives it
(drkit.core.copy_shards), connected to the driver (drkit.mirror.copier_channel). A batch's take asks each
task for the copies of the ranges it owns and returns them together: the batch's syncs are exactly the
copies every owner acknowledged, written before Spark commits the batch, as in local mode.

When a task cannot give its ranges (a failure, no progress, or its executor lost: the connection ends), the
batch takes nothing from any task and copies its own records (:class:`~drkit.mirror.copy_path.ContinuousCopy`):
the copies made ahead of it are orphans, never syncs. Spark runs a lost task again where it can (the job
itself is started again if it ends); meanwhile its partitions go to the tasks still connected.

Invariant: a take returns rows only when every planned partition's owner gave its whole range; a task
copies only while the driver's lease is believed (drkit.mirror.copier_channel.GrantedLease).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, Listener, answer_challenge, deliver_challenge
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from drkit import metrics
from drkit.core.batch import Partition
from drkit.core.continuous import TakeFailure
from drkit.core.copy_shards import assign, split
from drkit.core.copying import CopySite
from drkit.core.offsets import BatchRanges
from drkit.layout import flow_dir_name
from drkit.mirror.copied import COPY_SCHEMA, totals
from drkit.mirror.copier_channel import (
    CHANNEL_KEY,
    CHANNEL_SECTION,
    Abandon,
    Close,
    Grant,
    Held,
    Hello,
    Ping,
    Reply,
    StopReading,
    Take,
)
from drkit.mirror.copier_task import CopierSpec, serve_copies
from drkit.mirror.failure import failure_message
from drkit.mirror.lanes import FLUSH_SECONDS, Taken, target_patience
from drkit.mirror.lease import LeaseStamp
from drkit.mirror.reader import ABANDONED_MARKER, STOP_CHECK_SECONDS, BatchAbandoned
from drkit.runtime.task_secrets import TaskSecrets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from drkit.mirror.executor import CopyTask

log = logging.getLogger(__name__)

#: Wait before the job of copy tasks is started again after it ended (a task failed too often).
RESTART_SECONDS = 5.0
#: Beyond the tasks' own stall time, how long a take waits for a task it hears nothing from (frozen: a
#: live task asks for its lease every 100 ms, also while its copier waits on the target).
ANSWER_MARGIN_SECONDS = 5.0


@dataclass
class _Task:
    index: int
    conn: Connection
    site: CopySite
    lock: threading.Lock
    replies: dict[int, Reply]
    alive: bool = True
    #: when the task was last heard from (any message)
    heard: float = 0.0

    def send(self, message: object) -> bool:
        try:
            with self.lock:
                self.conn.send(message)
            return True
        except (OSError, ValueError):
            self.alive = False
            return False


class CopierTasks:
    """The driver's side of the copy tasks; a batch's take has the interface of ContinuousCopier's."""

    def __init__(
        self,
        flow: str,
        spark: SparkSession,
        tasks: int,
        settings: Callable[[dict[str, Any], dict[str, str]], CopyTask],
        secrets: TaskSecrets,
        bind: tuple[str, str, int],
        stall_seconds: float,
        ahead: int,
        lease: LeaseStamp | None,
        serve: Callable[[CopierSpec], Callable[[Iterable[int]], Iterator[str]]] = serve_copies,
    ) -> None:
        self.flow, self.spark, self.tasks, self._serve = flow, spark, tasks, serve
        self._settings, self._secrets = settings, secrets
        self._bind_host, self._connect_host, self._port = bind
        self.stall_seconds, self.ahead, self._lease = stall_seconds, ahead, lease
        self._cond = threading.Condition()
        self._connected: dict[int, _Task] = {}
        self._owners: dict[Partition, int] = {}
        #: numbers the requests to the tasks: a batch's take and a stop's count of held copies may ask at once
        self._seqs = itertools.count(1)
        self._closed = False
        self._listener: Listener | None = None
        self._job: threading.Thread | None = None
        self._group = f"drkit-copiers-{flow_dir_name(flow)}-{os.getpid()}"

    # -- start: the listener and the job -------------------------------------------------------------

    def start(self, producer_conf: dict[str, Any], topic_map: dict[str, str]) -> None:
        """Listen, and run the job of copy tasks (in the background: it runs as long as the mirror)."""
        if self._job is not None:
            return
        key = os.urandom(32)
        _, channel = self._secrets.seal({CHANNEL_SECTION: {CHANNEL_KEY: key.hex()}})
        assert channel is not None  # a key is always sealed
        # No key given to the listener: it would check it inside accept(), where one peer that never answers
        # blocks every later task; each connection is checked in its own thread instead (:meth:`_admit`).
        listener = self._listener = Listener((self._bind_host, self._port))
        port = int(listener.address[1])
        spec = CopierSpec(
            self.flow,
            (self._connect_host, port),
            channel,
            self._settings(producer_conf, topic_map),
            self.stall_seconds,
            self.ahead,
        )
        threading.Thread(
            target=self._accept, args=(key,), name=f"drkit-copiers-accept-{self.flow}", daemon=True
        ).start()
        self._job = threading.Thread(target=self._run_job, args=(spec,), name=f"drkit-copiers-{self.flow}", daemon=True)
        self._job.start()
        log.info(
            "flow %s: copying as records arrive in %d copy task(s) on the executors (driver channel on %s:%d)",
            self.flow,
            self.tasks,
            self._connect_host,
            port,
        )

    def _run_job(self, spec: CopierSpec) -> None:
        sc = self.spark.sparkContext
        while not self._closed:
            sc.setJobGroup(self._group, f"drkit mirror {self.flow}: copy tasks (as records arrive)", True)
            started = time.monotonic()
            try:
                ends = sc.parallelize(range(self.tasks), self.tasks).mapPartitions(self._serve(spec)).collect()
                if not self._closed:
                    log.warning("flow %s: the copy tasks ended (%s); starting them again", self.flow, "; ".join(ends))
            except Exception as exc:
                if self._closed:
                    return
                log.warning(
                    "flow %s: the job of copy tasks failed after %.0fs (%s); starting it again in %.0fs",
                    self.flow,
                    time.monotonic() - started,
                    failure_message(exc)[:300],
                    RESTART_SECONDS,
                )
            with self._cond:
                self._cond.wait_for(lambda: self._closed, RESTART_SECONDS)

    def _accept(self, key: bytes) -> None:
        listener = self._listener
        assert listener is not None
        while not self._closed:
            try:
                conn = listener.accept()
            except OSError:
                if self._closed:
                    return
                time.sleep(0.1)
                continue
            threading.Thread(target=self._admit, args=(conn, key), name="drkit-copier-admit", daemon=True).start()

    def _admit(self, conn: Connection, key: bytes) -> None:
        """A task's connection, once it proved it holds the key (as ``Listener(authkey=...)`` checks it, in
        both directions) and said which task it is."""
        try:
            deliver_challenge(conn, key)
            answer_challenge(conn, key)
            hello = conn.recv()
            if not isinstance(hello, Hello):
                raise ValueError(f"expected a task's hello, got {type(hello).__name__}")
        except Exception as exc:  # a peer without the key: nothing of it was unpickled
            with contextlib.suppress(OSError):
                conn.close()
            if not self._closed:
                log.warning("flow %s: a connection to the copy tasks' channel was refused: %s", self.flow, exc)
            return
        task = _Task(hello.task, conn, hello.site, threading.Lock(), {})
        if self._closed:  # a task Spark started late (it waited for a core) while the mirror stops
            task.send(Close())
            return
        with self._cond:
            old = self._connected.get(hello.task)
            if old is not None:
                old.alive = False
                with contextlib.suppress(OSError):
                    old.conn.close()
            self._connected[hello.task] = task
            self._cond.notify_all()
            self._gauge()
        log.info(
            "flow %s: copy task %d connected (executor %s on %s, attempt %d)",
            self.flow,
            hello.task,
            hello.site.executor_id,
            hello.site.host,
            hello.site.attempt,
        )
        self._listen(task)

    def _listen(self, task: _Task) -> None:
        while True:
            try:
                message = task.conn.recv()
            except (EOFError, OSError):
                break
            task.heard = time.monotonic()
            if isinstance(message, Ping):
                seconds = float("inf") if self._lease is None else self._lease.remaining()
                task.send(Grant(message.seq, seconds if not self._closed else 0.0))
            elif isinstance(message, Reply):
                with self._cond:
                    task.replies[message.seq] = message
                    self._cond.notify_all()
        with self._cond:
            task.alive = False
            if self._connected.get(task.index) is task:
                del self._connected[task.index]
            self._cond.notify_all()
            self._gauge()
        if not self._closed:
            log.warning(
                "flow %s: copy task %d (executor %s on %s) is gone; its partitions go to the other tasks",
                self.flow,
                task.index,
                task.site.executor_id,
                task.site.host,
            )

    # -- the batch's side ----------------------------------------------------------------------------

    def take(
        self,
        ranges: BatchRanges,
        end: Mapping[Partition, int],
        topic_map: Mapping[str, str],
        producer_conf: dict[str, Any],
        stopping: Callable[[], bool],
    ) -> Taken:
        """The copies of exactly ``ranges`` from their owners, or why the batch must copy its own records."""
        with self._cond:
            self._owners = assign(self._owners, {*ranges, *end}, frozenset(self._connected))
            owners = dict(self._owners)
            tasks = dict(self._connected)
        if any(key not in owners for key in ranges):
            return Taken(None, TakeFailure.LANE_FAILED, "no copy task is connected to the driver")
        settings = self._settings(dict(producer_conf), dict(topic_map))
        asked: dict[int, int] = {}
        for index, (part, part_end) in split(ranges, end, owners).items():
            seq = next(self._seqs)
            if not tasks[index].send(Take(seq, part, part_end, dict(topic_map), settings)):
                return self._lost(tasks[index])
            asked[index] = seq
        replies = self._await(tasks, asked, stopping, target_patience(producer_conf, self.stall_seconds))
        if isinstance(replies, Taken):
            return replies
        tables: list[pa.Table] = []
        rest: BatchRanges = {}
        sites: list[CopySite] = []
        skipped = 0
        for index, reply in sorted(replies.items()):
            taken = reply.taken
            assert taken is not None
            if taken.rows is None:
                return Taken(None, taken.failure, f"copy task {index} on {tasks[index].site.host}: {taken.reason}")
            tables.append(taken.rows)
            rest.update(taken.rest)
            skipped += taken.skipped
            site = tasks[index].site
            owned = sum(1 for key in ranges if owners[key] == index)
            sites.append(
                CopySite(site.executor_id, site.host, site.pid, site.attempt, owned, totals(taken.rows).records)
            )
        rows = pa.concat_tables(tables) if tables else COPY_SCHEMA.empty_table()
        return Taken(rows, skipped=skipped, rest=rest, sites=tuple(sites))

    def _await(
        self, tasks: dict[int, _Task], asked: dict[int, int], stopping: Callable[[], bool], patience: float
    ) -> dict[int, Reply] | Taken:
        """Every asked task's reply. A task that is heard from is waited for as long as its copier may wait on
        the target (``patience``); one silent for the stall time and a margin is given up (frozen)."""
        started = checked = time.monotonic()
        silent = self.stall_seconds + ANSWER_MARGIN_SECONDS
        with self._cond:
            while True:
                for index, seq in asked.items():
                    task = tasks[index]
                    if seq not in task.replies and not task.alive:
                        return self._lost(task)
                if all(seq in tasks[index].replies for index, seq in asked.items()):
                    replies = {index: tasks[index].replies.pop(seq) for index, seq in asked.items()}
                    break
                now = time.monotonic()
                late = sorted(i for i, seq in asked.items() if seq not in tasks[i].replies)
                quiet = [i for i in late if now - max(started, tasks[i].heard) > silent]
                if quiet or now - started > patience + ANSWER_MARGIN_SECONDS:
                    index = (quiet or late)[0]
                    heard = now - max(started, tasks[index].heard)
                    return Taken(
                        None,
                        TakeFailure.NO_PROGRESS,
                        f"copy task {index} did not answer for {now - started:.0f}s (last heard from {heard:.0f}s ago)",
                    )
                if now - checked >= STOP_CHECK_SECONDS:
                    checked = now
                    self._cond.release()  # ``stopping`` may call into the JVM: never holding the lock
                    try:
                        stop = stopping()
                    finally:
                        self._cond.acquire()
                    if stop:
                        for index, seq in asked.items():
                            tasks[index].send(Abandon(seq))
                        raise BatchAbandoned(f"{ABANDONED_MARKER}the mirror is stopping")
                self._cond.wait(0.05)
        abandoned = [index for index, reply in replies.items() if reply.taken is None]
        if abandoned:
            raise BatchAbandoned(f"{ABANDONED_MARKER}the mirror is stopping")
        return replies

    def _lost(self, task: _Task) -> Taken:
        return Taken(
            None,
            TakeFailure.LANE_FAILED,
            f"copy task {task.index} (executor {task.site.executor_id} on {task.site.host}) was lost",
        )

    def stop_reading(self) -> None:
        """The mirror is stopping: the tasks read no more (the next batches take every copy they made)."""
        for task in self._live():
            task.send(StopReading())

    def held(self) -> int:
        """Copies the tasks made and no batch took yet (unknown answers count as one each: some may be held)."""
        asked: dict[int, tuple[_Task, int]] = {}
        for task in self._live():
            seq = next(self._seqs)
            if task.send(Held(seq)):
                asked[task.index] = (task, seq)
        deadline = time.monotonic() + 2.0
        total = 0
        with self._cond:
            for task, seq in asked.values():
                while seq not in task.replies and task.alive and time.monotonic() < deadline:
                    self._cond.wait(0.05)
                reply = task.replies.pop(seq, None)
                total += 1 if reply is None else reply.held
        return total

    def _gauge(self) -> None:
        """The metric of the tasks connected (lock held)."""
        metrics.MIRROR_COPY_TASKS.labels(self.flow, "connected").set(len(self._connected))
        metrics.MIRROR_COPY_TASKS.labels(self.flow, "wanted").set(self.tasks)

    def connected(self) -> dict[int, CopySite]:
        """The tasks connected now, and where each runs."""
        with self._cond:
            return {index: task.site for index, task in self._connected.items()}

    def _live(self) -> list[_Task]:
        with self._cond:
            return list(self._connected.values())

    def close(self) -> None:
        """Close the tasks (their copies no batch took are orphans) and end their job."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for task in self._live():
            task.send(Close())
        # The connected tasks flush and return; then the job's other tasks (one still waiting for a core, one
        # connecting now) are cancelled rather than waited for.
        deadline = time.monotonic() + FLUSH_SECONDS
        with self._cond:
            while self._connected and time.monotonic() < deadline:
                self._cond.wait(0.05)
        job = self._job
        if job is not None:
            with contextlib.suppress(Exception):
                self.spark.sparkContext.cancelJobGroup(self._group)
            job.join(FLUSH_SECONDS)
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
