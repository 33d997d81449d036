"""The deployment examples are drkit configs drkit accepts, and the Kubernetes manifest agrees with itself and
with Kubernetes: every document valid against the Kubernetes API schemas (offline, kubernetes-validate); each
driver advertises its own pod IP and binds nowhere else; metrics reachable and probed; the lease, not the
rollout, keeps one replica copying; NetworkPolicies let only executors and the scraper reach a driver; the
Spark secret mounted in the driver and executor pods alike."""

from __future__ import annotations

import ipaddress
import re
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from drkit.config import DrkitConfig, SparkConfig, parse_config
from drkit.core.spark_security import SECRET_FILE_SETTING, SECURE_SETTINGS
from drkit.runtime.spark import driver_network, session_settings

REPO = Path(__file__).resolve().parents[1].parent
MANIFEST = REPO / "examples" / "k8s" / "drkit-mirror.yaml"
DEPLOY_DOC = REPO / "docs" / "deploy.md"
#: The Kubernetes version whose API schemas the manifest is checked against (kubernetes-validate ships them).
KUBERNETES_VERSION = "1.33"
POD_IP = "10.42.0.7"


def documents(text: str | None = None) -> dict[str, dict[str, Any]]:
    loaded = yaml.safe_load_all(MANIFEST.read_text() if text is None else text)
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in loaded if d}


def schema_problems(docs: dict[str, dict[str, Any]]) -> list[str]:
    """Each document's violations of the Kubernetes API schema (strict: an unknown field is one)."""
    found = []
    for name, doc in docs.items():
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            found.append(f"{name}: {exc.message} at {'.'.join(map(str, exc.path))}")
    return found


def test_every_document_is_valid_against_the_kubernetes_schemas() -> None:
    docs = documents()
    assert {"Deployment/drkit-mirror", "NetworkPolicy/drkit-driver", "Service/drkit-mirror-metrics"} <= set(docs)
    assert schema_problems(docs) == []


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        ("      port: 9464\n      targetPort: metrics", "      port: nine\n      targetPort: metrics"),
        ("  replicas: 2", "  replicas: two"),
        ('  policyTypes: ["Ingress"]', '  policyType: ["Ingress"]'),
    ],
)
def test_the_schema_check_fails_on_a_broken_field(good: str, bad: str) -> None:
    text = MANIFEST.read_text()
    assert good in text
    assert schema_problems(documents(text.replace(good, bad, 1))) != []


def config(monkeypatch: pytest.MonkeyPatch) -> DrkitConfig:
    docs = documents()
    for name in docs["Secret/drkit-secrets"]["stringData"]:
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("POD_NAME", "drkit-mirror-0")
    monkeypatch.setenv("POD_IP", POD_IP)
    return parse_config(tomllib.loads(_env(docs["ConfigMap/drkit-config"]["data"]["drkit.toml"])), "drkit.toml")


def container() -> dict[str, Any]:
    [found] = documents()["Deployment/drkit-mirror"]["spec"]["template"]["spec"]["containers"]
    return dict(found)


def env_from_field(name: str) -> str:
    [var] = [e for e in container()["env"] if e["name"] == name]
    return str(var["valueFrom"]["fieldRef"]["fieldPath"])


def test_each_driver_advertises_and_binds_its_own_pod_ip_on_the_ports_it_exposes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded = config(monkeypatch)
    assert loaded.spark.master.startswith("k8s://") and env_from_field("POD_IP") == "status.podIP"
    network = driver_network(loaded.spark)
    assert network["spark.driver.host"] == network["spark.driver.bindAddress"] == POD_IP  # never 0.0.0.0
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    assert int(network["spark.driver.port"]) == ports["driver-rpc"]
    assert int(network["spark.driver.blockManager.port"]) == ports["block-manager"]
    assert loaded.spark.copier_port == ports["copier"]
    assert loaded.spark.conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "drkit-driver"
    assert loaded.spark.conf["spark.kubernetes.namespace"] == "drkit"


def test_spark_is_secure_with_the_secret_file_mounted_in_driver_and_executor_pods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spark = config(monkeypatch).spark
    assert spark.secure and spark.auth_secret_file is not None
    launch, secret = session_settings(spark, "drkit", [], secret_key="unused on kubernetes")
    assert {k: launch[k] for k in SECURE_SETTINGS} == SECURE_SETTINGS
    # (The path may go the private way: it contains the executor secrets' mount folder, a value of a "secret" key.)
    assert {**launch, **secret}[SECRET_FILE_SETTING] == str(spark.auth_secret_file)
    assert "spark.authenticate.secret" not in {**launch, **secret}
    folder = str(spark.auth_secret_file.parent)
    [volume] = [v for v in container()["volumeMounts"] if v["mountPath"] == folder]
    pod = documents()["Deployment/drkit-mirror"]["spec"]["template"]["spec"]
    [source] = [v for v in pod["volumes"] if v["name"] == volume["name"]]
    secret_name = source["secret"]["secretName"]
    assert spark.conf[f"spark.kubernetes.executor.secrets.{secret_name}"] == folder
    assert source["secret"]["defaultMode"] == 0o400


def test_prometheus_can_reach_the_metrics_and_the_probes_ask_the_same_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded = config(monkeypatch)
    assert loaded.metrics.host == POD_IP and not ipaddress.ip_address(loaded.metrics.host).is_loopback
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    assert loaded.metrics.port == ports["metrics"]
    [service_port] = documents()["Service/drkit-mirror-metrics"]["spec"]["ports"]
    assert service_port["port"] == loaded.metrics.port and service_port["targetPort"] == "metrics"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container()[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}


def test_the_manifest_does_not_claim_a_second_mirror_is_refused_on_an_object_store() -> None:
    text = MANIFEST.read_text()
    assert "s3a://" in text
    assert not re.search(r"refuses a second", text)


def test_replicas_stand_by_under_the_lease_with_the_mounted_config() -> None:
    from test_runbooks import Invocation, _root_command, problems

    spec = documents()["Deployment/drkit-mirror"]["spec"]
    assert spec["replicas"] == 2 and spec["strategy"]["type"] == "RollingUpdate"
    args = container()["args"]
    assert args[0] == "mirror" and args[args.index("-c") + 1].startswith(container()["volumeMounts"][0]["mountPath"])
    assert problems(Invocation("drkit-mirror.yaml", " ".join(args), tuple(args)), _root_command()) == []


def test_only_executors_and_the_scraper_reach_a_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = config(monkeypatch)
    docs = documents()
    policy = docs["NetworkPolicy/drkit-driver"]["spec"]
    pod_labels = docs["Deployment/drkit-mirror"]["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items() and policy["policyTypes"] == ["Ingress"]
    network = driver_network(loaded.spark)
    # Spark's two driver ports, and the one the mirror's long-lived copy tasks connect to.
    assert loaded.spark.copier_port is not None
    spark_ports = {
        int(network["spark.driver.port"]),
        int(network["spark.driver.blockManager.port"]),
        loaded.spark.copier_port,
    }
    rules = {frozenset(p["port"] for p in rule["ports"]): rule["from"] for rule in policy["ingress"]}
    assert set(rules) == {frozenset(spark_ports), frozenset({loaded.metrics.port})}
    [executors] = rules[frozenset(spark_ports)]
    labels = executors["podSelector"]["matchLabels"]
    assert labels["spark-role"] == "executor"
    assert loaded.spark.conf["spark.kubernetes.executor.label.app"] == labels["app"]
    [scraper] = rules[frozenset({loaded.metrics.port})]
    assert scraper["podSelector"]["matchLabels"] and scraper["namespaceSelector"]["matchLabels"]


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
