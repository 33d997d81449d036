"""One Kafka cluster's admin side, by alias: topics, end offsets, consumer groups, commits.

The object carries its cluster's alias, and every broker error becomes a :class:`ClusterError`
that names the cluster (and the group, where there is one), so an operator always knows which
side failed. It implements ``drkit.core.ports.ClusterAdmin``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from drkit.config import ClusterConfig, DrkitConfig
from drkit.core.acls import TopicAcl
from drkit.core.checkpoints import CommittedOffset
from drkit.core.groups import GroupState, Member
from drkit.core.heartbeat import HeartbeatCopy, created_ms_of
from drkit.core.live_checkpoints import CHECKPOINT_TOPIC
from drkit.core.mirror_lease import LEASE_TOPIC, LeaseEntry
from drkit.core.origin import TargetTail
from drkit.core.reach import Reach
from drkit.errors import AccessDenied, ClusterError
from drkit.kafka import acls, clients, topics
from drkit.kafka.authz import Operation, denied
from drkit.kafka.tail import TAIL_CONSUMER_SETTINGS, TAIL_GROUP, read_tail

#: Seconds an admin request may take on a cluster that should answer.
TIMEOUT = 15.0
#: Seconds a probe waits (the source side of status, offsets and failover, which may be gone).
PROBE_TIMEOUT = 5.0
#: Connections a request per group is spread over when many groups are asked at once: a broker
#: answers one request per connection at a time, so a thousand requests on one connection queue.
GROUP_CONNECTIONS = 4
#: From this many groups on, the requests are spread (below, one connection answers quickly enough;
#: failover commits in batches of ``drkit.operate.apply.COMMIT_BATCH_GROUPS``).
SPREAD_FROM = 16


class KafkaAdmin:
    def __init__(self, cluster: ClusterConfig, alias: str, timeout: float = TIMEOUT) -> None:
        self._cluster = cluster
        self._alias = alias
        self.timeout = timeout
        self._client: AdminClient | None = None
        self._more: list[AdminClient] = []
        self._client_lock = threading.Lock()

    @property
    def alias(self) -> str:
        return self._alias

    @property
    def client(self) -> AdminClient:
        """The confluent-kafka admin client (for adapters that need more than this class offers); made
        once, whichever thread asks first (one admin answers several threads of a command)."""
        with self._client_lock:
            if self._client is None:
                self._client = clients.admin(self._cluster, self._alias, timeout_ms=int(self.timeout * 1000))
            return self._client

    def renew(self) -> None:
        """Drop the clients: the next request makes new ones. A long-lived client can stay unable to answer
        after its broker restarted (seen: librdkafka "Failed while waiting for controller" for minutes while
        a fresh client of the same cluster answered at once); a request already running keeps its client."""
        with self._client_lock:
            self._client, self._more = None, []

    def adopt(self, client: AdminClient) -> None:
        """Ask on ``client`` (a probe's, connected and configured for this cluster) unless a client exists."""
        with self._client_lock:
            if self._client is None:
                self._client = client

    def _spread(self, requests: int) -> list[AdminClient]:
        """The clients ``requests`` requests (one per group) are spread over, round robin."""
        first = self.client
        if requests < SPREAD_FROM:
            return [first]
        with self._client_lock:
            while len(self._more) < GROUP_CONNECTIONS - 1:
                self._more.append(clients.admin(self._cluster, self._alias, timeout_ms=int(self.timeout * 1000)))
            return [first, *self._more]

    def _fail(
        self,
        what: str,
        exc: KafkaException,
        operation: Operation = Operation.DESCRIBE,
        topic: str | None = None,
        group: str | None = None,
    ) -> ClusterError | AccessDenied:
        """The error to raise: a missing ACL named as such (drkit.kafka.authz), else ``what`` failed."""
        refused = denied(self._alias, exc, operation, topic, group)
        return refused or ClusterError(f"cluster {self._alias}: {what}: {exc.args[0]}")

    def _partition_error(self, group: str, tp: TopicPartition, operation: Operation) -> ClusterError | AccessDenied:
        refused = denied(self._alias, tp.error, operation, tp.topic, group)
        return refused or ClusterError(f"cluster {self._alias}: group {group!r} {tp.topic}/{tp.partition}: {tp.error}")

    # -- topics ---------------------------------------------------------------------------------

    def partition_counts(self) -> dict[str, int]:
        return topics.partition_counts(self.client, self._alias, timeout=self.timeout)

    def end_offsets(self, partitions: Mapping[str, int]) -> dict[tuple[str, int], int]:
        return topics.end_offsets(self.client, self._alias, dict(partitions), timeout=self.timeout)

    def start_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Log start offset of each partition (the first not removed by retention or delete-records);
        partitions the cluster does not have (e.g. a target topic not created yet) are left out."""
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import OffsetSpec

        absent = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._NOENT, KafkaError._UNKNOWN_PARTITION)
        earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        request = {TopicPartition(t, p): earliest for t, p in sorted(set(partitions))}
        if not request:
            return {}
        try:
            futures = self.client.list_offsets(request, request_timeout=self.timeout)
        except KafkaException as exc:
            raise self._fail("cannot read start offsets", exc) from None
        out: dict[tuple[str, int], int] = {}
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                # No such topic or partition (librdkafka says _NOENT when it finds no leader for a topic
                # it does not know): left out, so the caller cannot translate with it, the safe side.
                if exc.args[0].code() in absent:
                    continue
                raise self._fail(
                    f"cannot read the start offset of {tp.topic}/{tp.partition}", exc, topic=tp.topic
                ) from None
        return out

    def first_timestamps(self, positions: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        if not positions:
            return {}
        consumer = clients.consumer(
            self._cluster,
            self._alias,
            "_drkit-status",
            **{"isolation.level": "read_committed", "enable.partition.eof": False},
        )
        try:
            return topics.first_timestamps(consumer, dict(positions), timeout=self.timeout)
        finally:
            consumer.close()

    def read_tail(self, topic: str, partition: int, start: int, end: int, origin_alias: str) -> TargetTail:
        """The committed records of ``topic/partition`` in ``[start, end)`` with the origin each carries from
        cluster ``origin_alias`` (drkit.kafka.tail: at most TAIL_READ_LIMIT of them, ``end`` of the result
        says where reading stopped)."""
        if end <= start:
            return TargetTail(start, start, ())
        consumer = clients.consumer(self._cluster, self._alias, TAIL_GROUP, **TAIL_CONSUMER_SETTINGS)
        try:
            timeout = max(self.timeout, 30.0)
            return read_tail(consumer, self._alias, topic, partition, start, end, origin_alias, timeout, TAIL_GROUP)
        finally:
            consumer.close()

    def lease_entries(self, flow: str) -> list[LeaseEntry] | None:
        """Every entry of ``flow`` on this cluster's mirror lease topic (drkit.kafka.lease_log); None when the
        topic does not exist (no mirror with a lease ever ran against this cluster)."""
        from drkit.kafka.lease_log import LeaseLog

        if LEASE_TOPIC not in self.partition_counts():
            return None
        log = LeaseLog(self._cluster, self._alias, flow, timeout=self.timeout)
        try:
            out: list[LeaseEntry] = []
            while True:
                read = log.read(self.timeout)
                out.extend(read)
                if log.at_end:
                    return out
                if not read:
                    raise ClusterError(
                        f"cluster {self._alias}: {LEASE_TOPIC} was not read to its end in {self.timeout:.0f}s"
                    )
        finally:
            log.close()

    def live_checkpoint_values(self, flow: str) -> dict[str, bytes] | None:
        """Per group of ``flow``, the newest value on this cluster's checkpoint topic
        (drkit.kafka.checkpoint_topic); None when the topic does not exist."""
        from drkit.kafka.checkpoint_topic import read_newest

        if CHECKPOINT_TOPIC not in self.partition_counts():
            return None
        return read_newest(self._cluster, self._alias, flow, max(self.timeout, 30.0))

    def fence_transactions(self, transactional_ids: Iterable[str]) -> None:
        """Initialise a producer of each id (fencing its older producers, aborting their open transaction)."""
        for tid in transactional_ids:
            producer = clients.producer(
                self._cluster, self._alias, **{"transactional.id": tid, "enable.idempotence": True, "acks": "all"}
            )
            try:
                producer.init_transactions(max(self.timeout, 30.0))
            except KafkaException as exc:
                raise self._fail(f"cannot fence transactional id {tid}", exc, Operation.WRITE) from None
            finally:
                # A producer whose init failed fatally (a refused id) raises that error again on flush: it must
                # not take the place of the refusal above.
                with contextlib.suppress(KafkaException):
                    producer.flush(0)

    def newest_heartbeat(self, topic: str, key: bytes, scan: int = 200) -> HeartbeatCopy | None:
        """The newest heartbeat with ``key`` among the last ``scan`` records of each partition of ``topic``
        (None: the topic does not exist or holds none)."""
        from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

        consumer = clients.consumer(
            self._cluster,
            self._alias,
            "_drkit-heartbeats",
            **{"isolation.level": "read_uncommitted", "enable.partition.eof": True},
        )
        newest: HeartbeatCopy | None = None
        try:
            meta = consumer.list_topics(topic, timeout=self.timeout).topics.get(topic)
            if meta is None or meta.error is not None:
                return None
            starts = []
            for p in meta.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=self.timeout)
                if high > low:
                    starts.append(TopicPartition(topic, p, max(low, high - scan)))
            if not starts:
                return None
            consumer.assign(starts)
            pending = {tp.partition for tp in starts}
            deadline = time.monotonic() + self.timeout
            while pending and time.monotonic() < deadline:
                for message in consumer.consume(scan, timeout=0.5):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            pending.discard(message.partition())
                        continue
                    created = created_ms_of(message.value()) if message.key() == key else None
                    if created is None or (newest is not None and created <= newest.created_ms):
                        continue
                    kind, stamp = message.timestamp()
                    newest = HeartbeatCopy(created, stamp if kind == TIMESTAMP_LOG_APPEND_TIME else None)
        except KafkaException as exc:
            raise self._fail(f"cannot read heartbeats of {topic}", exc, Operation.READ, topic) from None
        finally:
            consumer.close()
        return newest

    # -- consumer groups ------------------------------------------------------------------------

    def list_groups(self) -> list[str]:
        try:
            result = self.client.list_consumer_groups(request_timeout=self.timeout).result()
        except KafkaException as exc:
            raise self._fail("cannot list consumer groups", exc) from None
        return sorted(g.group_id for g in result.valid)

    def committed_offsets(self, group: str) -> list[CommittedOffset]:
        """Every committed offset of ``group`` (an unknown group has none)."""
        try:
            futures = self.client.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
            )
            result = futures[group].result()
        except KafkaException as exc:
            raise self._fail(f"cannot read committed offsets of group {group!r}", exc, group=group) from None
        return self._offsets(group, result.topic_partitions or [])

    def committed_offsets_many(self, groups: Iterable[str]) -> dict[str, list[CommittedOffset]]:
        """Every committed offset of each group: one request per group (Kafka's API takes one), all in
        flight at once over a few connections, so a thousand groups do not cost a thousand round trips."""
        names = list(dict.fromkeys(groups))
        spread = self._spread(len(names))
        try:
            futures = {
                g: spread[i % len(spread)].list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(g)], request_timeout=self.timeout
                )[g]
                for i, g in enumerate(names)
            }
        except KafkaException as exc:
            raise self._fail("cannot read committed offsets", exc) from None
        out: dict[str, list[CommittedOffset]] = {}
        for group, future in futures.items():
            try:
                result = future.result()
            except KafkaException as exc:
                raise self._fail(f"cannot read committed offsets of group {group!r}", exc, group=group) from None
            out[group] = self._offsets(group, result.topic_partitions or [])
        return out

    def _offsets(self, group: str, partitions: list[TopicPartition]) -> list[CommittedOffset]:
        out = []
        for tp in partitions:
            if tp.error is not None:
                raise self._partition_error(group, tp, Operation.DESCRIBE)
            out.append(CommittedOffset(group, tp.topic, tp.partition, tp.offset, tp.metadata or None))
        return out

    def offsets_of(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets as {(topic, partition): offset} (only real commits)."""
        return {(c.topic, c.partition): c.offset for c in self.committed_offsets(group) if c.offset >= 0}

    def describe_groups(self, groups: Iterable[str]) -> dict[str, GroupState]:
        """Each group's state and members. Groups without members are told by one ListGroups request per
        broker (with states, KIP-518); only the others are described, for their members: describing a
        thousand groups costs most of a second, listing them a few milliseconds. A group a broker did
        not list (or a listing with errors) is described."""
        names = list(groups)
        if not names:
            return {}
        out: dict[str, GroupState] = {}
        try:
            listed = self.client.list_consumer_groups(request_timeout=self.timeout).result()
        except KafkaException as exc:
            raise self._fail("cannot list consumer groups", exc) from None
        if not listed.errors:
            states = {g.group_id: str(getattr(g.state, "name", g.state)) for g in listed.valid}
            for name in names:
                state = states.get(name, "DEAD")  # not listed by any broker: the group does not exist
                if state in _MEMBERLESS:
                    out[name] = GroupState(name, state, ())
            names = [n for n in names if n not in out]
            if not names:
                return out
        try:
            futures = self.client.describe_consumer_groups(names, request_timeout=self.timeout)
            for name, future in futures.items():
                d = future.result()
                members = tuple(Member(m.member_id, m.client_id, m.host) for m in d.members)
                out[name] = GroupState(name, str(getattr(d.state, "name", d.state)), members)
        except KafkaException as exc:
            raise self._fail("cannot describe consumer groups", exc) from None
        return out

    def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit ``offsets`` for ``group`` (the broker refuses while the group has members)."""
        if not offsets:
            return
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        )
        try:
            result = self.client.alter_consumer_group_offsets([request], request_timeout=self.timeout)[group].result()
        except KafkaException as exc:
            raise self._fail(f"cannot commit offsets for group {group!r}", exc, Operation.READ, group=group) from None
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise self._partition_error(group, tp, Operation.READ)

    def commit_offsets_many(self, commits: Mapping[str, Mapping[tuple[str, int], int]]) -> dict[str, str]:
        """Commit many groups' offsets with every request in flight at once (each group all or nothing).

        A group the cluster refuses (active members, a partition error) does not stop the others: the
        refused groups come back with the reason, naming the cluster; the caller reads back what holds."""
        requests = {
            g: [TopicPartition(t, p, o) for (t, p), o in sorted(offs.items())] for g, offs in commits.items() if offs
        }
        sent: dict[str, Future[ConsumerGroupTopicPartitions]] = {}
        spread = self._spread(len(requests))  # one OffsetCommit per group, spread over the group connections
        try:
            for group, partitions in requests.items():
                client = spread[len(sent) % len(spread)]
                request = ConsumerGroupTopicPartitions(group, partitions)
                sent[group] = client.alter_consumer_group_offsets([request], request_timeout=self.timeout)[group]
        except KafkaException as exc:
            raise self._fail("cannot commit offsets", exc, Operation.READ) from None
        return {group: reason for group, future in sent.items() if (reason := self._commit_refused(group, future))}

    def _commit_refused(self, group: str, future: Future[ConsumerGroupTopicPartitions]) -> str | None:
        """Why a group's commit was refused, as one line naming the cluster (None: committed)."""
        try:
            result = future.result()
        except KafkaException as exc:
            return str(self._fail(f"cannot commit offsets for group {group!r}", exc, Operation.READ, group=group))
        except Exception as exc:  # never a group left out of the answer
            return f"cluster {self._alias}: cannot commit offsets for group {group!r}: {exc}"
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                return str(self._partition_error(group, tp, Operation.READ))
        return None

    def topic_acls(self) -> list[TopicAcl]:
        # Only fencing asks: a cluster without an authorizer is said so here, before anything is changed.
        acls.require_authorizer(self.client, self.alias, self.timeout)
        return acls.topic_acls(self.client, self.alias, self.timeout, acls.FENCING_HINT)

    def add_acls(self, bindings: Iterable[TopicAcl]) -> None:
        acls.add_acls(self.client, self.alias, bindings, self.timeout)

    def delete_acls(self, bindings: Iterable[TopicAcl]) -> None:
        acls.delete_acls(self.client, self.alias, bindings, self.timeout)

    def delete_groups(self, groups: Iterable[str]) -> dict[str, str]:
        """Delete groups (none may have members); a group that does not exist counts as deleted. The groups
        the cluster refused, with its reason."""
        names = list(dict.fromkeys(groups))
        if not names:
            return {}
        try:
            futures = self.client.delete_consumer_groups(names, request_timeout=self.timeout)
        except KafkaException as exc:
            raise self._fail("cannot delete consumer groups", exc, Operation.DELETE) from None
        refused: dict[str, str] = {}
        for group, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                error = exc.args[0]
                if isinstance(error, KafkaError) and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    continue
                refused[group] = str(self._fail(f"cannot delete group {group!r}", exc, Operation.DELETE, group=group))
        return refused


#: Group states without members (Kafka's ``ConsumerGroupState`` names).
_MEMBERLESS = frozenset({"EMPTY", "DEAD"})


class KafkaClusters:
    """The configured clusters; implements ``drkit.core.ports.Clusters``.

    One admin per cluster and timeout, kept: an operator command asks one cluster several questions,
    from several threads at once, and each new client would connect and fetch metadata again.
    """

    def __init__(self, config: DrkitConfig) -> None:
        self._config = config
        self._admins: dict[tuple[str, bool], KafkaAdmin] = {}
        self._lock = threading.Lock()

    def admin(self, alias: str, probe: bool = False) -> KafkaAdmin:
        with self._lock:
            admin = self._admins.get((alias, probe))
            if admin is None:
                admin = KafkaAdmin(self._config.clusters[alias], alias, PROBE_TIMEOUT if probe else TIMEOUT)
                self._admins[(alias, probe)] = admin
            return admin

    def reach(self, aliases: Iterable[str]) -> dict[str, Reach]:
        """Whether each cluster answers, all probed at once (drkit.kafka.probe): the slowest probe's time,
        never their sum. A new probe each call (a long-lived facade sees a cluster go and come back); the
        client of a cluster that answered serves the command's questions to it."""
        from drkit.kafka.probe import probe_all

        wanted = {a: self._config.clusters[a] for a in dict.fromkeys(aliases)}
        out: dict[str, Reach] = {}
        for alias, (reach, client) in probe_all(wanted, TIMEOUT).items():
            out[alias] = reach
            if client is not None:
                self.admin(alias).adopt(client)
                self.admin(alias, probe=True).adopt(client)
        return out


def _header_list(headers: object) -> list[tuple[str, bytes | str | None]]:
    """confluent-kafka gives a record's headers as a list of pairs (or None); never a dict when read."""
    return list(headers) if isinstance(headers, list) else []
