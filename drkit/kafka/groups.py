"""Consumer groups through the Kafka admin API: list, committed offsets, members, commit.

Used by the translator (source side) and by failover/failback (target side). Every broker error
becomes a :class:`ClusterError` naming the cluster and the group.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from drkit.core.checkpoints import CommittedOffset
from drkit.errors import ClusterError

TIMEOUT = 15.0


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # Kafka's group state: Empty, Stable, PreparingRebalance, Dead, Unknown, ...
    members: tuple[Member, ...]

    @property
    def active(self) -> bool:
        """True when consumers are in the group: committing offsets for it would race with them."""
        return bool(self.members) or self.state.upper() in ("STABLE", "PREPARINGREBALANCE", "COMPLETINGREBALANCE",
                                                             "ASSIGNING", "RECONCILING")


def list_groups(admin: AdminClient, alias: str) -> list[str]:
    try:
        result = admin.list_consumer_groups(request_timeout=TIMEOUT).result()
    except KafkaException as exc:
        raise ClusterError(f"cluster {alias}: cannot list consumer groups: {exc.args[0]}") from None
    return sorted(g.group_id for g in result.valid)


def committed_offsets(admin: AdminClient, alias: str, group: str) -> list[CommittedOffset]:
    """Every committed offset of ``group`` (an unknown group has none)."""
    try:
        futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                    request_timeout=TIMEOUT)
        result = futures[group].result()
    except KafkaException as exc:
        raise ClusterError(f"cluster {alias}: cannot read committed offsets of group {group!r}: "
                           f"{exc.args[0]}") from None
    out = []
    for tp in result.topic_partitions or []:
        if tp.error is not None:
            raise ClusterError(f"cluster {alias}: group {group!r} {tp.topic}/{tp.partition}: {tp.error}")
        out.append(CommittedOffset(group, tp.topic, tp.partition, tp.offset, tp.metadata or None))
    return out


def describe(admin: AdminClient, alias: str, groups: Iterable[str]) -> dict[str, GroupState]:
    names = list(groups)
    if not names:
        return {}
    out: dict[str, GroupState] = {}
    try:
        futures = admin.describe_consumer_groups(names, request_timeout=TIMEOUT)
        for name, future in futures.items():
            d = future.result()
            members = tuple(Member(m.member_id, m.client_id, m.host) for m in d.members)
            out[name] = GroupState(name, str(getattr(d.state, "name", d.state)), members)
    except KafkaException as exc:
        raise ClusterError(f"cluster {alias}: cannot describe consumer groups: {exc.args[0]}") from None
    return out


def commit_offsets(admin: AdminClient, alias: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` (the broker refuses while the group has members)."""
    if not offsets:
        return
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
    try:
        result = admin.alter_consumer_group_offsets([request], request_timeout=TIMEOUT)[group].result()
    except KafkaException as exc:
        raise ClusterError(f"cluster {alias}: cannot commit offsets for group {group!r}: {exc.args[0]}") from None
    for tp in result.topic_partitions or []:
        if tp.error is not None:
            raise ClusterError(f"cluster {alias}: group {group!r} {tp.topic}/{tp.partition}: {tp.error}")


def offsets_of(admin: AdminClient, alias: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets as {(topic, partition): offset} (only real commits)."""
    return {(c.topic, c.partition): c.offset for c in committed_offsets(admin, alias, group) if c.offset >= 0}
