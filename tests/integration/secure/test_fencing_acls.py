"""Fencing on the SASL_SSL cluster (A has the StandardAuthorizer): after ``drkit failover --apply`` the fenced
producer's writes to the flow's topic are refused on A while another application still writes its own topic;
``drkit failback --apply`` lifts the denial, and A's ACLs are then exactly what they were (listed before and
after). On the session's plain clusters (no authorizer) a fencing flow's failover is one line, nothing written.

No Spark: the offset-syncs and the checkpoint are written to the Delta tables as the mirror and the translator
write them, and B holds the copies those syncs describe.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclOperation,
    ResourceType,
)
from support.acl_table import Acl
from support.kafka_io import create_topic, produce, unique
from support.secure import SecureClusters
from support.sync_writer import sync, write_syncs

from drkit.core.checkpoints import Checkpoint
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.store.checkpoints import CheckpointTable

FLOW, GROUP = "A->B", "billing"
FENCED, OTHER = "app-producer", "other-app"


def flow_toml(topic: str) -> str:
    return (
        f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = ["{topic}"] }}\n'
        f'[flows.heartbeats]\ninterval_seconds = 0\n[flows.fencing]\nproducers = ["User:{FENCED}"]\n'
    )


def write(secure: SecureClusters, principal: str, topic: str) -> str | None:
    """One record to ``topic`` on A as ``principal``: None when acknowledged, else the error's name."""
    try:
        produce(
            secure.bootstrap["A"],
            topic,
            [{"value": b"x"}],
            **{**secure.client("A", principal), "enable.idempotence": False, "message.timeout.ms": 15000},
        )
    except KafkaException as exc:
        return str(exc.args[0].name())
    return None


def until(what: str, check: Any, seconds: float = 30.0) -> None:
    """Brokers apply an ACL change a little after the controller committed it."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def cli(config: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", *argv, "-c", str(config), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_failover_fences_the_producer_on_the_source_and_failback_restores_the_acls(
    secure: SecureClusters, tmp_path: Path
) -> None:
    topic, elsewhere = unique("fenced"), unique("elsewhere")
    admin = secure.client("A")
    for name in (topic, elsewhere):
        create_topic(secure.bootstrap["A"], name, client=admin)
    create_topic(secure.bootstrap["B"], f"A.{topic}", client=secure.client("B"))
    records = [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)]
    produce(secure.bootstrap["A"], topic, records, **admin)
    produce(secure.bootstrap["B"], f"A.{topic}", records, **secure.client("B"))
    layout = StateLayout(tmp_path / "state")
    write_syncs(layout, [sync(FLOW, topic, 0, (0, 9), (0, 9), 0)])
    CheckpointTable(layout).append([Checkpoint(FLOW, GROUP, topic, f"A.{topic}", 0, 4, 4, Position.MIRRORED)])
    grants = [
        Acl("A", who, ResourceType.TOPIC, name, operation)
        for who, name in ((FENCED, topic), (OTHER, elsewhere))
        for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    secure.grant(grants)
    config = secure.write_config(tmp_path / "admin.toml", "admin", tmp_path / "state", flow_toml(topic))
    before = secure.bindings("A")
    assert write(secure, FENCED, topic) is None and write(secure, OTHER, elsewhere) is None

    # A dry run shows the denial and changes nothing.
    dry = cli(config, "failover", "--flow", FLOW, "--group", GROUP)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    [change] = json.loads(dry.stdout)["fencing"]["changes"]
    assert (change["cluster"], [(a["name"], a["principal"]) for a in change["add"]]) == (
        "A",
        [(topic, f"User:{FENCED}")],
    )
    assert secure.bindings("A") == before

    over = cli(config, "failover", "--flow", FLOW, "--group", GROUP, "--apply", "--yes")
    assert over.returncode == 0, over.stdout + over.stderr
    until("the fenced producer refused on A", lambda: write(secure, FENCED, topic) is not None)
    assert write(secure, FENCED, topic) == "TOPIC_AUTHORIZATION_FAILED"
    assert write(secure, OTHER, elsewhere) is None  # an application drkit was not told of still writes
    fenced = secure.bindings("A")
    assert len(fenced - before) == 1 and before <= fenced
    history = cli(config, "history", "--flow", FLOW)
    assert history.returncode == 0 and topic in history.stdout

    back = cli(config, "failback", "--flow", FLOW, "--group", GROUP, "--apply", "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert secure.bindings("A") == before  # exactly the bindings there were before the failover
    until("the producer writes on A again", lambda: write(secure, FENCED, topic) is None)
    secure.revoke(grants)


def test_a_source_without_an_authorizer_is_one_line_and_nothing_is_written(
    clusters: dict[str, str], tmp_path: Path
) -> None:
    topic = unique("unfenced")
    create_topic(clusters["A"], topic)
    create_topic(clusters["B"], f"A.{topic}")
    for bootstrap, name in ((clusters["A"], topic), (clusters["B"], f"A.{topic}")):
        produce(bootstrap, name, [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)])
    layout = StateLayout(tmp_path / "state")
    write_syncs(layout, [sync(FLOW, topic, 0, (0, 9), (0, 9), 0)])
    CheckpointTable(layout).append([Checkpoint(FLOW, GROUP, topic, f"A.{topic}", 0, 4, 4, Position.MIRRORED)])
    config = tmp_path / "drkit.toml"
    config.write_text(
        f"[state]\nroot = {json.dumps(str(tmp_path / 'state'))}\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n' for a, bs in clusters.items())
        + flow_toml(topic)
    )
    proc = cli(config, "failover", "--flow", FLOW, "--group", GROUP, "--apply", "--yes")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error.startswith("cluster A has no authorizer") and "[flows.fencing]" in error, error
    assert "\n" not in error
    history = cli(config, "history", "--flow", FLOW)
    assert history.returncode == 0 and json.loads(history.stdout) == [], history.stdout
