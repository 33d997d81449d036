"""Secure local clusters: a local CA, certificates, SASL users, the broker's listener settings.

Invariant: a secure cluster has no unauthenticated door. Its client listener is SASL_SSL (SCRAM-SHA-512
and PLAIN) or SSL with ``ssl.client.auth=required`` (mutual TLS, the principal is the certificate's CN);
its controller listener is mutual TLS too; the StandardAuthorizer denies what no ACL allows, and only
the broker's own principal and the cluster's admin principal are super users. Every other principal
gets exactly the ACLs a test or an operator grants it.

Keys and certificates are made with ``openssl`` (PEM, which both librdkafka and the broker read:
``ssl.keystore.type=PEM``); one CA per state folder signs every cluster's broker and client
certificates, with ``subjectAltName`` 127.0.0.1 and localhost so hostname verification stays on.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from drkit.errors import ClusterError

#: The principal every secure local cluster makes a super user, besides its broker.
ADMIN = "admin"

#: A principal's name as local clusters accept it. Why so narrow: the name is written into JAAS configs
#: (quoted), SCRAM credentials (``[name=...,password=...]``), a certificate subject (``/CN=...``) and a file
#: name, where a quote, comma, slash or space would break or rewrite what surrounds it.
PRINCIPAL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def principal_name(name: str) -> str:
    """``name`` if local clusters can use it as a SASL user and certificate CN, else a ValueError."""
    if not PRINCIPAL_NAME.fullmatch(name) or name == ADMIN:
        reason = f"{ADMIN!r} is the clusters' own admin" if name == ADMIN else "use letters, digits, '.', '_', '-'"
        raise ValueError(
            f"principal {name!r} cannot be used ({reason}; at most 64 characters, first a letter or digit)"
        )
    return name


AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
#: The certificate's CN is the principal (``CN=mirror`` -> ``User:mirror``).
_PRINCIPAL_RULES = "RULE:^CN=([^,]+)$/$1/,DEFAULT"


class Protocol(StrEnum):
    """How a secure local cluster's clients authenticate."""

    SASL_SSL = "sasl_ssl"  # TLS, then SCRAM-SHA-512 or PLAIN with a user name and password
    MTLS = "mtls"  # TLS with a client certificate (ssl.client.auth=required)


@dataclass(frozen=True)
class Security:
    """A secure cluster's protocol and its principals besides the admin: SASL users (name -> password)
    for SASL_SSL, certificate names for mutual TLS."""

    protocol: Protocol
    users: Mapping[str, str] = field(default_factory=dict)
    certificates: tuple[str, ...] = ()


def dump(security: Security) -> str:
    """``security`` as JSON (with the SASL passwords: the file it goes to is the owner's only)."""
    return json.dumps(
        {
            "protocol": security.protocol.value,
            "users": dict(security.users),
            "certificates": list(security.certificates),
        }
    )


def load(text: str) -> Security:
    data = json.loads(text)
    return Security(Protocol(data["protocol"]), dict(data["users"]), tuple(data["certificates"]))


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ClusterError(f"openssl {args[0]} failed: {done.stderr.strip()[-300:]}")


class LocalCA:
    """A CA under ``folder`` (made once, then reused) that signs certificates for 127.0.0.1."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cert = folder / "ca.pem"
        self._key = folder / "ca.key"

    def ensure(self) -> LocalCA:
        if self.cert.exists() and self._key.exists():
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=drkit-local-ca",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", str(self._key), "-out", str(self.cert),
        )  # fmt: skip
        self._key.chmod(0o600)
        return self

    def issue(self, folder: Path, name: str) -> tuple[Path, Path]:
        """(certificate, key) PEM files for ``CN=name`` (made once); the key is unencrypted PKCS#8."""
        cert, key = folder / f"{name}.pem", folder / f"{name}.key"
        if cert.exists() and key.exists():
            return cert, key
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            csr, ext = Path(tmp) / "req.csr", Path(tmp) / "ext.cnf"
            ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
            _openssl(
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr)
            )
            _openssl(
                "x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self._key),
                "-set_serial", str(secrets.randbits(63)), "-days", "3650", "-extfile", str(ext), "-out", str(cert),
            )  # fmt: skip
        key.chmod(0o600)
        return cert, key


def broker_keystore(ca: LocalCA, folder: Path, broker: str) -> Path:
    """A PEM keystore (key, then certificate) for the broker's principal ``broker``."""
    keystore = folder / f"{broker}.keystore.pem"
    if not keystore.exists():
        cert, key = ca.issue(folder, broker)
        keystore.write_text(key.read_text() + cert.read_text())
        keystore.chmod(0o600)
    return keystore


def listener_properties(
    security: Security, port: int, cport: int, ca: Path, keystore: Path, broker: str, admin_password: str
) -> str:
    """The listener, TLS, SASL and authorizer part of a secure broker's server.properties."""
    listener = "SASL_SSL" if security.protocol is Protocol.SASL_SSL else "SSL"
    lines = [
        f"listeners={listener}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        f"advertised.listeners={listener}://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        f"inter.broker.listener.name={listener}",
        f"listener.security.protocol.map=CONTROLLER:SSL,{listener}:{listener}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={ca}",
        "listener.name.controller.ssl.client.auth=required",
        f"ssl.principal.mapping.rules={_PRINCIPAL_RULES}",
        f"authorizer.class.name={AUTHORIZER}",
        "allow.everyone.if.no.acl.found=false",
    ]
    if security.protocol is Protocol.SASL_SSL:
        users = {ADMIN: admin_password, **security.users}
        plain_users = " ".join(f'user_{name}="{password}"' for name, password in users.items())
        lines += [
            "sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            f'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={_SCRAM} required username="{ADMIN}" '
            f'password="{admin_password}";',
            f'listener.name.sasl_ssl.plain.sasl.jaas.config={_PLAIN} required username="{ADMIN}" '
            f'password="{admin_password}" {plain_users};',
            f"super.users=User:{broker};User:{ADMIN}",
        ]
    else:
        lines += ["ssl.client.auth=required", f"super.users=User:{broker};User:{ADMIN}"]
    return "\n".join(lines) + "\n"


def scram_arguments(security: Security, admin_password: str) -> list[str]:
    """``kafka-storage format`` arguments that add the SCRAM-SHA-512 credentials (none for mutual TLS)."""
    if security.protocol is not Protocol.SASL_SSL:
        return []
    users = {ADMIN: admin_password, **security.users}
    return [f"--add-scram=SCRAM-SHA-512=[name={name},password={password}]" for name, password in users.items()]


def client_properties(
    security: Security, ca: LocalCA, folder: Path, principal: str, password: str | None = None
) -> dict[str, str]:
    """librdkafka properties for ``principal`` on a secure cluster (SCRAM-SHA-512 for SASL_SSL)."""
    if security.protocol is Protocol.SASL_SSL:
        if password is None:
            raise ClusterError(f"no password for SASL user {principal}")
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": principal,
            "sasl.password": password,
            "ssl.ca.location": str(ca.cert),
        }
    cert, key = ca.issue(folder, principal)
    return {
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.cert),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
    }
