"""The deployment examples are drkit configs drkit accepts, and the Kubernetes manifest agrees with itself:
the driver's Service exposes the ports the config names, the Deployment runs a real drkit command."""

from __future__ import annotations

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
