"""Mirror, checkpoint translation, failover and failback over SASL_SSL (A) and mutual TLS (B), each job
as its own principal holding exactly the ACLs docs/security.md lists, counted record by record.

The ACLs below are the table of docs/security.md (flow A->B, topic ``orders``, group ``billing``): the
test grants these and nothing more, so a job that needs one more fails here.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AclOperation as Op
from confluent_kafka.admin import ResourcePatternType as Pattern
from confluent_kafka.admin import ResourceType as Res
from support.kafka_io import Rec, commit, committed_on, consume_as_group, create_topic, produce, read_all
from support.secure import Acl, SecureClusters

from drkit.config import load_config
from drkit.service import Drkit

TOPIC, GROUP, PARTITIONS, PER_PARTITION = "orders", "billing", 3, 200
COPY = f"A.{TOPIC}"
FLOW = (
    '[[flows]]\nsource = "A"\ntarget = "B"\ntopics = { include = ["orders"] }\n'
    "[flows.heartbeats]\ninterval_seconds = 0\n"
)

#: docs/security.md, "ACLs per job", for flow A->B (source A, target B), topic orders, group billing.
ACLS = [
    # mirror, on the source: read the selected topics and their configs (topology following).
    Acl("A", "mirror", Res.TOPIC, TOPIC, Op.READ),
    Acl("A", "mirror", Res.TOPIC, TOPIC, Op.DESCRIBE),
    Acl("A", "mirror", Res.TOPIC, TOPIC, Op.DESCRIBE_CONFIGS),
    # its driver's reader: a consumer that never joins, but librdkafka looks its group's coordinator up.
    Acl("A", "mirror", Res.GROUP, "drkit-mirror-reader-", Op.DESCRIBE, Pattern.PREFIXED),
    # mirror, on the target: create, grow, configure and write the copies (idempotent: WRITE suffices).
    Acl("B", "mirror", Res.TOPIC, "A.", Op.CREATE, Pattern.PREFIXED),
    Acl("B", "mirror", Res.TOPIC, "A.", Op.WRITE, Pattern.PREFIXED),
    Acl("B", "mirror", Res.TOPIC, "A.", Op.READ, Pattern.PREFIXED),
    Acl("B", "mirror", Res.TOPIC, "A.", Op.DESCRIBE, Pattern.PREFIXED),
    Acl("B", "mirror", Res.TOPIC, "A.", Op.ALTER, Pattern.PREFIXED),
    Acl("B", "mirror", Res.TOPIC, "A.", Op.DESCRIBE_CONFIGS, Pattern.PREFIXED),
    Acl("B", "mirror", Res.TOPIC, "A.", Op.ALTER_CONFIGS, Pattern.PREFIXED),
    # translator, on the source: the groups' committed offsets.
    Acl("A", "translator", Res.GROUP, GROUP, Op.DESCRIBE),
    Acl("A", "translator", Res.TOPIC, TOPIC, Op.DESCRIBE),
    # operator (failover, failback, status), both sides: read and commit the group's offsets.
    Acl("A", "operator", Res.GROUP, GROUP, Op.READ),
    Acl("A", "operator", Res.GROUP, GROUP, Op.DESCRIBE),
    Acl("A", "operator", Res.TOPIC, TOPIC, Op.READ),
    Acl("A", "operator", Res.TOPIC, TOPIC, Op.DESCRIBE),
    Acl("B", "operator", Res.GROUP, GROUP, Op.READ),
    Acl("B", "operator", Res.GROUP, GROUP, Op.DESCRIBE),
    Acl("B", "operator", Res.TOPIC, COPY, Op.READ),
    Acl("B", "operator", Res.TOPIC, COPY, Op.DESCRIBE),
]


def key(r: Rec) -> tuple[object, ...]:
    return (r.partition, r.key, r.value, r.timestamp)


def job(secure: SecureClusters, spark: Any, tmp_path: Path, principal: str) -> Drkit:
    path = secure.write_config(tmp_path / f"{principal}.toml", principal, tmp_path / "state", FLOW)
    return Drkit(load_config(path), spark)


def test_mirror_translate_failover_failback_as_least_privilege_principals(
    secure: SecureClusters, spark: Any, tmp_path: Path
) -> None:
    a, b = secure.bootstrap["A"], secure.bootstrap["B"]
    admin_a, admin_b = secure.client("A"), secure.client("B")
    secure.grant(ACLS)
    create_topic(a, TOPIC, PARTITIONS, client=admin_a)
    now = int(time.time() * 1000)
    produce(
        a,
        TOPIC,
        [
            {"partition": i % PARTITIONS, "key": f"k{i}".encode(), "value": f"v{i}".encode(), "timestamp": now + i}
            for i in range(PER_PARTITION * PARTITIONS)
        ],
        **admin_a,
    )

    # -- mirror as `mirror`: every record copied, once ------------------------------------------------
    copied = job(secure, spark, tmp_path, "mirror").mirror("A->B", once=True)
    assert copied[0].records == PER_PARTITION * PARTITIONS
    on_a = read_all(a, TOPIC, client=admin_a)
    on_b = read_all(b, COPY, client=admin_b)
    assert sorted(map(key, on_b)) == sorted(map(key, on_a)), "the copy differs from the source"
    assert len(on_b) == len(set(map(key, on_b))) == PER_PARTITION * PARTITIONS

    # -- the group processed some on A; `translator` checkpoints it ----------------------------------
    processed_on_a = {0: 150, 1: 60, 2: 0}
    commit(a, GROUP, {(TOPIC, p): o for p, o in processed_on_a.items() if o}, client=admin_a)
    job(secure, spark, tmp_path, "translator").translate("A->B", once=True)

    # -- `operator` fails the group over to B; it reads the rest there --------------------------------
    operator = job(secure, spark, tmp_path, "operator")
    over = operator.failover("A->B", [GROUP], apply=True)
    assert over.status == "applied", over.plan.as_dict()
    assert committed_on(b, GROUP, COPY, client=admin_b) == {0: 150, 1: 60}  # none on A: none on B
    read_on_b = consume_as_group(b, GROUP, COPY, 10**6, idle_polls=5, client=admin_b)
    assert Counter(r.partition for r in read_on_b) == {0: 50, 1: 140, 2: 200}

    # -- and back to A, where it has nothing left to read ----------------------------------------------
    back = operator.failback("A->B", [GROUP], apply=True)
    assert back.status == "applied", back.plan.as_dict()
    assert committed_on(a, GROUP, TOPIC, client=admin_a) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    status = operator.status("A->B")
    assert status is not None

    # Every record of A processed exactly once: on A before, as its copy on B, none again on A after.
    produce(
        a, TOPIC, [{"partition": p, "key": b"after", "value": b"after", "timestamp": now} for p in range(3)], **admin_a
    )
    read_back = consume_as_group(a, GROUP, TOPIC, 10**6, idle_polls=5, client=admin_a)
    assert sorted((r.partition, r.value) for r in read_back) == [(p, b"after") for p in range(PARTITIONS)]
    processed = Counter(key(r) for r in on_a if r.offset < processed_on_a[r.partition])
    processed.update(key(r) for r in read_on_b)
    assert all(processed[key(r)] == 1 for r in on_a), "a record of A was missed or processed twice"
    assert sum(processed.values()) == len(on_a)
