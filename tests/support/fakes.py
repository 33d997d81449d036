"""In-memory stand-ins for the ports of ``drkit.core.ports``: clusters, offset-syncs, checkpoints, audit;
and for the mirror's target producer (a confluent-kafka ``Producer``, plain or transactional).

Small on purpose (like httpx's MockTransport): enough state to drive every decision of failover,
failback and status in milliseconds. They claim nothing about Kafka or Delta; the integration
tests prove the real adapters against real brokers and tables.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import confluent_kafka

from drkit.config import DrkitConfig, parse_config
from drkit.core.acls import TopicAcl
from drkit.core.audit import OperationRecord, fold
from drkit.core.checkpoints import Checkpoint, CommittedOffset, RecordedCheckpoint
from drkit.core.groups import GroupState, Member
from drkit.core.heartbeat import HeartbeatCopy
from drkit.core.mirror_lease import Instance, LeaseAct, LeaseEntry
from drkit.core.offsets import SyncRange
from drkit.core.origin import TailRecord, TargetTail
from drkit.core.ports import SyncProgress, TopicPartition
from drkit.core.reach import Reach, Unreachable
from drkit.core.translate import Position
from drkit.errors import ClusterError, FencedError
from drkit.layout import StateLayout
from drkit.operate.context import OperateContext
from drkit.store.runs import MirrorFiles, RunFiles

NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


@dataclass
class FakeCluster:
    """One cluster: topics with end offsets, groups with offsets and members, first timestamps."""

    alias: str
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    #: Commit metadata of some of ``offsets``.
    metadata: dict[str, dict[TopicPartition, str]] = field(default_factory=dict)
    members: dict[str, tuple[Member, ...]] = field(default_factory=dict)
    timestamps: dict[TopicPartition, int] = field(default_factory=dict)
    reachable: bool = True
    #: How often a running mirror renewed this cluster's admin clients (drkit.mirror.outage).
    renewals: int = 0
    commits: list[tuple[str, dict[TopicPartition, int]]] = field(default_factory=list)
    #: Offsets the broker "keeps" instead of what was committed (to test the read-back check).
    tamper: dict[TopicPartition, int] = field(default_factory=dict)
    #: Per flow, per group, the newest value on the checkpoint topic (drkit.core.live_checkpoints).
    live: dict[str, dict[str, bytes]] = field(default_factory=dict)
    #: Log start offsets (0 where not set) of the partitions in ``ends``.
    starts: dict[TopicPartition, int] = field(default_factory=dict)
    #: Records with their origins (drkit.core.origin), by partition, in offset order.
    records: dict[TopicPartition, list[TailRecord]] = field(default_factory=dict)
    tail_reads: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: Transactional ids fenced (exactly-once mirrors' producers), in order.
    fenced: list[str] = field(default_factory=list)
    #: The newest heartbeat copy per (topic, key) (drkit.core.heartbeat).
    heartbeats: dict[tuple[str, bytes], HeartbeatCopy] = field(default_factory=dict)
    #: Each flow's entries on the mirror lease topic (absent: the topic does not exist).
    lease: dict[str, list[LeaseEntry]] = field(default_factory=dict)
    #: The groups of each commit_offsets_many call, and a hook run after each group's commit (to
    #: interrupt an apply mid-way, or to let another apply in).
    batches: list[list[str]] = field(default_factory=list)
    after_commit: Callable[[str], None] | None = None
    #: Topic ACL bindings (None: the cluster has no authorizer).
    acls: set[TopicAcl] | None = None

    #: Questions asked of this cluster (every method counts, answered or not).
    asked: int = 0

    def renew(self) -> None:
        self.renewals += 1

    def _check(self) -> None:
        self.asked += 1
        if not self.reachable:
            raise ClusterError(f"cluster {self.alias} is unreachable: fake")

    def partition_counts(self) -> dict[str, int]:
        self._check()
        counts: dict[str, int] = {}
        for topic, p in self.ends:
            counts[topic] = max(counts.get(topic, 0), p + 1)
        return counts

    def end_offsets(self, partitions: Mapping[str, int]) -> dict[TopicPartition, int]:
        self._check()
        return {(t, p): self.ends.get((t, p), 0) for t, n in partitions.items() for p in range(n)}

    def start_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        self._check()
        return {k: self.starts.get(k, 0) for k in partitions if k in self.ends or k in self.starts}

    def first_timestamps(self, positions: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        self._check()
        return {k: self.timestamps[k] for k in positions if k in self.timestamps}

    def lease_entries(self, flow: str) -> list[LeaseEntry] | None:
        return self.lease.get(flow)

    def live_checkpoint_values(self, flow: str) -> dict[str, bytes] | None:
        self._check()
        return self.live.get(flow)

    def newest_heartbeat(self, topic: str, key: bytes) -> HeartbeatCopy | None:
        self._check()
        return self.heartbeats.get((topic, key))

    def fence_transactions(self, transactional_ids: Iterable[str]) -> None:
        self._check()
        self.fenced.extend(transactional_ids)

    def read_tail(self, topic: str, partition: int, start: int, end: int, origin_alias: str) -> TargetTail:
        self._check()
        self.tail_reads.append((topic, partition, start, end))
        kept = tuple(r for r in self.records.get((topic, partition), []) if start <= r.downstream < end)
        return TargetTail(start, end, kept)

    def list_groups(self) -> list[str]:
        self._check()
        return sorted(set(self.offsets) | set(self.members))

    def committed_offsets(self, group: str) -> list[CommittedOffset]:
        self._check()
        meta = self.metadata.get(group, {})
        return [
            CommittedOffset(group, t, p, o, meta.get((t, p)))
            for (t, p), o in sorted(self.offsets.get(group, {}).items())
        ]

    def committed_offsets_many(self, groups: Iterable[str]) -> dict[str, list[CommittedOffset]]:
        return {g: self.committed_offsets(g) for g in groups}

    def commit_offsets_many(self, commits: Mapping[str, Mapping[TopicPartition, int]]) -> dict[str, str]:
        self._check()
        self.batches.append(sorted(commits))
        refused = {}
        for group, offsets in commits.items():
            try:
                self.commit_offsets(group, offsets)
            except ClusterError as exc:
                refused[group] = str(exc)
            if self.after_commit is not None:
                self.after_commit(group)
        return refused

    def describe_groups(self, groups: Iterable[str]) -> dict[str, GroupState]:
        self._check()
        out = {}
        for g in groups:
            members = self.members.get(g, ())
            if members or g in self.offsets:
                out[g] = GroupState(g, "Stable" if members else "Empty", members)
        return out

    def topic_acls(self) -> list[TopicAcl]:
        self._check()
        if self.acls is None:
            raise ClusterError(f"cluster {self.alias} has no authorizer, so its ACLs cannot be described: fake")
        return sorted(self.acls)

    def add_acls(self, acls: Iterable[TopicAcl]) -> None:
        self._check()
        assert self.acls is not None
        self.acls |= set(acls)

    def delete_acls(self, acls: Iterable[TopicAcl]) -> None:
        self._check()
        assert self.acls is not None
        self.acls -= set(acls)

    def delete_groups(self, groups: Iterable[str]) -> dict[str, str]:
        self._check()
        refused = {}
        for g in groups:
            if self.members.get(g):
                refused[g] = f"cluster {self.alias}: cannot delete group {g!r}: it has members"
            else:
                self.offsets.pop(g, None)
                self.metadata.pop(g, None)
        return refused

    def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        self._check()
        if self.members.get(group):
            raise ClusterError(f"cluster {self.alias}: cannot commit offsets for group {group!r}: active")
        self.commits.append((group, dict(offsets)))
        kept = {k: self.tamper.get(k, v) for k, v in offsets.items()}
        self.offsets.setdefault(group, {}).update(kept)


@dataclass
class FakeClusters:
    clusters: dict[str, FakeCluster]
    probes: list[str] = field(default_factory=list)

    #: Each reach() call's clusters, in order (a command probes each cluster once, all at once).
    reaches: list[list[str]] = field(default_factory=list)

    def admin(self, alias: str, probe: bool = False) -> FakeCluster:
        if probe:
            self.probes.append(alias)
        return self.clusters[alias]

    def reach(self, aliases: Iterable[str]) -> dict[str, Reach]:
        wanted = list(dict.fromkeys(aliases))
        self.reaches.append(wanted)
        return {
            a: Reach(a) if self.clusters[a].reachable else Reach(a, Unreachable.REFUSED, f"{a}:9092", 2.0)
            for a in wanted
        }


@dataclass
class FakeSyncs:
    """flow -> (source topic, partition) -> ranges; plus the source->target topic map per flow.

    A sync is written only after the target acknowledged its copies, so ``add`` also grows the target
    partition on the flow's target cluster (``targets``: flow -> cluster) to at least the synced end;
    a test deletes or truncates it afterwards to model a target that lost them."""

    ranges_by_flow: dict[str, dict[TopicPartition, list[SyncRange]]] = field(default_factory=dict)
    topics_by_flow: dict[str, dict[str, str]] = field(default_factory=dict)
    synced_at_ms: int = NOW_MS - 2_000
    targets: dict[str, FakeCluster] = field(default_factory=dict)
    #: The table's version: one more per ``add`` (the translator reloads only on a new one).
    versions: int = 0
    reads: int = 0

    def add(self, flow: str, source_topic: str, target_topic: str, partition: int, *ranges: SyncRange) -> None:
        self.versions += 1
        self.ranges_by_flow.setdefault(flow, {}).setdefault((source_topic, partition), []).extend(ranges)
        self.topics_by_flow.setdefault(flow, {})[source_topic] = target_topic
        target = self.targets.get(flow)
        if target is not None and ranges:
            key = (target_topic, partition)
            target.ends[key] = max(target.ends.get(key, 0), max(r.downstream_last for r in ranges) + 1)

    def ranges(self, flow: str, topics: list[str] | None = None) -> dict[TopicPartition, list[SyncRange]]:
        return {k: list(v) for k, v in self.ranges_by_flow.get(flow, {}).items() if topics is None or k[0] in topics}

    def progress(self, flow: str) -> dict[TopicPartition, SyncProgress]:
        out = {}
        for key, ranges in self.ranges_by_flow.get(flow, {}).items():
            last = max(ranges, key=lambda r: r.upstream_last)
            out[key] = SyncProgress(last.upstream_last, last.downstream_last, self.synced_at_ms)
        return out

    def target_topics(self, flow: str) -> dict[str, str]:
        return dict(self.topics_by_flow.get(flow, {}))

    def version(self) -> int | None:
        return self.versions or None

    def ranges_since(
        self, flow: str, seen: dict[str, int], version: int
    ) -> tuple[dict[TopicPartition, list[SyncRange]], dict[str, int]]:
        """Every range of the flow (the cache coalesces what it already holds); ``seen`` is kept as is."""
        self.reads += 1
        return self.ranges(flow), dict(seen)


@dataclass
class FakeCheckpoints:
    rows: list[RecordedCheckpoint] = field(default_factory=list)

    def add(
        self,
        flow: str,
        group: str,
        topic: str,
        target_topic: str,
        partition: int,
        upstream: int,
        at_ms: int = NOW_MS - 1_000,
    ) -> None:
        checkpoint = Checkpoint(flow, group, topic, target_topic, partition, upstream, None, Position.UNMIRRORED)
        self.rows.append(RecordedCheckpoint(checkpoint, at_ms))

    def record(self, checkpoint: Checkpoint, at_ms: int = NOW_MS - 1_000) -> None:
        """A checkpoint row as the translator wrote it (its translation and position included)."""
        self.rows.append(RecordedCheckpoint(checkpoint, at_ms))

    def ensure(self) -> None:
        pass

    def append(self, rows: list[Checkpoint], at: datetime | None = None) -> int:
        at_ms = int((at or NOW).timestamp() * 1000)
        self.rows.extend(RecordedCheckpoint(c, at_ms) for c in rows)
        return len(rows)

    def latest(
        self, flow: str, groups: list[str] | None = None, as_of: datetime | None = None, version: int | None = None
    ) -> list[RecordedCheckpoint]:
        limit = None if as_of is None else as_of.timestamp() * 1000
        latest: dict[tuple[str, str, int], RecordedCheckpoint] = {}
        for r in self.rows:
            c = r.checkpoint
            if c.flow != flow or (groups is not None and c.group not in groups):
                continue
            if limit is not None and r.checkpointed_at_ms > limit:
                continue
            if c.key not in latest or r.checkpointed_at_ms >= latest[c.key].checkpointed_at_ms:
                latest[c.key] = r
        return sorted(latest.values(), key=lambda r: r.checkpoint.key)


@dataclass
class FakeOperations:
    """Rows in append order; a row's index is its commit version (as the Delta table's commits order them)."""

    records: list[OperationRecord] = field(default_factory=list)
    #: Run after each append with the row (to let another apply write its intent right after this one).
    after_append: Callable[[OperationRecord], None] | None = None

    def append(self, record: OperationRecord) -> None:
        self.records.append(record)
        if self.after_append is not None:
            hook, self.after_append = self.after_append, None  # once: the hook may append itself
            hook(record)

    def list(self, flow: str | None = None, limit: int = 50) -> list[OperationRecord]:
        rows = [r for r in self.records if flow is None or r.flow == flow]
        return list(reversed(rows))[:limit]

    def recent(self, limit: int) -> list[OperationRecord]:
        return self.list(None, limit)

    def versions(self, ids: Iterable[str]) -> dict[str, int]:
        wanted, out = set(ids), {}
        for version, r in enumerate(self.records):
            if r.id in wanted and r.id not in out:
                out[r.id] = version
        return out

    @property
    def folded(self) -> list[OperationRecord]:
        """One record per operation (its outcome where it has one), in the order they started."""
        return fold(self.records)


def two_cluster_config(tmp_path: Path, **extra: Any) -> DrkitConfig:
    """Clusters A and B (addresses never contacted), flows A->B and B->A, state under tmp_path."""
    data: dict[str, Any] = {
        "clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [{"source": "A", "target": "B"}, {"source": "B", "target": "A"}],
        "state": {"root": str(tmp_path / "state")},
    }
    data.update(extra)
    return parse_config(data, str(tmp_path / "drkit.toml"))


@dataclass
class World:
    """A config, two fake clusters and fake stores, wired into an operations context."""

    config: DrkitConfig
    a: FakeCluster
    b: FakeCluster
    syncs: FakeSyncs
    checkpoints: FakeCheckpoints
    operations: FakeOperations
    clusters: FakeClusters

    @property
    def context(self) -> OperateContext:
        layout = StateLayout(self.config.state_root())
        return OperateContext(
            self.config,
            self.clusters,
            self.syncs,
            self.checkpoints,
            self.operations,
            layout,
            RunFiles(layout),
            MirrorFiles(layout),
            clock=lambda: NOW,
        )


def world(tmp_path: Path, config: DrkitConfig | None = None) -> World:
    a, b = FakeCluster("A"), FakeCluster("B")
    config = config or two_cluster_config(tmp_path)
    by_alias = {"A": a, "B": b}
    return World(
        config,
        a,
        b,
        FakeSyncs(targets={f.name: by_alias[f.target] for f in config.flows if f.target in by_alias}),
        FakeCheckpoints(),
        FakeOperations(),
        FakeClusters({"A": a, "B": b}),
    )


@dataclass
class FakeMirrorClusters:
    """The mirror's view of the clusters (``drkit.mirror.context.MirrorClusters``): fake admins, a scripted
    source consumer for the driver's reader, and whether a cluster answers a probe."""

    clusters: dict[str, FakeCluster]
    consumer: Any = None
    consumers_made: int = 0

    def admin(self, alias: str) -> FakeCluster:
        return self.clusters[alias]

    def source_consumer(self, flow: Any) -> Any:
        self.consumers_made += 1
        return self.consumer

    def reachable(self, alias: str, timeout: float) -> bool:
        return self.clusters[alias].reachable

    def lease_entries(self, flow: Any) -> FakeLeaseEntries:
        return FakeLeaseEntries(self.lease_topics.setdefault(flow.name, FakeLeaseTopic()), flow.target)

    lease_topics: dict[str, FakeLeaseTopic] = field(default_factory=dict)


@dataclass
class FakeLeaseTopic:
    """One flow's entries on a target's lease topic, stamped by a broker clock (real time unless a test sets
    ``now_ms``); ``down`` makes every append and read fail as a cluster that does not answer."""

    entries: list[LeaseEntry] = field(default_factory=list)
    now_ms: int | None = None
    down: bool = False

    def stamp(self) -> int:
        return int(time.time() * 1000) if self.now_ms is None else self.now_ms


class FakeLeaseEntries:
    """``drkit.mirror.lease.LeaseEntries`` over a :class:`FakeLeaseTopic`: what one process reads and appends."""

    def __init__(self, topic: FakeLeaseTopic, alias: str) -> None:
        self.topic, self.alias, self._next = topic, alias, 0
        self.closed = False

    def _answer(self) -> None:
        if self.topic.down:
            raise ClusterError(f"cluster {self.alias}: the lease topic does not answer")

    def ensure(self) -> None:
        self._answer()

    def append(
        self,
        act: LeaseAct,
        instance: Instance,
        lease_ms: int,
        claim: int = -1,
        epoch: int = 0,
        settings: Mapping[str, str] | None = None,
    ) -> int:
        self._answer()
        offset = len(self.topic.entries)
        entry = LeaseEntry(offset, self.topic.stamp(), act, instance, lease_ms, claim, epoch, dict(settings or {}))
        self.topic.entries.append(entry)
        return offset

    def read(self, wait: float) -> list[LeaseEntry]:
        self._answer()
        out = self.topic.entries[self._next :]
        self._next += len(out)
        return out

    def read_through(self, offset: int, wait: float) -> list[LeaseEntry]:
        return self.read(wait)

    def close(self) -> None:
        self.closed = True


def held_job(context: Any, flow: Any, once: bool) -> Any:
    """``drkit.mirror.wiring.mirror_job`` for this process, holding its flow's lease (as the runner makes it)."""
    import threading

    from drkit.mirror.lease import this_instance
    from drkit.mirror.wiring import mirror_job

    job = mirror_job(context, flow, once, this_instance())
    assert job.lease.acquire(threading.Event(), wait=False)
    return job


@dataclass
class FakeMirrorSyncs(FakeSyncs):
    """``offset_syncs`` as the mirror writes it: the batches recorded per stream, their rows."""

    batches: dict[tuple[str, int], list[Any]] = field(default_factory=dict)

    def ensure(self) -> None:
        pass

    def batch_written(self, stream_id: str, batch_id: int) -> bool:
        return (stream_id, batch_id) in self.batches

    epochs: dict[str, int] = field(default_factory=dict)

    def fence(self, flow: str) -> int:
        self.epochs[flow] = self.epochs.get(flow, 0) + 1
        return self.epochs[flow]

    def write(
        self, flow: str, stream_id: str, batch_id: int, ranges: Any, at: Any = None, epoch: int | None = None
    ) -> int:
        """``ranges``: an Arrow table of the range columns, as the mirror writes them."""
        if (stream_id, batch_id) in self.batches:
            return 0
        if epoch is not None and self.epochs.get(flow, 0) > epoch:
            raise FencedError(f"offset_syncs: epoch {self.epochs[flow]} is newer than {epoch}")
        rows = ranges.to_pylist()
        self.batches[(stream_id, batch_id)] = rows
        for r in rows:
            offsets = (r["upstream_first"], r["upstream_last"], r["downstream_first"], r["downstream_last"])
            self.add(flow, r["source_topic"], r["target_topic"], r["partition"], SyncRange(*offsets))
        return len(rows)


class FakeSparkContext:
    """What the mirror's wiring asks of Spark before a query starts: its master and its cores."""

    master = "local[2]"
    defaultParallelism = 2


class FakeLocalSpark:
    sparkContext = FakeSparkContext()


def mirror_context(config: DrkitConfig, consumer: Any = None) -> Any:
    """A mirror context (``drkit.mirror.context.MirrorContext``) of fakes: a local Spark that runs nothing."""
    from drkit.mirror.context import MirrorContext
    from drkit.store.runs import MirrorFiles, RunFiles

    clusters = {alias: FakeCluster(alias) for alias in config.clusters}
    layout = StateLayout(config.state_root())
    return MirrorContext(
        config,
        FakeLocalSpark(),  # no Spark: only what the driver decides is exercised
        FakeMirrorClusters(clusters, consumer),
        FakeMirrorSyncs(),
        layout,
        MirrorFiles(layout),
        RunFiles(layout),
    )


# ------------------------------------------------------------------------------ source consumer


class FakeConsumerError:
    """What a consumer's message carries as its error: a KafkaError's code, and whether it is retriable or fatal."""

    def __init__(self, code: int, retriable: bool = False, fatal: bool = False) -> None:
        self._code, self._retriable, self._fatal = code, retriable, fatal

    def code(self) -> int:
        return self._code

    def retriable(self) -> bool:
        return self._retriable

    def fatal(self) -> bool:
        return self._fatal

    def name(self) -> str:
        return f"E{self._code}"

    def str(self) -> str:
        return "scripted"


class FakeMessage:
    """What a delivery callback gets: the target topic and partition, and the offset (-1 on failure)."""

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class FakeRecord(FakeMessage):
    """A record (or an error, an end of partition) a fake consumer hands out."""

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        error: FakeConsumerError | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        super().__init__(topic, partition, offset)
        self._e, self._h = error, headers

    def error(self) -> FakeConsumerError | None:
        return self._e

    def key(self) -> bytes:
        return b"k%d" % self._offset

    def value(self) -> bytes:
        return b"v%d" % self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000 + self._offset)

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._h


# ------------------------------------------------------------------------------ target producer


class FakeError:
    """What librdkafka hands a delivery callback: a KafkaError."""

    def name(self) -> str:
        return "MSG_SIZE_TOO_LARGE"

    def str(self) -> str:
        return "Broker: Message size too large"


class FakeProducer:
    """Assigns downstream offsets per target partition, in produce order; reports on poll/flush.

    ``skip``: downstream offsets never assigned, per (target topic, partition): a gap downstream.
    ``fail``: values whose delivery report is an error. ``buffer_full``: produce calls that raise
    BufferError first (the local queue is full).
    """

    def __init__(
        self, skip: dict[tuple[str, int], set[int]] | None = None, fail: Iterable[bytes] = (), buffer_full: int = 0
    ) -> None:
        self.skip = skip or {}
        self.fail = set(fail)
        self.buffer_full = buffer_full
        self.next: dict[tuple[str, int], int] = defaultdict(int)
        self.produced: list[dict[str, Any]] = []
        self.pending: list[tuple[Callable[[Any, Any], None], Any, Any]] = []
        self.polls = 0
        self.flushes: list[float] = []
        #: Partitions (target topic, partition) the producer does not know until ``list_topics`` is called.
        self.unknown: set[tuple[str, int]] = set()
        self.lookups: list[str] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.lookups.append(topic or "")
        self.unknown = {u for u in self.unknown if u[0] != topic}

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        on_delivery: Callable[[Any, Any], None] | None = None,
        timestamp: int = 0,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """confluent_kafka.Producer.produce's signature (positional or keyword)."""
        assert on_delivery is not None
        if self.buffer_full:
            self.buffer_full -= 1
            raise BufferError("Local: Queue full")
        if (topic, partition) in self.unknown:
            raise confluent_kafka.KafkaException(
                confluent_kafka.KafkaError(confluent_kafka.KafkaError._UNKNOWN_PARTITION)
            )
        self.produced.append(
            {
                "topic": topic,
                "partition": partition,
                "key": key,
                "value": value,
                "timestamp": timestamp,
                "headers": headers,
            }
        )
        if value in self.fail:
            self.pending.append((on_delivery, FakeError(), FakeMessage(topic, partition, -1)))
            return
        where = (topic, partition)
        while self.next[where] in self.skip.get(where, set()):
            self.next[where] += 1
        self.pending.append((on_delivery, None, FakeMessage(topic, partition, self.next[where])))
        self.next[where] += 1

    def _report(self) -> int:
        pending, self.pending = self.pending, []
        for callback, err, msg in pending:
            callback(err, msg)
        return len(pending)

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return self._report()

    def flush(self, timeout: float) -> int:
        self.flushes.append(timeout)
        self._report()
        return 0


class FakeTransactionalProducer(FakeProducer):
    """A transactional producer: ``FakeProducer`` plus the transaction calls, every call recorded by name in
    ``calls`` (in order). ``raise_on``: method name -> the exception that call raises (every time: librdkafka's
    fatal errors stay). ``errors``: values whose delivery report is the given error (a KafkaError, say)."""

    def __init__(
        self,
        conf: Mapping[str, Any] | None = None,
        errors: Mapping[bytes, Any] | None = None,
        raise_on: Mapping[str, BaseException] | None = None,
    ) -> None:
        super().__init__()
        self.conf = dict(conf or {})
        self.errors = dict(errors or {})
        self.raise_on = dict(raise_on or {})
        self.calls: list[str] = []

    def _call(self, name: str) -> None:
        self.calls.append(name)
        exc = self.raise_on.get(name)
        if exc is not None:
            raise exc

    def init_transactions(self, timeout: float = -1) -> None:
        self._call("init_transactions")

    def begin_transaction(self) -> None:
        self._call("begin_transaction")

    def commit_transaction(self, timeout: float = -1) -> None:
        self._call("commit_transaction")

    def abort_transaction(self, timeout: float = -1) -> None:
        self._call("abort_transaction")

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        on_delivery: Callable[[Any, Any], None] | None = None,
        timestamp: int = 0,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        self._call("produce")
        assert on_delivery is not None
        if value is not None and value in self.errors:
            self.produced.append({"topic": topic, "partition": partition, "key": key, "value": value})
            self.pending.append((on_delivery, self.errors[value], FakeMessage(topic, partition, -1)))
            return
        super().produce(topic, value, key, partition, on_delivery, timestamp=timestamp, headers=headers)

    def poll(self, timeout: float) -> int:
        self._call("poll")
        return super().poll(timeout)

    def flush(self, timeout: float) -> int:
        self._call("flush")
        return super().flush(timeout)
