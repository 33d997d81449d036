"""A long-lived copy task: an executor's continuous copier, run by Spark, driven by the mirror's driver.

With a cluster master, each task of the driver's copier job (drkit.mirror.copier_tasks) runs here for as
long as the mirror runs. It connects to the driver (drkit.mirror.copier_channel), then does what the
driver's own continuous copier does in local mode (drkit.mirror.continuous.ContinuousCopier, the same
class): reads the partitions it is given with its own consumer and produces each record as it arrives,
keeping the acknowledged copies until a batch takes them. The driver sends each batch's ranges of the
partitions this task owns and gets their copies back, folded into sync ranges.

Invariants: the task copies only while the driver grants it (:class:`~drkit.mirror.copier_channel.GrantedLease`,
checked before every produce), so a frozen or lost driver stops its copies; when the connection ends, the
task closes its copier and returns (what no batch took is orphans, as a crash leaves them). Every copy
carries the driver's lease epoch.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection
from typing import Any

from drkit.core.continuous import TakeFailure
from drkit.core.copying import CopySite, executor_id
from drkit.mirror.continuous import ContinuousCopier
from drkit.mirror.copier_channel import (
    CHANNEL_KEY,
    CHANNEL_SECTION,
    PING_SECONDS,
    Abandon,
    Close,
    Grant,
    GrantedLease,
    Held,
    Hello,
    Ping,
    Reply,
    StopReading,
    Take,
)
from drkit.mirror.executor import CopyTask
from drkit.mirror.lanes import Taken
from drkit.mirror.producers import describe
from drkit.mirror.reader import BatchAbandoned
from drkit.runtime.task_secrets import SecretRef


@dataclass(frozen=True)
class CopierSpec:
    """What every long-lived copy task of a flow gets (picklable, no secret: the channel's key is sealed)."""

    flow: str
    address: tuple[str, int]
    channel: SecretRef
    #: the clients' settings when the job started (their secrets sealed); each batch sends its own producer's
    settings: CopyTask
    stall_seconds: float
    ahead: int

    def __repr__(self) -> str:
        return f"CopierSpec({self.flow}, driver {self.address[0]}:{self.address[1]})"


def serve_copies(spec: CopierSpec) -> Callable[[Iterable[int]], Iterator[str]]:
    """The ``mapPartitions`` function of the copier job: each element is one task's index."""

    def run(tasks: Iterable[int]) -> Iterator[str]:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = int(context.attemptNumber()) if context is not None else 0
        for task in tasks:
            yield serve(spec, task, attempt)

    return run


def serve(spec: CopierSpec, task: int, attempt: int) -> str:
    """Copy for the driver until it closes the connection or goes; how it ended."""
    key = bytes.fromhex(spec.channel.section(CHANNEL_SECTION)[CHANNEL_KEY])
    conn = Client(spec.address, authkey=key)
    return TaskSide(spec, conn).run(task, attempt)


class TaskSide:
    """One task's copier and its end of the connection."""

    def __init__(self, spec: CopierSpec, conn: Connection, copier: ContinuousCopier | None = None) -> None:
        self.spec, self.conn = spec, conn
        self.lease = GrantedLease(spec.settings.epoch)
        self._send_lock = threading.Lock()
        self._abandoned: set[int] = set()
        self._done = threading.Event()
        settings = spec.settings
        conf, alias = settings.consumer_settings(), settings.source_alias

        def new_consumer() -> Any:
            from confluent_kafka import Consumer

            from drkit.kafka.clients import kafka_logger

            return Consumer({**conf, "logger": kafka_logger(alias, conf)})

        self.copier = copier or ContinuousCopier(
            spec.flow,
            new_consumer,
            settings.source_alias,
            settings.target_alias,
            stall_seconds=spec.stall_seconds,
            ahead=spec.ahead,
            lease=self.lease,
        )

    def send(self, message: object) -> None:
        with self._send_lock:
            self.conn.send(message)

    def run(self, task: int, attempt: int) -> str:
        site = CopySite(executor_id(os.environ, os.getcwd(), False), socket.gethostname(), os.getpid(), attempt, 0, 0)
        pinger = threading.Thread(target=self._ping, name="drkit-copier-grant", daemon=True)
        try:
            self.send(Hello(task, site))
            pinger.start()
            return self._serve()
        finally:
            self._done.set()
            self.copier.close()
            with contextlib.suppress(OSError):
                self.conn.close()

    def _serve(self) -> str:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                return "the driver is gone"
            if isinstance(message, Grant):
                self.lease.granted(message)
            elif isinstance(message, Take):
                threading.Thread(target=self._take, args=(message,), name="drkit-copier-take", daemon=True).start()
            elif isinstance(message, Abandon):
                self._abandoned.add(message.seq)
            elif isinstance(message, StopReading):
                self.copier.stop_reading()
            elif isinstance(message, Held):
                self.send(Reply(message.seq, held=self.copier.held()))
            elif isinstance(message, Close):
                return "closed by the driver"

    def _ping(self) -> None:
        seq = 0
        while not self._done.is_set():
            seq += 1
            self.lease.asked(seq)
            try:
                self.send(Ping(seq))
            except OSError:
                return
            self._done.wait(PING_SECONDS)

    def _take(self, take: Take) -> None:
        settings = take.settings
        try:
            taken: Taken | None = self.copier.take(
                take.ranges,
                take.end,
                take.topic_map,
                settings.producer_settings(),
                lambda: take.seq in self._abandoned or self._done.is_set(),
            )
        except BatchAbandoned:
            taken = None
        except Exception as exc:  # never silent: the batch copies its own records
            taken = Taken(None, TakeFailure.LANE_FAILED, f"the copy task failed: {describe(exc)}")
        with contextlib.suppress(OSError):
            self.send(Reply(take.seq, taken))
