"""The drill schedule's Kubernetes example (examples/k8s/drkit-drill-schedule.yaml) is valid against the Kubernetes
API schemas (offline, kubernetes-validate), runs the non-destructive probe drill, never two drills at once, and the
repeating Deployment serves its metrics on the port it declares with an ``--every`` drkit accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from drkit.cli.app import main
from drkit.core.schedule import parse_every

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "k8s" / "drkit-drill-schedule.yaml"
KUBERNETES_VERSION = "1.33"


def documents() -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d}


def test_every_document_is_valid_against_the_kubernetes_schemas() -> None:
    docs = documents()
    assert set(docs) == {"CronJob/drkit-drill", "Deployment/drkit-drill-every"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_commands_are_drkit_s_probe() -> None:
    docs = documents()
    cron = docs["CronJob/drkit-drill"]["spec"]
    assert cron["concurrencyPolicy"] == "Forbid" and cron["jobTemplate"]["spec"]["backoffLimit"] == 0
    [job] = cron["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    deployment = docs["Deployment/drkit-drill-every"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"]["type"] == "Recreate"
    [every] = deployment["template"]["spec"]["containers"]
    args = every["args"]
    assert job["args"] == args[: len(job["args"])] and args[:2] == ["drill", "probe"]
    assert parse_every(args[args.index("--every") + 1]) == 86400
    assert every["ports"] == [{"name": "metrics", "containerPort": int(args[args.index("--metrics-port") + 1])}]
    # The command line parses: drkit's own parser, stopped at --help before anything runs.
    try:
        main([*args, "--help"])
    except SystemExit as exc:
        assert exc.code == 0
