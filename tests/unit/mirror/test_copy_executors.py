"""A copy task's closure holds no secret (drkit.mirror.copy_executors, drkit.runtime.task_secrets): pickled as
Spark ships it, the task of a SASL flow and of an mTLS flow, at-least-once and exactly-once, holds none of the
clusters' known secret strings; the executor's side puts the exact settings back from the file the driver added."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

from drkit.config import ClusterConfig, parse_config
from drkit.kafka import clients
from drkit.mirror.copy_executors import CopyTasks
from drkit.mirror.executor import CopyTask, ExactlyOnceTask, copy_partitions, warm
from drkit.mirror.faults import NO_FAULTS
from drkit.mirror.job import PRODUCER_DEFAULTS, PRODUCER_FIXED
from drkit.runtime import task_secrets
from drkit.runtime.task_secrets import TaskSecrets

SASL_PASSWORD = "sasl-pw-6d2f0c9e41"
KEY_PASSWORD = "key-pw-90ab77e3c1"
PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7secretbody\n-----END PRIVATE KEY-----\n"  # noqa: E501
KNOWN_SECRETS = (SASL_PASSWORD, KEY_PASSWORD, PRIVATE_KEY, "secretbody")


def sasl(tmp_path: Path) -> dict[str, Any]:
    ca = tmp_path / "ca.pem"
    ca.write_text("ca")
    return {
        "bootstrap_servers": "sasl:9093",
        "properties": {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "drkit",
            "sasl.password": SASL_PASSWORD,
            "ssl.ca.location": str(ca),
        },
    }


def mtls(tmp_path: Path) -> dict[str, Any]:
    cert = tmp_path / "client.pem"
    cert.write_text("cert")
    return {
        "bootstrap_servers": "mtls:9094",
        "properties": {
            "security.protocol": "SSL",
            "ssl.key.pem": PRIVATE_KEY,
            "ssl.key.password": KEY_PASSWORD,
            "ssl.certificate.location": str(cert),
        },
    }


def tasks(tmp_path: Path, source: dict[str, Any], target: dict[str, Any]) -> tuple[CopyTasks, list[Path]]:
    config = parse_config(
        {
            "clusters": {"A": source, "B": target},
            "flows": [{"source": "A", "target": "B"}],
            "state": {"root": str(tmp_path / "state")},
        }
    )
    added: list[Path] = []
    made = CopyTasks(
        config.flows[0],
        config.clusters["A"],
        config.clusters["B"],
        60.0,
        False,
        False,
        NO_FAULTS,
        TaskSecrets(added.append),
    )
    return made, added


def producer_conf(target: ClusterConfig) -> dict[str, Any]:
    return {**clients.client_config(target, "B"), **PRODUCER_DEFAULTS, **PRODUCER_FIXED}


@pytest.mark.parametrize("kinds", [("sasl", "mtls"), ("mtls", "sasl")])
@pytest.mark.parametrize("exactly_once", [False, True])
def test_a_pickled_copy_task_holds_no_secret_and_the_executor_gets_them_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kinds: tuple[str, str], exactly_once: bool
) -> None:
    make = {"sasl": sasl, "mtls": mtls}
    made, added = tasks(tmp_path, make[kinds[0]](tmp_path), make[kinds[1]](tmp_path))
    producer = producer_conf(made.target)
    eo = ExactlyOnceTask("A->B", 2, made.target_conf(), {("t", 0): 5}) if exactly_once else None
    task: CopyTask = made.task(producer, {"t": "A.t"}, eo)

    for shipped in (cloudpickle.dumps(copy_partitions(task)), cloudpickle.dumps(warm(task))):
        for secret in KNOWN_SECRETS:
            assert secret.encode() not in shipped, f"{secret!r} is inside the pickled task"
        assert b"BEGIN PRIVATE KEY" not in shipped
    assert task.secrets is not None and len(added) == 1
    assert oct(added[0].stat().st_mode & 0o777) == "0o600" and oct(added[0].parent.stat().st_mode & 0o777) == "0o700"

    # On an executor: nothing in memory, the file where SparkFiles puts it.
    monkeypatch.setattr(task_secrets, "_LOADED", {})
    import pyspark

    monkeypatch.setattr(pyspark.SparkFiles, "get", classmethod(lambda cls, name: str(added[0].parent / name)))
    shipped_task: CopyTask = cloudpickle.loads(cloudpickle.dumps(task))
    consumer = {k: v for k, v in clients.client_config(made.source, "A").items() if k != "logger"}
    assert {k: shipped_task.consumer_settings()[k] for k in consumer} == consumer
    assert shipped_task.producer_settings() == {k: v for k, v in producer.items() if k != "logger"}
    if exactly_once:
        assert shipped_task.target_settings() == {k: v for k, v in made.target_conf().items()}


def test_the_same_secrets_are_one_file_for_every_batch(tmp_path: Path) -> None:
    made, added = tasks(tmp_path, sasl(tmp_path), mtls(tmp_path))
    producer = producer_conf(made.target)
    first = made.task(producer, {"t": "A.t"})
    again = made.task(producer, {"t": "A.t", "u": "A.u"})
    assert first.secrets == again.secrets and len(added) == 1
