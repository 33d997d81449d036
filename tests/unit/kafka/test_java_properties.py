"""Spark's Java Kafka client gets its settings from librdkafka's names: JAAS from user name and password,
PEM trust and key stores from file locations; explicit Java settings win and nothing secret is printed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from drkit.config import ClusterConfig, is_secret_key, mask_text, secret_values
from drkit.kafka.clients import client_config, java_client_options, java_properties

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.mark.parametrize(
    ("mechanism", "module"),
    [
        ("SCRAM-SHA-512", SCRAM),
        ("SCRAM-SHA-256", SCRAM),
        ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
    ],
)
def test_jaas_config_is_derived_from_mechanism_user_and_password(mechanism: str, module: str) -> None:
    props = java_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": "mirror",
            "sasl.password": 'p"w\\x',
        }
    )
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{module} required username="mirror" password="p\\"w\\\\x";',
    }


def test_an_explicit_jaas_config_or_an_unknown_mechanism_is_left_alone() -> None:
    explicit = {"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p", "sasl.jaas.config": "X;"}
    assert java_properties(explicit)["sasl.jaas.config"] == "X;"
    assert "sasl.jaas.config" not in java_properties({"sasl.mechanism": "OAUTHBEARER", "sasl.username": "u"})
    assert "sasl.jaas.config" not in java_properties({"sasl.mechanism": "GSSAPI"})


def test_pem_locations_become_pem_trust_and_key_stores(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "c.key"
    cert.write_text("-----BEGIN CERTIFICATE-----\nC\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nK\n-----END PRIVATE KEY-----\n")
    props = java_properties(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
        }
    )
    assert props == {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": cert.read_text(),
        "ssl.keystore.key": key.read_text(),
    }
    assert is_secret_key("ssl.keystore.key") and is_secret_key("kafka.sasl.jaas.config")


def test_explicit_java_stores_win_over_derived_ones() -> None:
    props = java_properties({"ssl.ca.location": "/ca.pem", "ssl.truststore.location": "/t.jks"})
    assert props == {"ssl.truststore.location": "/t.jks"}


def test_spark_options_are_prefixed_and_librdkafka_gets_no_java_names(tmp_path: Path) -> None:
    cluster = ClusterConfig(
        bootstrap_servers="h:1",
        properties={"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "secret-pw"},
    )
    options = java_client_options(cluster)
    assert options["kafka.bootstrap.servers"] == "h:1"
    assert "secret-pw" in options["kafka.sasl.jaas.config"]
    assert "kafka.sasl.password" not in options
    # The JAAS value is masked wherever drkit masks (its name is a secret key; the password inside too).
    assert "secret-pw" not in mask_text(str(options), secret_values(dict(cluster.properties)))
    assert "sasl.jaas.config" not in client_config(cluster, "A")


def test_librdkafka_log_lines_go_through_python_logging_masked_at_warning_and_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = ClusterConfig(
        bootstrap_servers="h:1",
        properties={
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "hunter2-pw",
            "sasl.oauthbearer.config": "clientId=x clientSecret=oauth-s3cret",
        },
    )
    logger = client_config(cluster, "Z")["logger"]
    assert logger.name == "drkit.kafka.Z" and logger.getEffectiveLevel() == logging.WARNING
    with caplog.at_level(logging.DEBUG, logger="drkit.kafka.Z"):
        logger.log(logging.ERROR, "%s|%s", "FAIL", "SASL auth with sasl.password=hunter2-pw failed")
        logger.warning("oauth: clientSecret=oauth-s3cret refused; raw hunter2-pw and oauth-s3cret")
    text = caplog.text
    assert "hunter2-pw" not in text and "oauth-s3cret" not in text
    assert text.count("********") >= 4 and "FAIL|SASL auth" in text


def test_the_examples_commented_secure_properties_load_and_give_spark_a_jaas_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """examples/drkit.local.toml's commented SCRAM and mutual TLS properties, uncommented, are valid."""
    from drkit.config import load_config

    example = Path(__file__).resolve().parents[3] / "examples" / "drkit.local.toml"
    text = example.read_text()
    blocks: list[str] = []
    for line in text.splitlines():
        body = line.removeprefix("# ")
        if body == "[clusters.B.properties]":
            blocks.append("")
        elif blocks and line.startswith('# "'):
            blocks[-1] += body + "\n"
    assert len(blocks) == 2
    monkeypatch.setenv("DRKIT_B_PASSWORD", "from-the-env")
    for block in blocks:
        path = tmp_path / "drkit.toml"
        header = "[clusters.B.properties]\n"
        commented = "# " + header + "".join(f"# {line}\n" for line in block.splitlines())
        path.write_text(text.replace(commented, header + block, 1))  # uncommented where it stands
        cluster = load_config(path).clusters["B"]
        assert cluster.properties["ssl.ca.location"].endswith("ca.pem")
        if cluster.properties["security.protocol"] == "SASL_SSL":
            options = java_properties(dict(cluster.properties))
            assert options["sasl.jaas.config"] == f'{SCRAM} required username="drkit" password="from-the-env";'
            assert options["ssl.truststore.type"] == "PEM"
