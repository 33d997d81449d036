"""Fencing on the secure clusters (both have the StandardAuthorizer), run as a principal holding exactly the
operator's rows of docs/security.md and fencing's: ``drkit fence --apply`` makes the copy on B read-only to the
named producer; ``drkit failover --apply`` fences it on A (another application still writes its own topic) and
opens the copy; ``drkit failback --apply`` gives A exactly the ACLs it had (listed before and after) and makes
the copy read-only again. On the session's plain clusters (no authorizer) a fencing flow's failover is one
line, nothing written.

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
from confluent_kafka.admin import AclBindingFilter, AclOperation, AdminClient, ResourceType
from support.acl_table import Acl, Names, acls, documented_rows
from support.kafka_io import create_topic, produce, unique
from support.secure import SecureClusters
from support.sync_writer import sync, write_syncs

from drkit.core.checkpoints import Checkpoint
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.store.checkpoints import CheckpointTable

FLOW, GROUP = "A->B", "billing"
FENCED, OTHER, OPERATOR = "app-producer", "other-app", "fence-operator"


def flow_toml(topic: str, read_only_copies: bool = False) -> str:
    return (
        f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = ["{topic}"] }}\n'
        f'[flows.heartbeats]\ninterval_seconds = 0\n[flows.fencing]\nproducers = ["User:{FENCED}"]\n'
        f"read_only_copies = {json.dumps(read_only_copies)}\n"
    )


def write(secure: SecureClusters, principal: str, topic: str, alias: str = "A") -> str | None:
    """One record to ``topic`` on ``alias`` as ``principal``: None when acknowledged, else the error's name."""
    try:
        produce(
            secure.bootstrap[alias],
            topic,
            [{"value": b"x"}],
            **{**secure.client(alias, principal), "enable.idempotence": False, "message.timeout.ms": 15000},
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


def test_fence_failover_and_failback_move_the_denials_as_a_least_privilege_operator(
    secure: SecureClusters, tmp_path: Path
) -> None:
    topic, elsewhere = unique("fenced"), unique("elsewhere")
    copy = f"A.{topic}"
    admin = secure.client("A")
    for name in (topic, elsewhere):
        create_topic(secure.bootstrap["A"], name, client=admin)
    create_topic(secure.bootstrap["B"], copy, client=secure.client("B"))
    records = [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)]
    produce(secure.bootstrap["A"], topic, records, **admin)
    produce(secure.bootstrap["B"], copy, records, **secure.client("B"))
    layout = StateLayout(tmp_path / "state")
    write_syncs(layout, [sync(FLOW, topic, 0, (0, 9), (0, 9), 0)])
    CheckpointTable(layout).append([Checkpoint(FLOW, GROUP, topic, copy, 0, 4, 4, Position.MIRRORED)])
    apps = [
        Acl(alias, who, ResourceType.TOPIC, name, operation)
        for alias, who, name in (("A", FENCED, topic), ("A", OTHER, elsewhere), ("B", FENCED, copy))
        for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    rows = [r for r in documented_rows() if r.role == "operator"]
    operator = acls(rows, Names("A", "B", topic, GROUP), {"operator": OPERATOR}, frozenset({"fencing"}))
    secure.grant(apps + operator)
    config = secure.write_config(tmp_path / "operator.toml", OPERATOR, tmp_path / "state", flow_toml(topic, True))
    before = {alias: secure.bindings(alias) for alias in ("A", "B")}
    assert write(secure, FENCED, topic) is None and write(secure, FENCED, copy, "B") is None

    # Before any failover the copies are made read-only: a dry run shows the denial and changes nothing.
    dry = cli(config, "fence", "--flow", FLOW)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    report = json.loads(dry.stdout)
    [change] = report["fencing"]["changes"]
    assert (report["producers_on"], report["status"]) == ("source", "dry_run")
    assert (change["cluster"], [(a["name"], a["principal"]) for a in change["add"]]) == (
        "B",
        [(copy, f"User:{FENCED}")],
    )
    assert {alias: secure.bindings(alias) for alias in ("A", "B")} == before
    fenced = cli(config, "fence", "--flow", FLOW, "--apply")
    assert fenced.returncode == 0 and json.loads(fenced.stdout)["status"] == "applied", fenced.stdout + fenced.stderr
    until("the producer refused on B's copy", lambda: write(secure, FENCED, copy, "B") is not None)
    assert write(secure, FENCED, copy, "B") == "TOPIC_AUTHORIZATION_FAILED"
    assert write(secure, FENCED, topic) is None  # still writes where it belongs
    again = cli(config, "fence", "--flow", FLOW, "--apply")
    assert again.returncode == 0 and json.loads(again.stdout)["fencing"]["changes"] == [], again.stdout
    read_only = secure.bindings("B")
    assert len(read_only - before["B"]) == 1 and before["B"] <= read_only

    # The failover fences the producer on A and opens the copy.
    over = cli(config, "failover", "--flow", FLOW, "--group", GROUP, "--apply", "--yes")
    assert over.returncode == 0, over.stdout + over.stderr
    until("the fenced producer refused on A", lambda: write(secure, FENCED, topic) is not None)
    assert write(secure, FENCED, topic) == "TOPIC_AUTHORIZATION_FAILED"
    assert write(secure, OTHER, elsewhere) is None  # an application drkit was not told of still writes
    until("the producer writes B's copy", lambda: write(secure, FENCED, copy, "B") is None)
    assert secure.bindings("B") == before["B"]
    on_a = secure.bindings("A")
    assert len(on_a - before["A"]) == 1 and before["A"] <= on_a
    history = cli(config, "history", "--flow", FLOW)
    assert history.returncode == 0 and topic in history.stdout

    # The failback gives A exactly its bindings of before and makes the copy read-only again.
    back = cli(config, "failback", "--flow", FLOW, "--group", GROUP, "--apply", "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert secure.bindings("A") == before["A"] and secure.bindings("B") == read_only
    until("the producer writes on A again", lambda: write(secure, FENCED, topic) is None)
    until("the producer refused on B's copy again", lambda: write(secure, FENCED, copy, "B") is not None)
    secure.revoke(apps + operator)
    drkits = AdminClient({"bootstrap.servers": secure.bootstrap["B"], **secure.client("B")})
    for future in drkits.delete_acls([AclBindingFilter(*b) for b in read_only - before["B"]]).values():
        future.result()


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
