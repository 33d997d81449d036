"""The session's security settings (drkit.runtime.spark): the shared secret from ``[spark]``'s file, the
environment or ``conf``, never among the settings a JVM is launched with (a command line); Spark's redaction
of the UI and event log widened to JAAS configs and PEM keys; security off warned about once."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from drkit.config import SparkConfig
from drkit.errors import ConfigError
from drkit.runtime import spark as runtime_spark
from drkit.runtime.spark import AUTH_SECRET_ENV, DEFAULTS, auth_secret, session_settings

MASTER = "spark://10.0.0.5:7077"
SECRET = "s3cret-of-the-cluster"


def test_the_secret_is_kept_off_the_launch_settings_and_security_is_on(tmp_path: Path) -> None:
    path = tmp_path / "auth-secret"
    path.write_text(SECRET + "\n")
    config = SparkConfig(master=MASTER, auth_secret_file=path)
    assert auth_secret(config) == SECRET
    launch, secret = session_settings(config, "drkit", [], secret_key=auth_secret(config))
    assert secret == {"spark.authenticate.secret": SECRET}
    assert SECRET not in " ".join(f"{k}={v}" for k, v in launch.items())
    assert launch["spark.authenticate"] == launch["spark.network.crypto.enabled"] == "true"
    assert launch["spark.io.encryption.enabled"] == "true"


def test_the_secret_comes_from_the_environment_when_no_file_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AUTH_SECRET_ENV, SECRET)
    assert auth_secret(SparkConfig(master=MASTER)) == SECRET
    monkeypatch.delenv(AUTH_SECRET_ENV)
    assert auth_secret(SparkConfig(master=MASTER)) is None
    assert auth_secret(SparkConfig(master=MASTER, conf={"spark.authenticate.secret": "c"})) == "c"


def test_a_standalone_master_without_a_secret_or_an_unreadable_file_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="auth_secret_file"):
        session_settings(SparkConfig(master=MASTER), "drkit", [])
    with pytest.raises(ConfigError, match="No such file") as missing:
        auth_secret(SparkConfig(master=MASTER, auth_secret_file=tmp_path / "none"))
    assert "\n" not in str(missing.value)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        auth_secret(SparkConfig(master=MASTER, auth_secret_file=tmp_path / "empty"))


def test_security_off_starts_without_it_and_warns_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    config = SparkConfig(master=MASTER, secure=False)
    launch, _ = session_settings(config, "drkit", [])
    assert "spark.authenticate" not in launch and "spark.network.crypto.enabled" not in launch
    runtime_spark._WARNED.clear()
    with caplog.at_level(logging.WARNING, logger="drkit.runtime.spark"):
        for _ in range(3):
            runtime_spark._warn_once("[spark] secure = false: x")
    assert [r.getMessage() for r in caplog.records] == ["[spark] secure = false: x"]


def test_the_security_properties_are_one_key_not_three() -> None:
    for key in ("spark.authenticate", "spark.network.crypto.enabled", "spark.io.encryption.enabled"):
        with pytest.raises(ValueError, match=r"\[spark\] secure"):
            SparkConfig(master=MASTER, conf={key: "false"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.kafka.sasl.jaas.config", 'ScramLoginModule required username="u" password="p";'),
        ("spark.some.option", "org.apache.kafka.common.security.plain.PlainLoginModule required ...;"),
        ("spark.ssl.keystore.key", "-----BEGIN PRIVATE KEY-----\nMIIE...\n-----END PRIVATE KEY-----"),
        ("spark.whatever", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIE..."),
        ("spark.authenticate.secret", "abc"),
        ("spark.hadoop.fs.s3a.access.key", "AKIA"),
    ],
)
def test_the_ui_and_event_log_redaction_matches_secret_names_and_values(key: str, value: str) -> None:
    # Spark redacts a property when its regex matches the key or the value (Utils.redact).
    pattern = re.compile(DEFAULTS["spark.redaction.regex"].removeprefix("(?i)"), re.IGNORECASE)
    assert pattern.search(key) or pattern.search(value)
    assert not pattern.search("spark.executor.memory") and not pattern.search("2g")
