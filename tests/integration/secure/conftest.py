"""Two secure clusters for the whole session: A speaks SASL_SSL (SCRAM-SHA-512), B mutual TLS.

Each job has its own principal on each cluster (a SCRAM user on A, a certificate CN on B) with no
ACL at all until a test grants it one; the admin principal (a super user) is the tests' own actor.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from support.ports import SECURE
from support.secure import PRINCIPALS, SecureClusters

from drkit.localdev.clusters import LocalKafka
from drkit.localdev.security import Protocol, Security


@pytest.fixture(scope="session")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureClusters]:
    passwords = {p: f"pw-{p}-{secrets.token_hex(8)}" for p in PRINCIPALS}
    kafka = LocalKafka(
        tmp_path_factory.mktemp("secure-kafka"),
        base_port=SECURE.base,
        heap="384m",
        security={"A": Security(Protocol.SASL_SSL, passwords), "B": Security(Protocol.MTLS, certificates=PRINCIPALS)},
    )
    try:
        kafka.up(["A", "B"])
        yield SecureClusters(
            kafka,
            {c.alias: c.bootstrap_servers for c in kafka.status()},
            {**passwords, "admin": kafka.admin_password("A")},
        )
    finally:
        kafka.down()
