"""docs/security.md's ACL tables as rows, and a row as the ACL to grant for one flow.

Two tables, each after an HTML comment that marks it: ``acl-table`` (what every flow's jobs need) and
``acl-features`` (what a feature adds when it is turned on; its first column names the feature, its first
word the key). The secure integration tests grant exactly what these rows say, so a row the jobs need and
the doc does not list fails there, and tests/unit/test_security_acl_table.py keeps the tables parseable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from drkit.core.heartbeat import HEARTBEAT_TOPIC

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
BASE, FEATURES = "acl-table", "acl-features"
HEADERS = {
    BASE: ["Principal", "Cluster", "Resource", "Name", "Pattern", "Operation", "Needed by", "Why"],
    FEATURES: ["Feature", "Principal", "Cluster", "Resource", "Name", "Pattern", "Operation", "Why"],
}


@dataclass(frozen=True)
class AclRow:
    """One operation of one row of a table (a row naming several operations is several of these)."""

    feature: str  # "" in the base table; else the first word of the Feature column
    role: str  # mirror, translator, operator
    side: str  # source, target
    resource: ResourceType
    name: str  # as written: a placeholder such as <copy prefix>, or a literal name
    pattern: ResourcePatternType
    operation: AclOperation


@dataclass(frozen=True)
class Names:
    """What a table's placeholders stand for in one flow."""

    source: str
    target: str
    topic: str
    group: str
    identity: bool = False  # replication_policy = "identity": a copy keeps its topic's name

    def copy(self, topic: str) -> str:
        return topic if self.identity else f"{self.source}.{topic}"

    def resolve(self, name: str) -> str:
        names = {
            "<topic>": self.topic,
            "<copy>": self.copy(self.topic),
            "<copy prefix>": f"{self.source}.",
            "<group>": self.group,
            f"<copy of {HEARTBEAT_TOPIC}>": self.copy(HEARTBEAT_TOPIC),
        }
        out = names.get(name, name)
        return out.replace("<source>", self.source).replace("<target>", self.target)


@dataclass(frozen=True)
class Acl:
    """One ACL to grant: ``principal`` may do ``operation`` on a resource of cluster ``cluster``."""

    cluster: str
    principal: str
    resource: ResourceType
    name: str
    operation: AclOperation
    pattern: ResourcePatternType = ResourcePatternType.LITERAL

    def binding(self) -> AclBinding:
        return AclBinding(
            self.resource,
            self.name,
            self.pattern,
            f"User:{self.principal}",
            "*",
            self.operation,
            AclPermissionType.ALLOW,
        )

    def __str__(self) -> str:
        return (
            f"{self.principal} {self.operation.name} on {self.cluster} "
            f"{self.resource.name} {self.name} ({self.pattern.name})"
        )


def table_rows(text: str, marker: str) -> list[AclRow]:
    """The rows of the table after ``<!-- marker`` in ``text`` (AssertionError when it is not as expected)."""
    parts = text.split(f"<!-- {marker}:", 1)
    assert len(parts) == 2, f"docs/security.md has no <!-- {marker}: ... --> table"
    lines = parts[1].splitlines()[1:]
    while lines and not lines[0].startswith("|"):
        lines.pop(0)
    table = []
    for line in lines:
        if not line.startswith("|"):
            break
        table.append([c.strip() for c in line.strip().strip("|").split("|")])
    assert table and table[0] == HEADERS[marker], f"{marker}: the header is {table[:1]}, not {HEADERS[marker]}"
    rows = []
    for cells in table[2:]:
        assert len(cells) == len(HEADERS[marker]), f"{marker}: a row has {len(cells)} cells: {cells}"
        feature = cells.pop(0).split()[0].strip(",`") if marker == FEATURES else ""
        role, side, resource, name, pattern, operations = cells[:6]
        assert side in ("source", "target"), f"{marker}: cluster {side!r} is neither source nor target"
        for operation in operations.split(","):
            rows.append(
                AclRow(
                    feature,
                    role,
                    side,
                    ResourceType["BROKER" if resource == "CLUSTER" else resource],  # Kafka's CLUSTER
                    name.strip("`"),
                    ResourcePatternType[pattern],
                    AclOperation[operation.strip()],
                )
            )
    return rows


def documented_rows(text: str | None = None) -> list[AclRow]:
    """Both tables of docs/security.md (or of ``text``)."""
    text = DOC.read_text() if text is None else text
    return table_rows(text, BASE) + table_rows(text, FEATURES)


def acls(
    rows: list[AclRow], names: Names, principals: Mapping[str, str], features: frozenset[str] = frozenset()
) -> list[Acl]:
    """The ACLs ``rows`` give for one flow: the base rows and those of ``features``, each role as its
    principal. With the identity policy a ``<copy prefix>`` row (PREFIXED) is granted as the doc says: on
    each copy, LITERAL (the topic's own name, and the heartbeat topic's with heartbeats on)."""
    out: list[Acl] = []
    for row in rows:
        if row.feature and row.feature not in features:
            continue
        cluster = names.source if row.side == "source" else names.target
        grant = (cluster, principals[row.role], row.resource, row.operation)
        if names.identity and row.name == "<copy prefix>":
            copies = [names.topic] + ([HEARTBEAT_TOPIC] if "heartbeats" in features else [])
            out += [Acl(*grant[:3], c, grant[3], ResourcePatternType.LITERAL) for c in copies]
            continue
        out.append(Acl(*grant[:3], names.resolve(row.name), grant[3], row.pattern))
    return out
