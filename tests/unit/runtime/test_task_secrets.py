"""Which client settings are secret for a task (drkit.runtime.task_secrets.split) and how a sealed section comes
back whole (settings), from the driver's memory or from the file an executor fetched."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.runtime import task_secrets
from drkit.runtime.task_secrets import TaskSecrets, settings, split

PEM = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"


def test_secret_keys_embedded_secrets_and_private_keys_are_split_off() -> None:
    conf = {
        "bootstrap.servers": "b:1",
        "sasl.username": "drkit",
        "sasl.password": "pw",
        "ssl.key.password": "kp",
        "ssl.key.pem": PEM,
        "ssl.key.location": "/etc/drkit/client.key",
        "sasl.oauthbearer.config": "clientId=x clientSecret=y",
        "some.pasted.pem": PEM,
        "linger.ms": 5,
        "enable.idempotence": True,
    }
    public, secret = split(conf)
    assert set(secret) == {
        "sasl.password",
        "ssl.key.password",
        "ssl.key.pem",
        "sasl.oauthbearer.config",
        "some.pasted.pem",
    }
    assert public == {
        "bootstrap.servers": "b:1",
        "sasl.username": "drkit",
        "ssl.key.location": "/etc/drkit/client.key",
        "linger.ms": 5,
        "enable.idempotence": True,
    }


def test_a_section_comes_back_whole_on_the_driver_and_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    added: list[Path] = []
    sealer = TaskSecrets(added.append)
    conf = {"bootstrap.servers": "b:1", "sasl.password": "pw"}
    public, ref = sealer.seal({"producer": conf, "consumer": {"bootstrap.servers": "a:1"}})
    assert ref is not None and public == {
        "producer": {"bootstrap.servers": "b:1"},
        "consumer": {"bootstrap.servers": "a:1"},
    }
    assert "pw" not in repr(ref) and ref.name in added[0].name
    assert settings(public["producer"], ref, "producer") == conf
    monkeypatch.setattr(task_secrets, "_LOADED", {})
    import pyspark

    monkeypatch.setattr(pyspark.SparkFiles, "get", classmethod(lambda cls, name: str(added[0].parent / name)))
    assert settings(public["producer"], ref, "producer") == conf
    assert settings(public["consumer"], ref, "consumer") == {"bootstrap.servers": "a:1"}


def test_settings_without_secrets_add_no_file() -> None:
    added: list[Path] = []
    public, ref = TaskSecrets(added.append).seal({"producer": {"bootstrap.servers": "b:1"}})
    assert (
        ref is None and added == [] and settings(public["producer"], None, "producer") == {"bootstrap.servers": "b:1"}
    )


@given(st.dictionaries(st.sampled_from(["sasl.password", "ssl.key.pem", "acks", "client.id", "x.token"]), st.text()))
def test_split_loses_nothing_and_keeps_each_setting_on_one_side(conf: dict[str, str]) -> None:
    public, secret = split(conf)
    assert {**public, **secret} == conf and not set(public) & set(secret)
