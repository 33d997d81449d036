"""Topic ACLs of one cluster: described and created (drkit.core.acls decides which); every broker error names
the cluster, and a cluster without an authorizer says so in one line."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from drkit.core.acls import AclCopy, PatternType, Permission, TopicAcl
from drkit.errors import ClusterError


def _fail(alias: str, what: str, exc: KafkaException) -> ClusterError:
    error = exc.args[0]
    if error.code() == KafkaError.SECURITY_DISABLED:
        return ClusterError(
            f"cluster {alias} has no authorizer, so its ACLs cannot be {what}: turn [flows.topology] sync_acls "
            "off, or enable an authorizer on it"
        )
    return ClusterError(f"cluster {alias}: ACLs cannot be {what}: {error}")


def topic_acls(admin: AdminClient, alias: str, timeout: float = 15.0) -> list[TopicAcl]:
    """Every LITERAL or PREFIXED ACL binding on a topic resource."""
    # None matches any name, principal and host (confluent-kafka's type hints say str).
    wanted = AclBindingFilter(
        ResourceType.TOPIC,
        None,  # type: ignore[arg-type]
        ResourcePatternType.ANY,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    try:
        bindings = admin.describe_acls(wanted, request_timeout=timeout).result(timeout)
    except KafkaException as exc:
        raise _fail(alias, "described", exc) from None
    out: list[TopicAcl] = []
    for b in bindings:
        pattern = b.resource_pattern_type.name
        permission = b.permission_type.name
        if pattern not in PatternType.__members__ or permission not in Permission.__members__:
            continue
        out.append(
            TopicAcl(PatternType(pattern), b.name, b.principal, b.host, b.operation.name, Permission(permission))
        )
    return out


def create_acls(admin: AdminClient, alias: str, copies: Iterable[AclCopy], timeout: float = 30.0) -> int:
    """Create the target bindings; the number created."""
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            c.target.name,
            ResourcePatternType[c.target.pattern.value],
            c.target.principal,
            c.target.host,
            AclOperation[c.target.operation],
            AclPermissionType[c.target.permission.value],
        )
        for c in copies
    ]
    if not bindings:
        return 0
    try:
        futures = admin.create_acls(bindings, request_timeout=timeout)
        for future in futures.values():
            future.result(timeout)
    except KafkaException as exc:
        raise _fail(alias, "created", exc) from None
    return len(bindings)
