"""Paced load through a running copier's source, measured on its target (clusters.py: A -> B): each record's
latency ends at B's append time (watch.latencies) or when a read_committed consumer of B received it (reader.py),
one method for every copier of a run. A step is *sustained* when the copier caught up within 30 s of its end, its
p99 is below 2 s and at least 99 % of its records were measured."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from confluent_kafka import Consumer

from scripts.bench.lib.copiers import Running
from scripts.bench.lib.machine import load1 as load
from scripts.bench.lib.producers import Pacer
from scripts.bench.lib.reader import Reader, latencies_ms
from scripts.bench.lib.stats import index_rank
from scripts.bench.lib.watch import ends, latencies, wait_for


class LatencyAt(StrEnum):
    """Where a steady record's latency ends: B's append time, or a read_committed consumer of B receiving it."""

    APPEND = "append"
    CONSUMER = "consumer"


@dataclass(frozen=True)
class Paced:
    """A paced load and what the target showed of it: the latencies (ms) of its records, when it was caught up
    (monotonic; None if it was not)."""

    pacer: Pacer
    latencies: list[float]
    caught: float | None


@dataclass(frozen=True)
class Target:
    """A running copier between A (``a``, its ``topic``) and B (``b``, ``target_topic``), both of ``partitions``
    partitions, loaded through A and measured on B ``at`` its append time or a read_committed consumer;
    ``watcher`` reads B's watermarks."""

    a: str
    b: str
    topic: str
    target_topic: str
    partitions: int
    watcher: Consumer
    running: Running
    at: LatencyAt

    def load(self, rate: int, seconds: float, size: int, catch_up: float) -> Paced:
        """``rate`` records/s of ``size`` bytes for ``seconds``; waits up to ``catch_up`` s for all to be copied.
        The consumer, when it measures, reads from the partitions' ends before the load, started before it."""
        since = {p: hi for p, (_, hi) in ends(self.watcher, self.target_topic, self.partitions).items()}
        before = sum(since.values())
        reader = Reader(self.b, self.target_topic, self.partitions, since) if self.at is LatencyAt.CONSUMER else None
        if reader is not None:
            reader.start()
        pacer = Pacer(self.a, self.topic, rate, seconds, self.partitions, size)
        pacer.start()
        pacer.join()
        if reader is not None:
            caught = reader.wait_for(pacer.sent, catch_up, self.running)
            return Paced(pacer, latencies_ms(reader.finish()), caught)
        caught = wait_for(self.watcher, self.target_topic, self.partitions, before + pacer.sent, catch_up, self.running)
        until = {p: hi for p, (_, hi) in ends(self.watcher, self.target_topic, self.partitions).items()}
        return Paced(pacer, latencies(self.b, self.target_topic, since, until), caught)

    def step(self, rate: int, size: int, seconds: float) -> dict[str, Any]:
        """One measured step. Sustained: caught up within 30 s of its end, p99 < 2 s, 99 % of its records
        measured."""
        step_load = load()
        paced = self.load(rate, seconds, size, 30)
        lat, sent = paced.latencies, paced.pacer.sent
        p99 = index_rank(lat, 0.99)
        ok = paced.caught is not None and p99 is not None and p99 < 2000 and len(lat) >= sent * 0.99
        return {
            "rate": rate,
            "size": size,
            "achieved_rate": round(sent / max(paced.pacer.elapsed, 0.001)),
            "records": sent,
            "measured": len(lat),
            "p50_ms": index_rank(lat, 0.5),
            "p99_ms": p99,
            "max_ms": index_rank(lat, 1.0),
            "caught_up": paced.caught is not None,
            "sustained": ok,
            "load_before": step_load,
            "load_after": load(),
        }
