"""Secure test clusters' principals, ACLs and per-principal drkit configs (tests/integration/secure)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from drkit.localdev.clusters import LocalKafka

#: The jobs' principals, the same names on both clusters (different credentials: a password on A, a
#: certificate on B). ``intruder`` has no ACL anywhere.
PRINCIPALS = ("mirror", "translator", "operator", "intruder")


@dataclass(frozen=True)
class Acl:
    """One ACL: ``principal`` may do ``operation`` on a resource of cluster ``cluster``."""

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


@dataclass(frozen=True)
class SecureClusters:
    kafka: LocalKafka
    bootstrap: dict[str, str]
    #: The SCRAM passwords on A, by principal: every secret the tests grep for.
    passwords: dict[str, str]

    def client(self, alias: str, principal: str = "admin") -> dict[str, str]:
        return self.kafka.client_properties(alias, principal)

    def grant(self, acls: list[Acl]) -> None:
        for alias in sorted({a.cluster for a in acls}):
            admin = AdminClient({"bootstrap.servers": self.bootstrap[alias], **self.client(alias)})
            futures = admin.create_acls([a.binding() for a in acls if a.cluster == alias], request_timeout=30)
            for future in futures.values():
                future.result()

    def cluster_properties(self, principal: str) -> dict[str, dict[str, object]]:
        """drkit's ``[clusters]`` table for a job that runs as ``principal`` on both clusters."""
        return {
            alias: {"bootstrap_servers": self.bootstrap[alias], "properties": self.client(alias, principal)}
            for alias in ("A", "B")
        }

    def write_config(self, path: Path, principal: str, state: Path, flow: str) -> Path:
        """A TOML config for ``principal`` (what an operator hands each job)."""
        lines = [f'[state]\nroot = {json.dumps(str(state))}\n\n[spark]\nmaster = "local[2]"\n']
        for alias, cluster in self.cluster_properties(principal).items():
            lines.append(f"[clusters.{alias}]\nbootstrap_servers = {json.dumps(cluster['bootstrap_servers'])}")
            lines.append(f"[clusters.{alias}.properties]")
            lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in dict(cluster["properties"]).items()]  # type: ignore[call-overload]
            lines.append("")
        lines.append(flow)
        path.write_text("\n".join(lines) + "\n")
        return path


def key_material(kafka: LocalKafka, alias: str, principals: tuple[str, ...]) -> set[str]:
    """Lines of the private keys of ``principals``' certificates on ``alias`` (secrets as much as passwords:
    Spark's Java client gets a key's content as a value)."""
    out: set[str] = set()
    for principal in principals:
        key = Path(kafka.client_properties(alias, principal)["ssl.key.location"]).read_text()
        out.update(line for line in key.splitlines() if len(line) >= 40 and "-----" not in line)
    return out


def secret_hits(secrets: set[str], texts: dict[str, str], roots: list[Path]) -> list[str]:
    """Where any of ``secrets`` appears: in the captured ``texts`` (name -> text) or in any file (bytes)
    under ``roots`` (Delta tables, Spark checkpoints, run files, logs)."""
    hits = [f"{name}: {s[:6]}..." for name, text in texts.items() for s in secrets if s in text]
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                hits += [f"{path}: {s[:6]}..." for s in secrets if s.encode() in data]
    return hits
