"""A broker's authorization refusal as one line naming the cluster, the resource and the operation.

Invariant: every Kafka adapter that turns a broker error into a :class:`ClusterError` asks
:func:`denied` first (an :class:`AccessDenied`, never taken for an unreachable cluster), so a principal
missing an ACL reads ``cluster B: principal lacks WRITE on topic A.orders (TOPIC_AUTHORIZATION_FAILED)``,
the ACL to grant, instead of librdkafka's text.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from confluent_kafka import KafkaError

from drkit.errors import AccessDenied


class Operation(StrEnum):
    """Kafka ACL operations (the names ``kafka-acls --operation`` takes, upper case as Kafka prints them)."""

    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DESCRIBE = "DESCRIBE"
    ALTER = "ALTER"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"
    DELETE = "DELETE"


#: The refusals librdkafka reports, by error code: which kind of resource was refused.
_REFUSED = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
}


def _error_of(error: Any) -> Any:
    """The KafkaError in ``error`` (a KafkaError, or a KafkaException carrying one), else None."""
    if isinstance(error, KafkaError):
        return error
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], KafkaError) else None


def refusal(
    alias: str, error: Any, operation: Operation, topic: str | None = None, group: str | None = None
) -> str | None:
    """The one line for an authorization refusal in ``error``, or None when it is another error.

    ``operation`` is what the caller asked for; the refused resource's kind comes from the error code
    (a commit may be refused on the group or on one of its topics), its name from ``topic``/``group``.
    """
    err = _error_of(error)
    kind = _REFUSED.get(err.code()) if err is not None else None
    if kind is None:
        return None
    if kind == "topic":
        resource = f"topic {topic}" if topic else "a topic"
    elif kind == "group":
        resource = f"group {group}" if group else "a group"
    elif kind == "cluster":
        resource = "the cluster"
        # Creating topics is authorized on the topic or the cluster: name the topic, the narrower grant.
        if topic and operation is Operation.CREATE:
            resource = f"topic {topic} (or the cluster)"
    else:
        resource = "a transactional id"
    return f"cluster {alias}: principal lacks {operation} on {resource} ({err.name()})"


def denied(
    alias: str, error: Any, operation: Operation, topic: str | None = None, group: str | None = None
) -> AccessDenied | None:
    """:func:`refusal` as the error (exit 4) to raise, or None."""
    line = refusal(alias, error, operation, topic, group)
    return AccessDenied(line) if line else None
