"""No secret value reaches any output of ``drkit config show|validate``, any config error, or the Spark
JVM's command line: secrets in client properties, JAAS and OAuth strings, ``[spark.conf]`` storage keys
and environment variables, each a distinct value so a leak names its source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drkit.cli.app import main
from drkit.config import SparkConfig, is_secret_key, load_config, masked_dump
from drkit.runtime.spark import session_settings

SECRETS = {
    "PW": "env-sasl-password-1111",
    "OAUTH": "env-oauth-client-secret-2222",
    "STORAGE": "env-azure-storage-key-3333",
}
IN_FILE = {
    "jaas": "jaas-password-4444",
    "url": "url-password-5555",
    "s3": "s3-secret-key-6666",
    "jvm": "jvm-trust-password-7777",
}

JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required"
CONFIG = f"""\
[clusters.A]
bootstrap_servers = "127.0.0.1:19092"

[clusters.B]
bootstrap_servers = "127.0.0.1:19102"

[clusters.B.properties]
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "OAUTHBEARER"
"sasl.password" = "${{env:PW}}"
"sasl.jaas.config" = '{JAAS} username="u" password="{IN_FILE["jaas"]}";'
"sasl.oauthbearer.config" = "clientId=drkit clientSecret=${{env:OAUTH}} scope=kafka"
"sasl.oauthbearer.token.endpoint.url" = "https://drkit:{IN_FILE["url"]}@idp.example.com/token"
"sasl.oauthbearer.extensions" = "logicalCluster=lkc-1,note=${{env:PW}}"

[[flows]]
source = "A"
target = "B"
mirror.producer = {{ "compression.type" = "zstd", "sasl.password" = "${{env:PW}}" }}

[spark.conf]
"spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net" = "${{env:STORAGE}}"
"spark.hadoop.fs.s3a.secret.key" = "{IN_FILE["s3"]}"
"spark.driver.extraJavaOptions" = "-Dssl.truststore.password={IN_FILE["jvm"]} -Xss4m"
"spark.sql.shuffle.partitions" = "4"
"""
ALL_SECRETS = [*SECRETS.values(), *IN_FILE.values()]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out + err


def assert_no_secret(text: str) -> None:
    leaked = [s for s in ALL_SECRETS if s in text]
    assert not leaked, f"leaked {leaked}"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "drkit.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def test_the_config_holds_the_secrets(config: Path) -> None:
    cfg = load_config(config)
    text = json.dumps(cfg.model_dump(mode="json"))
    assert all(s in text for s in ALL_SECRETS)  # else the test below proves nothing


@pytest.mark.parametrize("argv", [["config", "show"], ["config", "validate"]])
@pytest.mark.parametrize("output", [[], ["-o", "json"]])
def test_no_secret_in_cli_output(
    config: Path, argv: list[str], output: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = run([*argv, "-c", str(config), *output], capsys)
    assert code == 0, text
    assert_no_secret(text)


def test_show_masks_inside_values_and_keeps_the_rest(config: Path) -> None:
    props = masked_dump(load_config(config))["clusters"]["B"]["properties"]
    assert props["sasl.password"] == "********"
    assert props["sasl.jaas.config"] == "********"
    assert props["sasl.oauthbearer.config"] == "********"  # OAUTHBEARER settings: all of them, whatever their form
    assert props["sasl.oauthbearer.token.endpoint.url"] == "https://drkit:********@idp.example.com/token"
    # not a secret key, but the value of one: masked by value
    assert props["sasl.oauthbearer.extensions"] == "logicalCluster=lkc-1,note=********"
    assert props["security.protocol"] == "SASL_SSL"


@pytest.mark.parametrize(
    "mistake",
    [
        # a secret in a place validation refuses: the error must not quote it
        ('bootstrap_servers = "127.0.0.1:19102"', 'bootstrap_servers = "${env:PW}"'),
        ('"spark.sql.shuffle.partitions" = "4"', '"spark.sql.shuffle.partitions" = "4"\n"x.y" = "${env:PW}"'),
        ('source = "A"', 'source = "${env:PW}"'),
        ('"security.protocol" = "SASL_SSL"', '"security.protocol" = "${env:PW}"'),
        ('target = "B"', 'target = "B"\ntopics.include = ["${env:PW}(?P<x>"]'),
    ],
    ids=["bootstrap", "spark-key", "alias", "client-value", "regex"],
)
def test_no_secret_in_validation_errors(
    config: Path, mistake: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text(CONFIG.replace(*mistake, 1), encoding="utf-8")
    for output in ([], ["-o", "json"]):
        code, text = run(["config", "validate", "-c", str(config), *output], capsys)
        assert code == 2, text
        assert_no_secret(text)


def test_spark_secrets_stay_off_the_command_line(config: Path) -> None:
    launch, secret = session_settings(load_config(config).spark, "drkit", ["/jars/a.jar"])
    # what spark-submit gets as --conf k=v (readable in ps) holds no secret ...
    assert_no_secret(" ".join(f"--conf {k}={v}" for k, v in launch.items()))
    # ... and everything else is passed after the start
    assert set(secret) == {
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.driver.extraJavaOptions",
    }
    assert launch["spark.sql.shuffle.partitions"] == "4"
    assert launch["spark.master"] == "local[2]"
    assert launch["spark.jars"] == "/jars/a.jar"
    assert launch["spark.driver.memory"] == "2g"  # read at JVM start: must be on the command line


def test_spark_settings_without_secrets_all_launch() -> None:
    launch, secret = session_settings(SparkConfig(), "drkit", [])
    assert secret == {}
    assert launch["spark.app.name"] == "drkit"


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net", True),
        ("spark.hadoop.fs.s3a.access.key", True),
        ("spark.hadoop.fs.s3a.session.token", True),
        ("spark.ssl.keyPassword", True),
        ("spark.authenticate.secret", True),
        ("sasl.oauthbearer.client.secret", True),
        ("sasl.oauthbearer.token.endpoint.url", False),
        ("spark.hadoop.fs.s3a.aws.credentials.provider", False),
        ("ssl.keystore.location", False),
        ("ssl.keystore.type", False),
        ("sasl.oauthbearer.config", True),  # librdkafka's OAUTHBEARER settings, a client secret among them
    ],
)
def test_secret_keys(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_secret_spark_settings_go_to_private_files_removed_after_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import stat

    from drkit.runtime.spark import _secret_properties

    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    secret = {
        "spark.hadoop.fs.s3a.secret.key": "k=v:with#odd!chars\\",
        "spark.driver.extraJavaOptions": "-Dx.password=hunter2",
    }
    with _secret_properties(secret) as extra:
        args = os.environ["PYSPARK_SUBMIT_ARGS"].split()
        assert args[0] == "--properties-file" and args[2] == "pyspark-shell"
        properties, argfile = Path(args[1]), Path(extra["spark.driver.extraJavaOptions"].removeprefix("@"))
        for path in (properties, argfile):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert properties.read_text() == "spark.hadoop.fs.s3a.secret.key=k\\=v\\:with\\#odd\\!chars\\\\\n"
        assert argfile.read_text() == "-Dx.password=hunter2\n"
    assert "PYSPARK_SUBMIT_ARGS" not in os.environ
    assert not properties.exists() and not argfile.exists()
