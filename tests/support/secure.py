"""Secure test clusters' principals, ACLs and per-principal drkit configs (tests/integration/secure)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from drkit.localdev.clusters import LocalKafka
from support.acl_table import Acl

#: The jobs' principals, the same names on both clusters (different credentials: a password on A, a
#: certificate on B). ``intruder`` has no ACL anywhere. The ``lp-`` ones are test_least_privilege's alone:
#: the ACLs it grants and revokes are never another test's; ``app-producer`` and ``other-app`` are
#: test_fencing_acls's (an application fenced at failover, and one that is not); ``probe-operator`` is
#: test_probe_secure's (the operator's rows and the probe's, nothing more); ``fence-operator``, test_fencing_acls's
#: (the operator's rows and fencing's).
PRINCIPALS = (
    "mirror",
    "translator",
    "operator",
    "intruder",
    "lp-mirror",
    "lp-translator",
    "lp-operator",
    "app-producer",
    "other-app",
    "probe-operator",
    "fence-operator",
)


#: A filter matching every ACL.
_ANY = (
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def _fields(binding: AclBinding) -> tuple[object, ...]:
    return (
        binding.restype,
        binding.name,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )


@dataclass(frozen=True)
class SecureClusters:
    kafka: LocalKafka
    bootstrap: dict[str, str]
    #: The SCRAM passwords on A, by principal: every secret the tests grep for.
    passwords: dict[str, str] = field(repr=False)  # never in a failed test's report

    def client(self, alias: str, principal: str = "admin") -> dict[str, str]:
        return self.kafka.client_properties(alias, principal)

    def grant(self, acls: list[Acl]) -> None:
        for alias in sorted({a.cluster for a in acls}):
            admin = AdminClient({"bootstrap.servers": self.bootstrap[alias], **self.client(alias)})
            futures = admin.create_acls([a.binding() for a in acls if a.cluster == alias], request_timeout=30)
            for future in futures.values():
                future.result()
        self._await(acls, present=True)

    def revoke(self, acls: list[Acl]) -> None:
        """Delete exactly ``acls`` (each one binding, nothing that merely matches more)."""
        for alias in sorted({a.cluster for a in acls}):
            admin = AdminClient({"bootstrap.servers": self.bootstrap[alias], **self.client(alias)})
            filters = [AclBindingFilter(*_fields(a.binding())) for a in acls if a.cluster == alias]
            futures = admin.delete_acls(filters, request_timeout=30)
            for future in futures.values():
                future.result()
        self._await(acls, present=False)

    def _await(self, acls: list[Acl], present: bool, timeout: float = 30.0) -> None:
        """Until the brokers' authorizers answer with ``acls`` (or without them): a change is committed by the
        controller before the broker applies it, and a job started in between would see the old ACLs."""
        deadline = time.monotonic() + timeout
        for alias in sorted({a.cluster for a in acls}):
            admin = AdminClient({"bootstrap.servers": self.bootstrap[alias], **self.client(alias)})
            wanted = {a.binding() for a in acls if a.cluster == alias}
            while True:
                held = set(admin.describe_acls(AclBindingFilter(*_ANY), request_timeout=30).result())
                if (wanted <= held) if present else not (wanted & held):
                    break
                assert time.monotonic() < deadline, f"cluster {alias}: ACLs not {'granted' if present else 'revoked'}"
                time.sleep(0.1)

    def bindings(self, alias: str) -> set[tuple[object, ...]]:
        """Every ACL binding on cluster ``alias``, as comparable tuples (listed before and after a change)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap[alias], **self.client(alias)})
        return {_fields(b) for b in admin.describe_acls(AclBindingFilter(*_ANY), request_timeout=30).result()}

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
