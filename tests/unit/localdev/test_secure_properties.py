"""A secure local cluster's files, without a JVM: no unauthenticated listener, deny by default, the
admin and the broker as the only super users, and certificates a client can use."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from drkit.localdev.clusters import LocalKafka
from drkit.localdev.security import Protocol, Security


def _properties(home: Path) -> dict[str, str]:
    lines = (home / "server.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_secure_clusters_have_no_plaintext_door(tmp_path: Path) -> None:
    kafka = LocalKafka(
        tmp_path,
        39092,
        security={"A": Security(Protocol.SASL_SSL, {"mirror": "pw-mirror"}), "B": Security(Protocol.MTLS)},
    )
    kafka._prepare("A", 0)
    kafka._prepare("B", 1)
    a, b = _properties(tmp_path / "A"), _properties(tmp_path / "B")
    assert a["listeners"] == "SASL_SSL://127.0.0.1:39092,CONTROLLER://127.0.0.1:39093"
    assert b["listeners"] == "SSL://127.0.0.1:39102,CONTROLLER://127.0.0.1:39103"
    for props in (a, b):
        assert "PLAINTEXT" not in props["listener.security.protocol.map"]
        assert props["allow.everyone.if.no.acl.found"] == "false"
        assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert b["ssl.client.auth"] == "required" and "ssl.client.auth" not in a
    assert a["super.users"] == "User:broker-A;User:admin" and b["super.users"] == "User:broker-B;User:admin"
    assert a["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,PLAIN"
    # Ports are read back from the secure listeners too (status, down and start need no --base-port).
    assert (kafka.describe("A").port, kafka.describe("B").controller_port) == (39092, 39103)
    assert kafka._scram_arguments("A")[1] == "--add-scram=SCRAM-SHA-512=[name=mirror,password=pw-mirror]"
    assert kafka._scram_arguments("B") == []


def test_client_properties_name_the_principal_and_its_certificate_verifies(tmp_path: Path) -> None:
    kafka = LocalKafka(
        tmp_path, 39092, security={"A": Security(Protocol.SASL_SSL, {"m": "pw"}), "B": Security(Protocol.MTLS)}
    )
    sasl = kafka.client_properties("A", "m")
    assert (sasl["security.protocol"], sasl["sasl.mechanism"], sasl["sasl.username"]) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "m",
    )
    assert kafka.client_properties("A")["sasl.password"] == kafka.admin_password("A") != "pw"
    tls = kafka.client_properties("B", "mirror")
    subject = subprocess.run(
        ["openssl", "x509", "-in", tls["ssl.certificate.location"], "-noout", "-subject"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "CN = mirror" in subject
    verify = subprocess.run(
        ["openssl", "verify", "-CAfile", tls["ssl.ca.location"], tls["ssl.certificate.location"]],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    assert kafka.client_properties("C") == {}  # a PLAINTEXT cluster


def test_passwords_stay_in_owner_only_files_and_off_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JAAS configs in server.properties and the SCRAM credentials at format time hold passwords: files
    are 0600 from their first byte, and the format command names an @argfile (removed after), not them."""
    kafka = LocalKafka(tmp_path, 39092, security={"A": Security(Protocol.SASL_SSL, {"mirror": "pw-mirror"})})
    kafka._prepare("A", 0)
    for name in ("server.properties", "admin.password", "security.json"):
        assert stat.S_IMODE((tmp_path / "A" / name).stat().st_mode) == 0o600, name
    seen: list[tuple[list[str], str, int]] = []

    def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        argfile = Path(cmd[-1].removeprefix("@"))
        seen.append((cmd, argfile.read_text(), stat.S_IMODE(argfile.stat().st_mode)))
        raise RuntimeError("stop before the broker starts")

    monkeypatch.setattr(subprocess, "run", run)
    # Whether the ports are free is not this test's question: 39092 lies in the ephemeral range, where any
    # client connection of the machine (a CI run's hundreds) may hold it and the start would refuse first.
    monkeypatch.setattr("drkit.localdev.clusters._ensure_free", lambda alias, port: None)
    with pytest.raises(RuntimeError, match="stop before"):
        kafka._start("A", tmp_path / "libs")
    [(cmd, argfile_text, mode)] = seen
    password = kafka.admin_password("A")
    assert not any(password in a or "pw-mirror" in a for a in cmd), cmd
    assert cmd[-1].startswith("@") and mode == 0o600
    assert '"--add-scram=SCRAM-SHA-512=[name=mirror,password=pw-mirror]"' in argfile_text.splitlines()
    assert argfile_text.splitlines()[0] == '"kafka.tools.StorageTool"'
    assert not (tmp_path / "A" / "format.args").exists()


@pytest.mark.parametrize("name", ["x/CN=evil", 'a"b', "a,b", "a b", "../up", "", "-x", "admin", "x" * 65])
def test_a_principal_name_that_would_break_a_jaas_config_or_a_subject_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from drkit.localdev.__main__ import main

    with pytest.raises(SystemExit) as info:
        main(["up", "A", "--mtls", "A", f"--principal={name}", "--state-dir", str(tmp_path / "state")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "argument --principal: principal" in err.splitlines()[-1]
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("name", ["drkit", "mirror-1", "svc.orders_app", "A" * 64])
def test_ordinary_principal_names_are_accepted(name: str) -> None:
    from drkit.localdev.security import principal_name

    assert principal_name(name) == name
