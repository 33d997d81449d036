"""docs/security.md's ACL tables parse into ACL rows (tests/support/acl_table.py): what the secure integration
tests grant is read from them, so a table that stops parsing, or a feature the tests no longer find, fails
here in milliseconds rather than as a refusal on the secure clusters."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType
from support.acl_table import BASE, DOC, FEATURES, Names, acls, documented_rows, table_rows

from drkit.core.live_checkpoints import CHECKPOINT_TOPIC
from drkit.core.probe import DRILL_GROUP_PREFIX, drill_group
from drkit.kafka.checkpoint_topic import READER_GROUP

ROLES = {"mirror": "m", "translator": "t", "operator": "o"}
NAMES = Names("A", "B", "orders", "billing")


def test_both_tables_parse_with_known_roles_sides_and_placeholders() -> None:
    rows = documented_rows()
    base, features = table_rows(DOC.read_text(), BASE), table_rows(DOC.read_text(), FEATURES)
    assert len(base) >= 20 and len(features) >= 10, (len(base), len(features))
    assert {r.role for r in rows} == set(ROLES)
    assert {r.feature for r in features} == {
        "heartbeats",
        "sync_group_offsets",
        "exactly-once",
        "sync_acls",
        "follow_commits",
        "probe",
        "fencing",
    }
    every = acls(rows, NAMES, ROLES, frozenset(r.feature for r in features))
    assert len(every) == len(rows)
    assert not [a for a in every if "<" in a.name or ">" in a.name.replace("->", "")], "a placeholder left"


def test_the_rows_the_proof_depends_on_are_listed() -> None:
    granted = set(
        acls(documented_rows(), NAMES, ROLES, frozenset({"heartbeats", "sync_group_offsets", "exactly-once"}))
    )
    kinds = {(a.principal, a.cluster, a.resource, a.name, a.pattern, a.operation) for a in granted}
    lit, pre = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    for expected in [
        ("o", "B", ResourceType.GROUP, "_drkit-tail", lit, AclOperation.DESCRIBE),
        ("m", "A", ResourceType.TOPIC, "drkit-heartbeats", lit, AclOperation.WRITE),
        ("o", "B", ResourceType.TOPIC, "A.drkit-heartbeats", lit, AclOperation.READ),
        ("t", "B", ResourceType.GROUP, "billing", lit, AclOperation.READ),
        ("t", "B", ResourceType.TOPIC, "A.orders", lit, AclOperation.READ),
        ("m", "B", ResourceType.TRANSACTIONAL_ID, "drkit-mirror.A->B.", pre, AclOperation.WRITE),
        ("o", "B", ResourceType.TRANSACTIONAL_ID, "drkit-mirror.A->B.", pre, AclOperation.WRITE),
    ]:
        assert expected in kinds, expected


def test_the_follower_rows_name_the_checkpoint_topic() -> None:
    granted = set(acls(documented_rows(), NAMES, ROLES, frozenset({"follow_commits"})))
    kinds = {(a.principal, a.cluster, a.resource, a.name, a.pattern, a.operation) for a in granted}
    lit = ResourcePatternType.LITERAL
    for expected in [
        ("t", "A", ResourceType.TOPIC, "__consumer_offsets", lit, AclOperation.READ),
        ("t", "B", ResourceType.TOPIC, CHECKPOINT_TOPIC, lit, AclOperation.CREATE),
        ("t", "B", ResourceType.TOPIC, CHECKPOINT_TOPIC, lit, AclOperation.WRITE),
        ("t", "B", ResourceType.TOPIC, CHECKPOINT_TOPIC, lit, AclOperation.DESCRIBE),
        ("o", "B", ResourceType.TOPIC, CHECKPOINT_TOPIC, lit, AclOperation.READ),
        ("o", "B", ResourceType.GROUP, READER_GROUP, lit, AclOperation.DESCRIBE),
    ]:
        assert expected in kinds, expected


def test_identity_grants_each_copy_literally() -> None:
    identity = Names("A", "B", "orders", "billing", identity=True)
    granted = acls(documented_rows(), identity, ROLES, frozenset({"heartbeats"}))
    on_b = {(a.name, a.pattern) for a in granted if a.principal == "m" and a.cluster == "B"}
    assert on_b == {
        ("orders", ResourcePatternType.LITERAL),
        ("drkit-heartbeats", ResourcePatternType.LITERAL),
        ("_drkit.mirror-lease", ResourcePatternType.LITERAL),  # the flow's lease (drkit.core.mirror_lease)
        ("_drkit-mirror-lease", ResourcePatternType.LITERAL),
    }


def test_sync_acls_is_said_to_make_an_acl_administrator() -> None:
    text = " ".join(DOC.read_text().split())
    assert "`sync_acls` makes the mirror's principal an ACL administrator of the target" in text


@pytest.mark.parametrize(
    "broken",
    [
        "| mirror | source | TOPIC | `<topic>` | LITERAL | RAED | mirror | typo |",  # no such operation
        "| mirror | elsewhere | TOPIC | `<topic>` | LITERAL | READ | mirror | side |",  # neither side
        "| mirror | source | TOPIC | `<topic>` | LITERAL | READ |",  # a cell short
    ],
)
def test_a_broken_row_fails_to_parse(broken: str) -> None:
    text = DOC.read_text()
    row = "| mirror | source | TOPIC | `<topic>` | LITERAL | READ | mirror |"
    assert row in text
    start = text.index(row)
    end = text.index("\n", start)
    with pytest.raises((AssertionError, KeyError)):
        table_rows(text[:start] + broken + text[end:], BASE)


def test_the_probe_rows_cover_its_drill_groups() -> None:
    granted = set(acls(documented_rows(), NAMES, ROLES, frozenset({"probe"})))
    kinds = {(a.principal, a.cluster, a.resource, a.name, a.pattern, a.operation) for a in granted}
    [prefix] = {a.name for a in granted if a.resource == ResourceType.GROUP and a.name.startswith(DRILL_GROUP_PREFIX)}
    assert drill_group("A->B", "billing", "x").startswith(prefix)
    for operation in (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE):
        assert ("o", "B", ResourceType.GROUP, prefix, ResourcePatternType.PREFIXED, operation) in kinds
