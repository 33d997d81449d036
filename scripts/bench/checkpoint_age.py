"""How soon the DR side knows each consumer-group commit: drkit's follower, drkit's interval translator alone, and
MirrorMaker 2's checkpoints, under one commit load (issue 38, docs/design/checkpoints.md). Not a test.

Usage::

    .venv/bin/python -m scripts.bench.checkpoint_age                      # ~10 min on 2 cores
    .venv/bin/python -m scripts.bench.checkpoint_age --groups 1000 --rate 1000 --seconds 150 --rounds 2
    .venv/bin/python -m scripts.bench.checkpoint_age --flowing 400 --seconds 150   # MirrorMaker 2's figure too

Three local KRaft clusters on 127.0.0.1 (drkit.localdev.clusters.LocalKafka): A the source, B drkit's target
(the topic mirrored once by ``drkit mirror --once``), C MirrorMaker 2's (its own copy of the topic, dedicated
mode, default checkpoint settings but the group filter). ``--groups`` groups exist on A before anything starts;
during each contender's phase the load commits ``--rate`` commits/s in total on A (the admin API's offset
commits, each one partition of one group moved one record on, round robin). The contenders, one at a time and
alternating (the order reversed every round):

- ``follow``: ``drkit checkpoint`` with ``follow_commits`` (its checkpoint topic on B, consumed as it is written);
- ``interval``: ``drkit checkpoint`` without it (the ``checkpoints`` Delta table, read as failover reads it);
- ``mm2``: MirrorMaker 2's checkpoints topic on C (``A.checkpoints.internal``), consumed as it is written.

Without ``--flowing`` no record is produced during the phases and each commit moves its group one record on
through records mirrored before: MirrorMaker 2 then emits no checkpoint at all (it emits one only when the
translated downstream offset advances, and its offset syncs of those records are spaced exponentially, so
every commit translates to the same one). With ``--flowing R``, R records/s are produced on A throughout and
each commit puts its group at its partition's end (groups that keep up): MirrorMaker 2's syncs advance with the
records, and ``drkit mirror`` runs in drkit's phases beside ``drkit checkpoint``, as in production.

Measured from outside, for ``--sample`` of the groups (every partition): a commit's **visibility** is the time
from its acknowledgement on A to the first observation, on the DR side, of a checkpoint at or past its offset
(a later commit's checkpoint covers it: what a failover at that moment would resume from). Per contender: p50,
p99 and max over the phase's commits, how many were never covered by the phase's end (their visibility is
longer than what they were given: reported, not counted in the percentiles); the **re-reads** of a failover at
200 moments spread over the phase (per sampled group, the records from its newest commit covered by then to its
newest acknowledged, summed over its partitions); the polling period (an observation is at most that late),
the commit rate reached, and the 1-minute load average before and after.
The drkit translator's Delta writes per phase are counted (its run file's runs): the follower does not add any.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts.bench.lib.clusters import create_topic, local_kafka
from scripts.bench.lib.copiers import MM2_LOG4J, MM2_SINGLE_BROKER, spawn
from scripts.bench.lib.drkit_config import flow_config
from scripts.bench.lib.machine import REPO, git_facts, load1, versions
from scripts.bench.lib.output import logger, print_json
from scripts.bench.lib.stats import nearest_rank

log = logger("checkpoint_age")
TOPIC, FLOW = "orders", "A->B"
CONTENDERS = ("follow", "interval", "mm2")

Key = tuple[str, int]  # (group, partition)
#: Failovers imagined per phase for the re-read distribution (each at a moment of its commits' span).
REREAD_INSTANTS = 200


# -- the measure (pure: tests/unit/scripts/test_bench_checkpoint_age.py) ------------------------------------------


@dataclass
class Visibility:
    """Per (group, partition): the commits acknowledged (offset, time) in offset order, and when each was first
    covered by an observed checkpoint."""

    commits: dict[Key, list[tuple[int, float]]] = field(default_factory=dict)
    covered: dict[Key, int] = field(default_factory=dict)  # commits[key][:covered] are covered
    latencies: list[float] = field(default_factory=list)
    covered_at: dict[Key, list[float]] = field(default_factory=dict)  # when each of commits[key][:covered] was
    #: Per key, its committed offset before the phase's first commit (what a failover resumes from at worst).
    base: dict[Key, int] = field(default_factory=dict)

    def committed(self, key: Key, offset: int, at: float) -> None:
        self.commits.setdefault(key, []).append((offset, at))

    def observed(self, key: Key, upstream: int, at: float) -> None:
        """A checkpoint of ``key`` at ``upstream`` seen at ``at``: every commit at or below it not yet covered is."""
        commits = self.commits.get(key)
        if not commits:
            return
        done = self.covered.get(key, 0)
        upto = bisect.bisect_right([o for o, _ in commits], upstream)
        for _, acked in commits[done:upto]:
            self.latencies.append(max(0.0, at - acked))
            self.covered_at.setdefault(key, []).append(at)
        if upto > done:
            self.covered[key] = upto

    def uncovered(self) -> int:
        return sum(len(c) - self.covered.get(k, 0) for k, c in self.commits.items())

    def rereads(self, at: float) -> dict[str, int]:
        """Per group, the records a failover at ``at`` would make it re-read: on each partition, from the newest
        commit covered by a checkpoint observed by then (or the phase's start) to the newest acknowledged by
        then. In source offsets: exact translation assumed (MirrorMaker 2's own adds up to ``offset.lag.max``)."""
        out: dict[str, int] = {}
        for key, commits in self.commits.items():
            acked = [offset for offset, when in commits if when <= at]
            known = bisect.bisect_right(self.covered_at.get(key, []), at)
            floor = commits[known - 1][0] if known else self.base.get(key, commits[0][0] - 1)
            out[key[0]] = out.get(key[0], 0) + (max(0, max(acked) - floor) if acked else 0)
        return out

    def reread_distribution(self, instants: int = REREAD_INSTANTS) -> dict[str, Any]:
        """The re-reads of every sampled group by a failover at ``instants`` moments evenly spread over the
        commits' span (first to last acknowledgement): one value per (moment, group)."""
        times = sorted(when for commits in self.commits.values() for _, when in commits)
        if not times:
            return {"failover_moments": 0}
        first, last = times[0], times[-1]
        moments = [first + (last - first) * i / max(1, instants - 1) for i in range(instants)]
        values = sorted(n for at in moments for n in self.rereads(at).values())
        return {
            "failover_moments": len(moments),
            "reread_records_per_group_p50": nearest_rank(values, 0.5),
            "reread_records_per_group_p99": nearest_rank(values, 0.99),
            "reread_records_per_group_max": values[-1],
            "reread_records_per_group_mean": round(sum(values) / len(values), 2),
        }

    def summary(self) -> dict[str, Any]:
        values = sorted(self.latencies)
        return {
            "commits_covered": len(values),
            "commits_never_covered": self.uncovered(),
            "visibility_ms_p50": _ms(nearest_rank(values, 0.5)),
            "visibility_ms_p99": _ms(nearest_rank(values, 0.99)),
            "visibility_ms_max": _ms(values[-1] if values else None),
            **self.reread_distribution(),
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def decode_mm2_checkpoint(key: bytes, value: bytes) -> tuple[str, str, int, int] | None:
    """(group, topic, partition, upstream offset) of a record of MirrorMaker 2's checkpoints topic (Kafka's
    Struct encoding: key = group STRING, topic STRING, partition INT32; value = version INT16, upstream INT64,
    downstream INT64, metadata STRING); None for a record that is not one."""
    try:
        n = struct.unpack_from(">h", key, 0)[0]
        group = key[2 : 2 + n].decode()
        m = struct.unpack_from(">h", key, 2 + n)[0]
        topic = key[4 + n : 4 + n + m].decode()
        (partition,) = struct.unpack_from(">i", key, 4 + n + m)
        _, upstream = struct.unpack_from(">hq", value, 0)
    except (struct.error, UnicodeDecodeError):
        return None
    return group, topic, partition, upstream


# -- the load and the watchers -----------------------------------------------------------------------------------


class CommitLoad(threading.Thread):
    """``rate`` commits/s on A, round robin over (group, partition), each one record further, or to the partition's
    end where ``heads`` tells it (records flowing: the groups keep up with them); the sampled ones'
    acknowledgements go to ``visibility``. At most ``in_flight`` requests outstanding (a slow broker slows it)."""

    def __init__(
        self,
        bootstrap: str,
        groups: list[str],
        partitions: int,
        rate: int,
        start: Mapping[Key, int],
        sample: set[str],
        heads: Callable[[int], int] | None = None,
    ) -> None:
        from confluent_kafka.admin import AdminClient

        super().__init__(daemon=True)
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        self.groups, self.partitions, self.rate, self.sample = groups, partitions, rate, sample
        self.heads = heads
        self.next = dict(start)
        self.visibility = Visibility(base={k: o for k, o in start.items() if k[0] in sample})
        self.sent = self.acked = self.failed = 0
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.elapsed = 0.0

    def run(self) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        started = time.monotonic()
        i = 0
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while i < due and self.sent - self.acked - self.failed < 500:
                group = self.groups[i % len(self.groups)]
                partition = (i // len(self.groups)) % self.partitions
                key = (group, partition)
                head = self.heads(partition) if self.heads is not None else 0
                offset = self.next[key] = max(self.next[key] + 1, head)
                request = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, partition, offset)])
                [future] = self.admin.alter_consumer_group_offsets([request], request_timeout=30).values()
                future.add_done_callback(self._done(key, offset))
                self.sent += 1
                i += 1
            time.sleep(0.002)
        self.elapsed = time.monotonic() - started

    def _done(self, key: Key, offset: int) -> Callable[[Any], None]:
        def done(future: Any) -> None:
            at = time.monotonic()
            with self.lock:
                if future.exception() is not None:
                    self.failed += 1
                    return
                self.acked += 1
                if key[0] in self.sample:
                    self.visibility.committed(key, offset, at)

        return done


class Flowing(threading.Thread):
    """``rate`` records/s produced on A throughout the run, round robin over the partitions; ``head(p)`` is the
    end of partition ``p`` as far as its acknowledgements tell (records flow: MirrorMaker 2's offset syncs
    advance with them, as in production)."""

    def __init__(self, bootstrap: str, partitions: int, rate: int, preloaded: int) -> None:
        from confluent_kafka import Producer

        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
        self.partitions, self.rate = partitions, rate
        self.ends = [preloaded] * partitions
        self.stop = threading.Event()

    def head(self, partition: int) -> int:
        return self.ends[partition]

    def run(self) -> None:
        started, i = time.monotonic(), 0
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while i < due:
                partition = i % self.partitions
                self.producer.produce(TOPIC, b"f", partition=partition, on_delivery=self._acked)
                i += 1
            self.producer.poll(0.01)
        self.producer.flush(30)

    def _acked(self, error: Any, message: Any) -> None:
        if error is None:
            self.ends[message.partition()] = max(self.ends[message.partition()], message.offset() + 1)


class Watcher(threading.Thread):
    """Polls one contender's view every ``period`` s; each (group, partition, upstream offset) read goes to
    ``load.visibility`` at the time it was read."""

    def __init__(self, load: CommitLoad, read: Callable[[], Iterable[tuple[str, int, int]]], period: float) -> None:
        super().__init__(daemon=True)
        self.load, self.read, self.period = load, read, period
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.polls = 0

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                seen = list(self.read())
            except Exception as exc:  # a poll that failed is counted, the next one tries again
                self.errors.append(str(exc)[:200])
                seen = []
            at = time.monotonic()
            with self.load.lock:
                for group, partition, upstream in seen:
                    self.load.visibility.observed((group, partition), upstream, at)
            self.polls += 1
            self.stop.wait(max(0.0, self.period - (time.monotonic() - began)))


def topic_reader(bootstrap: str, groups: list[str]) -> Callable[[], Iterable[tuple[str, int, int]]]:
    """The follower's live checkpoints of ``groups`` on B's checkpoint topic, consumed from the start as they are
    appended (the topic is looked for until the follower created it)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from drkit.core.live_checkpoints import CHECKPOINT_TOPIC, decode_value, parse_key

    wanted = set(groups)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-follow-watch", "log_level": 0})
    assigned = False

    def read() -> Iterable[tuple[str, int, int]]:
        nonlocal assigned
        if not assigned:
            if CHECKPOINT_TOPIC not in consumer.list_topics(timeout=5).topics:
                return
            consumer.assign([TopicPartition(CHECKPOINT_TOPIC, 0, OFFSET_BEGINNING)])
            assigned = True
        for message in consumer.consume(10_000, timeout=0.05):
            named = parse_key(message.key()) if message.error() is None else None
            if named is None or named[0] != FLOW or named[1] not in wanted:
                continue
            for live in decode_value(FLOW, named[1], message.value()):
                yield named[1], live.checkpoint.partition, live.checkpoint.upstream_offset

    return read


def table_reader(state: Path, groups: list[str]) -> Callable[[], Iterable[tuple[str, int, int]]]:
    """The ``checkpoints`` Delta table's latest rows of ``groups`` (as failover reads them)."""
    from drkit.layout import StateLayout
    from drkit.store.checkpoints import CheckpointTable

    table = CheckpointTable(StateLayout(state))

    def read() -> Iterable[tuple[str, int, int]]:
        for r in table.latest(FLOW, groups):
            yield r.checkpoint.group, r.checkpoint.partition, r.checkpoint.upstream_offset

    return read


def mm2_reader(bootstrap: str, groups: set[str]) -> Callable[[], Iterable[tuple[str, int, int]]]:
    """MirrorMaker 2's checkpoints of ``groups`` on C, consumed from the start as they are written."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-mm2-watch", "auto.offset.reset": "earliest", "log_level": 0}
    )
    consumer.subscribe(["A.checkpoints.internal"])

    def read() -> Iterable[tuple[str, int, int]]:
        for message in consumer.consume(10_000, timeout=0.05):
            key, value = message.key(), message.value()
            if message.error() is not None or key is None or value is None:
                continue
            decoded = decode_mm2_checkpoint(key, value)
            # Keyed by the copy's name on C (MirrorMaker 2 checkpoints the target topic), ``A.orders``.
            if decoded is not None and decoded[0] in groups and decoded[1] == f"A.{TOPIC}":
                yield decoded[0], decoded[2], decoded[3]

    return read


# -- the contenders ----------------------------------------------------------------------------------------------


def drkit_config(workdir: Path, source: str, target: str, groups: list[str], follow: bool) -> Path:
    toml = workdir / f"drkit-{'follow' if follow else 'interval'}.toml"
    flow: dict[str, Any] = {
        "topics.include": [TOPIC],
        "groups.include": ["bench-g.*"],
        "heartbeats.interval_seconds": 0,
        "checkpoint.follow_commits": follow,
        "checkpoint.max_age_seconds": 3600,
    }
    toml.write_text(flow_config(str(workdir / "state"), source, target, flow))
    return toml


def start_mm2(workdir: Path, source: str, target: str) -> Any:
    from drkit.runtime.artifacts import mirror_maker_libs

    props = workdir / "mm2.properties"
    props.write_text(
        "\n".join(
            [
                "clusters = A, C",
                f"A.bootstrap.servers = {source}",
                f"C.bootstrap.servers = {target}",
                "A->C.enabled = true",
                f"A->C.topics = {TOPIC}",
                "A->C.groups = bench-g.*",
                "C->A.enabled = false",
                *MM2_SINGLE_BROKER,
                "sync.topic.acls.enabled = false",
                "",
            ]
        )
    )
    (workdir / "log4j2.yaml").write_text(MM2_LOG4J)
    cmd = [
        "java",
        "-Xms256m",
        "-Xmx1g",
        f"-Dlog4j2.configurationFile={workdir / 'log4j2.yaml'}",
        "-cp",
        f"{mirror_maker_libs()}/*",
        "org.apache.kafka.connect.mirror.MirrorMaker",
        str(props),
        "--clusters",
        "C",
    ]
    return spawn("mm2", cmd, workdir)


def drkit_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "drkit.cli.app", *args]


def phase(
    name: str,
    args: argparse.Namespace,
    clusters: dict[str, str],
    groups: list[str],
    sample: list[str],
    start: dict[Key, int],
    workdir: Path,
    mm2: Any,
    flowing: Flowing | None = None,
) -> dict[str, Any]:
    """One contender's phase: its process started (MM2 runs throughout; with records flowing, drkit's mirror
    runs in drkit's phases), the load, the watcher, the measure."""
    job = mirror = None
    state = workdir / "state"
    if name in ("follow", "interval"):
        toml = drkit_config(workdir, clusters["A"], clusters["B"], groups, follow=name == "follow")
        job = spawn(f"drkit-{name}", drkit_cli("checkpoint", "-c", str(toml)), workdir, {"PYTHONPATH": str(REPO)})
        if flowing is not None:  # records flow: drkit's mirror copies them meanwhile, as MirrorMaker 2 does
            mirror = spawn("drkit-mirror", drkit_cli("mirror", "-c", str(toml)), workdir, {"PYTHONPATH": str(REPO)})
        reader = topic_reader(clusters["B"], sample) if name == "follow" else table_reader(state, sample)
        period = 0.05 if name == "follow" else 0.2
    else:
        reader, period = mm2_reader(clusters["C"], set(sample)), 0.05
    time.sleep(args.warmup)  # the job's start (and, for the follower, its catch-up on __consumer_offsets)
    heads = flowing.head if flowing is not None else None
    load = CommitLoad(clusters["A"], groups, args.partitions, args.rate, start, set(sample), heads)
    watcher = Watcher(load, reader, period)
    before = load1()
    runs_before = _translator_runs(state)
    watcher.start()
    load.start()
    time.sleep(args.seconds)
    load.stop.set()
    load.join(60)
    time.sleep(args.grace)  # the checkpoints of the last commits may still come
    watcher.stop.set()
    watcher.join(60)
    start.update(load.next)
    stopped = job.stop(60) if job is not None else None
    mirror_stopped = mirror.stop(60) if mirror is not None else None
    result = {
        "contender": name,
        **load.visibility.summary(),
        "poll_period_ms": round(period * 1000),
        "polls": watcher.polls,
        "poll_errors": watcher.errors[:3],
        "commits_sent": load.sent,
        "commits_acked": load.acked,
        "commits_failed": load.failed,
        "commit_rate": round(load.acked / load.elapsed, 1) if load.elapsed else None,
        "translator_delta_runs": None if job is None else _translator_runs(state) - runs_before,
        "load1_before": before,
        "load1_after": load1(),
        "job": stopped,
        "mirror": mirror_stopped,
        "mm2_alive": None if mm2 is None else mm2.proc.poll() is None,
    }
    log(json.dumps({k: result[k] for k in ("contender", "visibility_ms_p50", "visibility_ms_p99", "commit_rate")}))
    return result


def _translator_runs(state: Path) -> int:
    """The commits of the ``checkpoints`` Delta table so far: one per translator run that appended (under this
    load every run does); the follower writes none."""
    from drkit.layout import StateLayout

    log_dir = Path(str(StateLayout(state).checkpoints)) / "_delta_log"
    return len(list(log_dir.glob("*.json"))) if log_dir.exists() else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=1000, help="commits/s in total on A")
    parser.add_argument("--sample", type=int, default=50, help="groups whose commits are measured")
    parser.add_argument("--seconds", type=float, default=150.0, help="commit load per phase")
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--records", type=int, default=2000, help="records per partition on A")
    parser.add_argument(
        "--flowing",
        type=int,
        default=0,
        help="records/s produced on A throughout, the groups committing at the partitions' ends (0: no records "
        "flow, each commit one record further through records mirrored before)",
    )
    parser.add_argument("--base-port", type=int, default=33092)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--contenders", default=",".join(CONTENDERS), help=f"which of {', '.join(CONTENDERS)} (MM2 runs only with mm2)"
    )
    args = parser.parse_args()
    contenders = tuple(c for c in CONTENDERS if c in args.contenders.split(","))
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    workdir = Path(tempfile.mkdtemp(prefix="drkit-bench-ckpt-"))
    kafka = local_kafka(workdir / "kafka", args.base_port, heap="512m")
    report: dict[str, Any] = {
        "benchmark": "checkpoint_age",
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "git": git_facts(),
        "versions": versions(True),
        "cpus": os.cpu_count(),
        "phases": [],
    }
    mm2 = None
    flowing: Flowing | None = None
    try:
        clusters = {
            c.alias: c.bootstrap_servers for c in kafka.up(["A", "B", "C"] if "mm2" in contenders else ["A", "B"])
        }
        create_topic(clusters["A"], TOPIC, args.partitions)
        producer = Producer({"bootstrap.servers": clusters["A"], "linger.ms": 20})
        for i in range(args.records * args.partitions):
            producer.produce(TOPIC, b"r", partition=i % args.partitions)
            if i % 10_000 == 0:
                producer.poll(0)
        producer.flush(60)
        groups = [f"bench-g{i:05d}" for i in range(args.groups)]
        sample = groups[:: max(1, args.groups // args.sample)][: args.sample]
        admin = AdminClient({"bootstrap.servers": clusters["A"]})
        for group in groups:  # every group exists before any contender starts (MM2 lists them at its start)
            parts = [TopicPartition(TOPIC, p, 0) for p in range(args.partitions)]
            for future in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, parts)]).values():
                future.result(30)
        start = {(g, p): 0 for g in groups for p in range(args.partitions)}
        log("mirroring the topic to B once (drkit) and starting MirrorMaker 2 to C")
        toml = drkit_config(workdir, clusters["A"], clusters["B"], groups, follow=False)
        once = subprocess.run(
            drkit_cli("mirror", "-c", str(toml), "--once"),
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            check=False,
        )
        if once.returncode != 0:
            raise SystemExit(f"drkit mirror --once failed: {once.stderr[-2000:]}")
        if args.flowing:
            flowing = Flowing(clusters["A"], args.partitions, args.flowing, args.records)
            flowing.start()
        if "mm2" in contenders:
            mm2 = start_mm2(workdir, clusters["A"], clusters["C"])
            time.sleep(args.warmup)
        for r in range(args.rounds):
            order = contenders if r % 2 == 0 else tuple(reversed(contenders))
            for name in order:
                log(f"round {r + 1}: {name}")
                report["phases"].append(
                    {"round": r + 1, **phase(name, args, clusters, groups, sample, start, workdir, mm2, flowing)}
                )
    finally:
        if flowing is not None:
            flowing.stop.set()
            flowing.join(60)
        if mm2 is not None:
            report["mm2"] = mm2.stop(60)
        kafka.down()
    report["summary"] = {
        name: {
            key: [p.get(key) for p in report["phases"] if p["contender"] == name]
            for key in (
                "visibility_ms_p50",
                "visibility_ms_p99",
                "visibility_ms_max",
                "commits_never_covered",
                "commit_rate",
                "reread_records_per_group_p50",
                "reread_records_per_group_p99",
                "reread_records_per_group_max",
            )
        }
        for name in contenders
    }
    print_json(report, args.out)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
