"""Which topic ACLs of the source a flow copies to the target (``[flows.topology] sync_acls``, off by default).

What is copied, and why (MirrorMaker 2's MirrorSourceConnector is the reference; where drkit differs, it
says so):

* only ACLs on TOPIC resources, LITERAL (a selected topic: bound to its target name) and PREFIXED (a prefix
  some selected topic starts with: bound to the prefix's target name, so it covers those topics' copies;
  MirrorMaker 2 copies LITERAL ones only);
* only what reading needs: READ and DESCRIBE. ALLOW ALL becomes ALLOW READ, as in MirrorMaker 2 (Kafka's
  authorizers grant DESCRIBE with READ); ALLOW WRITE and every other operation
  are never copied (nothing but the mirror writes to a copy);
* DENY READ / DENY DESCRIBE are copied (DENY ALL as both): a principal denied a topic on the source is not
  let read its copy (MirrorMaker 2 copies DENY bindings of every operation);
* principal and host as they are; nothing on the target is ever deleted or changed, only what is missing is
  created (group ACLs, cluster ACLs and transactional-id ACLs are not copied: they name the target's own
  consumers and are for the operator to grant).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class PatternType(StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Permission(StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"


#: The operations a copy may grant or deny: what reading a topic needs.
COPIED_OPERATIONS = ("READ", "DESCRIBE")


@dataclass(frozen=True, order=True)
class TopicAcl:
    """One ACL binding on a topic resource (operation as Kafka names it: READ, WRITE, ALL, ...)."""

    pattern: PatternType
    name: str
    principal: str
    host: str
    operation: str
    permission: Permission

    def as_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern.value,
            "name": self.name,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation,
            "permission": self.permission.value,
        }


@dataclass(frozen=True)
class AclCopy:
    """A binding to create on the target, and the source binding it comes from."""

    target: TopicAcl
    source: TopicAcl

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target.as_dict(), "from": self.source.as_dict()}


def _operations(operation: str, permission: Permission) -> tuple[str, ...]:
    if operation == "ALL":
        # Kafka's authorizers grant DESCRIBE with READ: ALLOW READ is all a consumer needs. A denial must cover both.
        return ("READ",) if permission is Permission.ALLOW else COPIED_OPERATIONS
    return (operation,) if operation in COPIED_OPERATIONS else ()


def plan_acls(
    source: Iterable[TopicAcl],
    target: Iterable[TopicAcl],
    selected: Iterable[str],
    target_name: Callable[[str], str],
) -> tuple[AclCopy, ...]:
    """The bindings to create on the target (see the module docstring); none twice, none that exists."""
    topics = sorted(set(selected))
    existing = set(target)
    out: dict[TopicAcl, AclCopy] = {}
    for acl in sorted(set(source)):
        if acl.pattern is PatternType.LITERAL:
            if acl.name not in topics:
                continue
        elif not any(t.startswith(acl.name) for t in topics):
            continue
        for operation in _operations(acl.operation, acl.permission):
            copy = TopicAcl(acl.pattern, target_name(acl.name), acl.principal, acl.host, operation, acl.permission)
            if copy not in existing and copy not in out:
                out[copy] = AclCopy(copy, acl)
    return tuple(out.values())
