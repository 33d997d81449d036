"""Where a continuous copy's milliseconds go: each copy's read, produce and report times, for a benchmark.

Off unless ``DRKIT_MIRROR_LATENCY_PROBE`` names a file when this module is imported: then :func:`probed`
wraps the copier's consumer and producer factories, and nothing else changes. Off, it returns them as given,
so the copy path runs the same objects and code it runs without this module.

Invariant: the probe only observes. Each copy's row, appended to the file as 7 native doubles: source
partition, source timestamp (ms), wall time when the read that returned it ended (s), wall time of its
``produce()`` call (s), wall time of its delivery report (s), its target offset, the target's timestamp from
the report (ms; the broker's append time on a ``LogAppendTime`` topic). Each read (``consume()``) is a row of 3
doubles in the file's ``.reads`` companion: its call and return wall times (s) and how many records it
returned. The rows are kept in memory and written by a daemon thread every half second, so the copying
thread never writes a file; its added cost is a clock read per record and a closure per copy.
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any

#: The file the rows go to; unset or empty: no probe.
PROBE_FILE = os.environ.get("DRKIT_MIRROR_LATENCY_PROBE", "")
#: Doubles per row of the copies' file and of the reads' file.
COPY_FIELDS = 7
READ_FIELDS = 3
#: How often the rows kept are appended to the files.
WRITE_SECONDS = 0.5


class Rows:
    """Rows appended from the copying thread, written to a file by a daemon thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.rows: deque[tuple[float, ...]] = deque()
        self._thread = threading.Thread(target=self._write_forever, name="drkit-latency-probe", daemon=True)
        self._thread.start()

    def _write_forever(self) -> None:
        while True:
            time.sleep(WRITE_SECONDS)
            self.write()

    def write(self) -> None:
        out = array("d")
        rows = self.rows
        while rows:
            out.extend(rows.popleft())
        if out:
            with open(self.path, "ab") as f:
                out.tofile(f)


class ProbedConsumer:
    """A consumer whose ``consume`` notes when it was called and returned."""

    def __init__(self, consumer: Any, reads: Rows) -> None:
        self._consumer = consumer
        self._reads = reads
        #: when the last ``consume`` returned: the read time of the records it returned
        self.returned = 0.0

    def consume(self, num_messages: int = 1, timeout: float = -1) -> Any:
        called = time.time()
        messages = self._consumer.consume(num_messages, timeout)
        self.returned = now = time.time()
        self._reads.rows.append((called, now, float(len(messages))))
        return messages

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


class ProbedProducer:
    """A producer whose every copy's report adds its row (the read time comes from ``reading``)."""

    def __init__(self, producer: Any, copies: Rows, reading: Callable[[], float]) -> None:
        self._producer = producer
        self._copies = copies
        self._reading = reading

    def produce(
        self, topic: str, value: Any = None, key: Any = None, partition: int = -1, *args: Any, **kw: Any
    ) -> None:
        on_delivery = args[0] if args else kw.pop("on_delivery", None)
        row = (float(partition), float(kw.get("timestamp", 0)), self._reading(), time.time())
        add = self._copies.rows.append

        def report(err: Any, msg: Any) -> None:
            if err is None:
                add((*row, time.time(), float(msg.offset()), float(msg.timestamp()[1])))
            if on_delivery is not None:
                on_delivery(err, msg)

        self._producer.produce(topic, value, key, partition, report, *args[1:], **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)


def probed(
    new_consumer: Callable[[], Any], new_producer: Callable[[dict[str, Any], str], Any], path: str = PROBE_FILE
) -> tuple[Callable[[], Any], Callable[[dict[str, Any], str], Any]]:
    """The copier's client factories, wrapped when the probe is on (``path``), else the same two."""
    if not path:
        return new_consumer, new_producer
    copies, reads = Rows(path), Rows(path + ".reads")
    latest: list[ProbedConsumer] = []

    def consumer() -> Any:
        wrapped = ProbedConsumer(new_consumer(), reads)
        latest[:] = [wrapped]
        return wrapped

    def producer(conf: dict[str, Any], alias: str) -> Any:
        return ProbedProducer(new_producer(conf, alias), copies, lambda: latest[0].returned if latest else 0.0)

    return consumer, producer
