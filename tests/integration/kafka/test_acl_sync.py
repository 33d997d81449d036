"""ACL sync against real brokers with an authorizer (StandardAuthorizer; the PLAINTEXT clients are ANONYMOUS,
made a super user so that nothing is denied while ACLs are created and described)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from support.kafka_io import create_topic, unique
from support.ports import ACL_SYNC

from drkit.config import parse_config
from drkit.localdev.clusters import LocalKafka
from drkit.service import Drkit

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "true",
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    kafka = LocalKafka(
        tmp_path_factory.mktemp("acl-kafka"),
        base_port=ACL_SYNC.base,
        heap="384m",
        extra_properties=AUTHORIZER,
    )
    try:
        kafka.up(["A", "B"])
        yield {c.alias: c.bootstrap_servers for c in kafka.status()}
    finally:
        kafka.down()


def binding(name: str, pattern: ResourcePatternType, who: str, op: AclOperation, perm: AclPermissionType) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, who, "*", op, perm)


def topic_acls(bootstrap: str) -> set[tuple[str, str, str, str, str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = AclBindingFilter(
        ResourceType.TOPIC,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,  # type: ignore[arg-type]
    )
    return {
        (b.name, b.resource_pattern_type.name, b.principal, b.operation.name, b.permission_type.name)
        for b in admin.describe_acls(wanted).result(30)
    }


def test_topic_acls_are_copied_for_reading_only_and_a_dry_run_creates_none(
    secured: dict[str, str], tmp_path: Path
) -> None:
    tag = unique("acl")
    orders, hidden = f"{tag}.orders", f"{tag}-hidden"
    create_topic(secured["A"], orders, 1)
    create_topic(secured["A"], hidden, 1)
    admin = AdminClient({"bootstrap.servers": secured["A"]})
    L, P = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    futures = admin.create_acls(
        [
            binding(orders, L, "User:reader", AclOperation.READ, allow),
            binding(orders, L, "User:writer", AclOperation.WRITE, allow),
            binding(orders, L, "User:admin", AclOperation.ALL, allow),
            binding(orders, L, "User:intruder", AclOperation.READ, deny),
            binding(f"{tag}.", P, "User:team", AclOperation.DESCRIBE, allow),
            binding(hidden, L, "User:reader", AclOperation.READ, allow),  # not selected by the flow
        ]
    )
    for f in futures.values():
        f.result(30)
    config = parse_config(
        {
            "clusters": {a: {"bootstrap_servers": bs} for a, bs in secured.items()},
            "flows": [
                {
                    "source": "A",
                    "target": "B",
                    "topics": {"include": [f"{tag}\\..*"]},
                    "topology": {"sync_acls": True},
                    "heartbeats": {"interval_seconds": 0},
                }
            ],
            "state": {"root": str(tmp_path / "state")},
        }
    )
    service = Drkit(config)
    before = topic_acls(secured["B"])
    [dry] = service.topics_sync("A->B", dry_run=True).flows
    assert len(dry.plan.acls) == 4 and topic_acls(secured["B"]) == before, "a dry run creates nothing"

    [done] = service.topics_sync("A->B").flows
    assert done.acls_created == 4
    copied = topic_acls(secured["B"]) - before
    assert copied == {
        (f"A.{orders}", "LITERAL", "User:reader", "READ", "ALLOW"),
        (f"A.{orders}", "LITERAL", "User:admin", "READ", "ALLOW"),
        (f"A.{orders}", "LITERAL", "User:intruder", "READ", "DENY"),
        (f"A.{tag}.", "PREFIXED", "User:team", "DESCRIBE", "ALLOW"),
    }
    assert not any(op == "WRITE" for _, _, _, op, _ in copied)
    [again] = service.topics_sync("A->B").flows
    assert again.plan.acls == () and again.acls_created == 0, "nothing twice"
