"""The deployment examples are drkit configs drkit accepts, and the Kubernetes manifest agrees with itself:
the driver's Service exposes the ports the config names, the Deployment runs a real drkit command."""

from __future__ import annotations

import ipaddress
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from drkit.config import SparkConfig, parse_config
from drkit.runtime.spark import driver_network

REPO = Path(__file__).resolve().parents[1].parent
MANIFEST = REPO / "examples" / "k8s" / "drkit-mirror.yaml"
DEPLOY_DOC = REPO / "docs" / "deploy.md"


def documents() -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}


def test_the_manifests_config_loads_and_its_ports_are_the_services(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = documents()
    for name in docs["Secret/drkit-secrets"]["stringData"]:
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("POD_NAME", "drkit-mirror-0")
    text = docs["ConfigMap/drkit-config"]["data"]["drkit.toml"]
    config = parse_config(tomllib.loads(_env(text)), "drkit.toml")
    assert config.spark.master.startswith("k8s://")
    network = driver_network(config.spark)
    service = docs["Service/drkit-driver"]
    assert service["spec"]["clusterIP"] == "None"
    ports = {p["port"] for p in service["spec"]["ports"]}
    assert {int(network["spark.driver.port"]), int(network["spark.driver.blockManager.port"])} <= ports
    assert network["spark.driver.host"].startswith(f"{service['metadata']['name']}.{service['metadata']['namespace']}.")
    assert config.spark.conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "drkit-driver"
    assert config.spark.conf["spark.kubernetes.namespace"] == service["metadata"]["namespace"]


def test_prometheus_can_reach_the_mirrors_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    """The metrics port the Service exposes is the one the mirror serves on, bound beyond the pod's loopback."""
    docs = documents()
    for name in docs["Secret/drkit-secrets"]["stringData"]:
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("POD_NAME", "drkit-mirror-0")
    config = parse_config(tomllib.loads(_env(docs["ConfigMap/drkit-config"]["data"]["drkit.toml"])), "drkit.toml")
    assert not ipaddress.ip_address(config.metrics.host).is_loopback
    [port] = [p["port"] for p in docs["Service/drkit-driver"]["spec"]["ports"] if p["name"] == "metrics"]
    [container] = docs["Deployment/drkit-mirror"]["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert int(args[args.index("--metrics-port") + 1]) == port


def test_the_manifest_does_not_claim_a_second_mirror_is_refused_on_an_object_store() -> None:
    """drkit's job lock is a local file (drkit/runtime/process.py): pods do not share it."""
    text = MANIFEST.read_text()
    assert "s3a://" in text
    assert not re.search(r"refuses a second", text)


def test_the_deployment_runs_one_mirror_with_the_mounted_config() -> None:
    from test_runbooks import Invocation, _root_command, problems

    deployment = documents()["Deployment/drkit-mirror"]
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    [container] = spec["template"]["spec"]["containers"]
    args = container["args"]
    assert args[0] == "mirror" and args[args.index("-c") + 1].startswith(container["volumeMounts"][0]["mountPath"])
    assert problems(Invocation("drkit-mirror.yaml", " ".join(args), tuple(args)), _root_command()) == []


def test_the_deploy_docs_spark_sections_load() -> None:
    blocks = re.findall(r"```toml\n(.*?)```", DEPLOY_DOC.read_text(), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        SparkConfig.model_validate(tomllib.loads(block)["spark"])


def _env(text: str) -> str:
    import os

    return re.sub(r"\$\{env:(\w+)\}", lambda m: os.environ[m[1]], text)


def test_the_local_examples_file_paths_are_absolute() -> None:
    """Client properties' file paths reach librdkafka and Spark's JVM as written (drkit resolves only state
    paths against the config's folder), so a relative one in an example would point elsewhere."""
    text = (REPO / "examples" / "drkit.local.toml").read_text()
    paths = re.findall(r'^#?\s*"[\w.]+\.location"\s*=\s*"([^"]+)"', text, re.M)
    assert len(paths) >= 3
    assert [p for p in paths if not p.startswith("/")] == []
