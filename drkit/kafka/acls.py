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

#: What to do about a cluster without an authorizer, by the feature that needs ACLs.
SYNC_ACLS_HINT = "turn [flows.topology] sync_acls off, or enable an authorizer on it"
FENCING_HINT = "fencing needs one (authorizer.class.name); remove [flows.fencing] or enable an authorizer on it"


class NoAuthorizer(ClusterError):
    """The cluster has no authorizer: it has no ACLs to read or change."""


def _fail(alias: str, what: str, exc: KafkaException, hint: str = SYNC_ACLS_HINT) -> ClusterError:
    error = exc.args[0]
    if error.code() == KafkaError.SECURITY_DISABLED:
        return NoAuthorizer(f"cluster {alias} has no authorizer, so its ACLs cannot be {what}: {hint}")
    return ClusterError(f"cluster {alias}: ACLs cannot be {what}: {error}")


def topic_acls(admin: AdminClient, alias: str, timeout: float = 15.0, hint: str = SYNC_ACLS_HINT) -> list[TopicAcl]:
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
        raise _fail(alias, "described", exc, hint) from None
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
    return _create(admin, alias, [c.target for c in copies], timeout, SYNC_ACLS_HINT)


def _binding(acl: TopicAcl) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        acl.name,
        ResourcePatternType[acl.pattern.value],
        acl.principal,
        acl.host,
        AclOperation[acl.operation],
        AclPermissionType[acl.permission.value],
    )


def add_acls(admin: AdminClient, alias: str, acls: Iterable[TopicAcl], timeout: float = 30.0) -> None:
    """Create the bindings (fencing: drkit.core.fencing)."""
    _create(admin, alias, acls, timeout, FENCING_HINT)


def _create(admin: AdminClient, alias: str, acls: Iterable[TopicAcl], timeout: float, hint: str) -> int:
    """Create the bindings; the number created (``hint``: what to do when the cluster has no authorizer)."""
    bindings = [_binding(a) for a in acls]
    if not bindings:
        return 0
    try:
        for future in admin.create_acls(bindings, request_timeout=timeout).values():
            future.result(timeout)
    except KafkaException as exc:
        raise _fail(alias, "created", exc, hint) from None
    return len(bindings)


def delete_acls(admin: AdminClient, alias: str, acls: Iterable[TopicAcl], timeout: float = 30.0) -> None:
    """Delete exactly these bindings: each filter matches one binding and nothing else."""
    filters = [
        AclBindingFilter(
            b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type
        )
        for b in (_binding(a) for a in acls)
    ]
    if not filters:
        return
    try:
        for future in admin.delete_acls(filters, request_timeout=timeout).values():
            future.result(timeout)
    except KafkaException as exc:
        raise _fail(alias, "deleted", exc, FENCING_HINT) from None


#: A topic name no topic can have ('/' is not allowed in one): a binding filter on it matches nothing.
_NO_TOPIC = "_drkit/authorizer-probe"


def require_authorizer(admin: AdminClient, alias: str, timeout: float = 15.0, hint: str = FENCING_HINT) -> None:
    """Raise NoAuthorizer when the cluster has none. DescribeAcls cannot tell (a KRaft broker without an
    authorizer answers it with no bindings); DeleteAcls of a filter that matches nothing can: refused with
    SECURITY_DISABLED without an authorizer, an empty answer with one. Nothing is ever deleted."""
    nothing = AclBindingFilter(
        ResourceType.TOPIC,
        _NO_TOPIC,
        ResourcePatternType.LITERAL,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    try:
        for future in admin.delete_acls([nothing], request_timeout=timeout).values():
            future.result(timeout)
    except KafkaException as exc:
        raise _fail(alias, "read or changed", exc, hint) from None
