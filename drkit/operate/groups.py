"""The groups' side of a move: their state and committed offsets on a cluster, as the plan needs them.

Shared by failover, failback and the apply's read-back; only real commits count (Kafka reports a
partition without one as a negative offset).
"""

from __future__ import annotations

from drkit.core.checkpoints import CommittedOffset
from drkit.core.plan import GroupFacts
from drkit.core.ports import ClusterAdmin, TopicPartition


def group_facts(admin: ClusterAdmin, names: list[str]) -> dict[str, GroupFacts]:
    states = admin.describe_groups(names)
    committed = admin.committed_offsets_many(names)
    return {name: GroupFacts(states.get(name), real_offsets(committed.get(name, []))) for name in names}


def real_offsets(committed: list[CommittedOffset]) -> dict[TopicPartition, int]:
    """Only real commits: Kafka reports a partition without one as a negative offset."""
    return {(c.topic, c.partition): c.offset for c in committed if c.offset >= 0}
