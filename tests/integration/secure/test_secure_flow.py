"""Mirror, checkpoint translation, failover and failback over SASL_SSL (A) and mutual TLS (B), each job
as its own principal holding exactly the ACLs docs/security.md lists, counted record by record; a missing
ACL and a wrong password, each one line; and no secret anywhere in what the processes printed or stored.

The ACLs granted are read from docs/security.md's table (flow A->B, topic ``orders``, group ``billing``):
the test grants those and nothing more, so a job that needs one more fails here and the doc is proven.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.acl_table import Names, acls, documented_rows
from support.kafka_io import Rec, commit, committed_on, consume_as_group, create_topic, produce, read_all
from support.secure import PRINCIPALS, SecureClusters, key_material, secret_hits

from drkit.config import load_config
from drkit.errors import AccessDenied
from drkit.service import Drkit

TOPIC, GROUP, PARTITIONS, PER_PARTITION = "orders", "billing", 3, 200
COPY = f"A.{TOPIC}"
FLOW = (
    '[[flows]]\nsource = "A"\ntarget = "B"\ntopics = { include = ["orders"] }\n'
    "[flows.heartbeats]\ninterval_seconds = 0\n"
)

#: docs/security.md, "ACLs per job", for flow A->B (source A, target B), topic orders, group billing.
ACLS = acls(documented_rows(), Names("A", "B", TOPIC, GROUP), {r: r for r in ("mirror", "translator", "operator")})


def key(r: Rec) -> tuple[object, ...]:
    return (r.partition, r.key, r.value, r.timestamp)


def job(secure: SecureClusters, spark: Any, tmp_path: Path, principal: str) -> Drkit:
    path = secure.write_config(tmp_path / f"{principal}.toml", principal, tmp_path / "state", FLOW)
    return Drkit(load_config(path), spark)


def run_cli(
    secure: SecureClusters, tmp_path: Path, principal: str, *argv: str, config: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``drkit ARGV`` as a process, with a config for ``principal``; its output captured."""
    if config is None:
        config = secure.write_config(tmp_path / f"{principal}.toml", principal, tmp_path / "state", FLOW)
    return subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", *argv, "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def all_secrets(secure: SecureClusters, *more: str) -> set[str]:
    """Every password on A and every line of every key on B: none may appear anywhere."""
    return set(secure.passwords.values()) | key_material(secure.kafka, "B", PRINCIPALS) | set(more)


def test_mirror_translate_failover_failback_as_least_privilege_principals(
    secure: SecureClusters, spark: Any, tmp_path: Path
) -> None:
    a, b = secure.bootstrap["A"], secure.bootstrap["B"]
    admin_a, admin_b = secure.client("A"), secure.client("B")
    secure.grant(ACLS)
    create_topic(a, TOPIC, PARTITIONS, client=admin_a)
    now = int(time.time() * 1000)
    produce(
        a,
        TOPIC,
        [
            {"partition": i % PARTITIONS, "key": f"k{i}".encode(), "value": f"v{i}".encode(), "timestamp": now + i}
            for i in range(PER_PARTITION * PARTITIONS)
        ],
        **admin_a,
    )

    # -- mirror as `mirror`, as an operator runs it (a process: its output is grepped for secrets) ------
    mirror = run_cli(secure, tmp_path, "mirror", "mirror", "--flow", "A->B", "--once", "-o", "json")
    assert mirror.returncode == 0, mirror.stderr[-3000:]
    assert json.loads(mirror.stdout)[0]["records"] == PER_PARTITION * PARTITIONS
    on_a = read_all(a, TOPIC, client=admin_a)
    on_b = read_all(b, COPY, client=admin_b)
    assert sorted(map(key, on_b)) == sorted(map(key, on_a)), "the copy differs from the source"
    assert len(on_b) == len(set(map(key, on_b))) == PER_PARTITION * PARTITIONS

    # -- the group processed some on A; `translator` checkpoints it ----------------------------------
    processed_on_a = {0: 150, 1: 60, 2: 0}
    commit(a, GROUP, {(TOPIC, p): o for p, o in processed_on_a.items() if o}, client=admin_a)
    job(secure, spark, tmp_path, "translator").translate("A->B", once=True)

    # -- `operator` fails the group over to B; it reads the rest there --------------------------------
    operator = job(secure, spark, tmp_path, "operator")
    over = operator.failover("A->B", [GROUP], apply=True)
    assert over.status == "applied", over.plan.as_dict()
    assert committed_on(b, GROUP, COPY, client=admin_b) == {0: 150, 1: 60}  # none on A: none on B
    read_on_b = consume_as_group(b, GROUP, COPY, 10**6, idle_polls=5, client=admin_b)
    assert Counter(r.partition for r in read_on_b) == {0: 50, 1: 140, 2: 200}

    # -- and back to A, where it has nothing left to read ----------------------------------------------
    back = operator.failback("A->B", [GROUP], apply=True)
    assert back.status == "applied", back.plan.as_dict()
    assert committed_on(a, GROUP, TOPIC, client=admin_a) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    status = run_cli(secure, tmp_path, "operator", "status", "--flow", "A->B", "-o", "json")
    assert status.returncode in (0, 20, 21), status.stderr  # healthy, lagging or stale: answered as `operator`

    # Every record of A processed exactly once: on A before, as its copy on B, none again on A after.
    produce(
        a, TOPIC, [{"partition": p, "key": b"after", "value": b"after", "timestamp": now} for p in range(3)], **admin_a
    )
    read_back = consume_as_group(a, GROUP, TOPIC, 10**6, idle_polls=5, client=admin_a)
    assert sorted((r.partition, r.value) for r in read_back) == [(p, b"after") for p in range(PARTITIONS)]
    processed = Counter(key(r) for r in on_a if r.offset < processed_on_a[r.partition])
    processed.update(key(r) for r in read_on_b)
    assert all(processed[key(r)] == 1 for r in on_a), "a record of A was missed or processed twice"
    assert sum(processed.values()) == len(on_a)

    # No secret in what the processes printed, nor in anything under the state root.
    texts = {"mirror stdout": mirror.stdout, "mirror stderr": mirror.stderr}
    texts |= {"status stdout": status.stdout, "status stderr": status.stderr}
    assert secret_hits(all_secrets(secure), texts, [tmp_path / "state"]) == []


def test_a_missing_acl_and_a_wrong_password_are_one_line_each_and_leak_nothing(
    secure: SecureClusters, spark: Any, tmp_path: Path
) -> None:
    create_topic(secure.bootstrap["A"], "refusals", 1, client=secure.client("A"))
    commit(secure.bootstrap["A"], "audit", {("refusals", 0): 0}, client=secure.client("A"))
    flow = FLOW.replace('include = ["orders"]', 'include = ["refusals"]')
    texts: dict[str, str] = {}

    # The flow has a checkpoint of the group (mirror and translator as admin): failover gets as far as the
    # clusters (with none it would stop before asking them).
    admin = Drkit(load_config(secure.write_config(tmp_path / "admin.toml", "admin", tmp_path / "state", flow)), spark)
    admin.mirror("A->B", once=True)
    [run] = admin.translate("A->B", once=True)
    assert run.checkpoints == 1, run

    # `intruder` holds no ACL: failover is refused on its first request, in one line, exit 4 (a cluster error).
    intruder = secure.write_config(tmp_path / "intruder.toml", "intruder", tmp_path / "state", flow)
    refused = run_cli(secure, tmp_path, "", "failover", "--flow", "A->B", "--group", "audit", config=intruder)
    texts |= {"refused stdout": refused.stdout, "refused stderr": refused.stderr}
    assert refused.returncode == 4, refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert re.fullmatch(
        r"error: cluster [AB]: principal lacks DESCRIBE on (group audit|topic refusals) "
        r"\([A-Z_]+_AUTHORIZATION_FAILED\)\n",
        refused.stderr,
    ), refused.stderr
    print(refused.stderr.strip())
    with pytest.raises(AccessDenied, match="principal lacks") as in_process:
        Drkit(load_config(intruder), spark).failover("A->B", ["audit"], apply=True)
    texts["in-process exception"] = f"{in_process.value!r} {in_process.value}"

    # `operator` with a wrong password: librdkafka reports the failed authentication only in its log lines
    # (its requests fail as a transport failure), so A looks unreachable: status says so (exit 22), failover
    # stops in one line. Neither shows the password, nor does config show, nor librdkafka's lines.
    wrong = f"pw-wrong-{secrets.token_hex(8)}"
    path = secure.write_config(tmp_path / "wrong.toml", "operator", tmp_path / "state", flow)
    path.write_text(path.read_text().replace(secure.passwords["operator"], wrong))
    status = run_cli(secure, tmp_path, "", "status", "--flow", "A->B", config=path)
    assert status.returncode == 22 and "source unreachable" in status.stdout, status.stdout + status.stderr
    failover = run_cli(secure, tmp_path, "", "failover", "--flow", "A->B", "--group", "audit", config=path)
    # One line, and the library log it wrote named after it (drkit.cli.app: "logs: <path>").
    said = [line for line in failover.stderr.splitlines() if not line.startswith("logs: ")]
    assert failover.returncode != 0 and len(said) == 1 and said[0].startswith("error: "), failover.stderr
    print(failover.stderr.strip())
    show = run_cli(secure, tmp_path, "", "config", "show", config=path)
    assert show.returncode == 0 and "sasl.password" in show.stdout, show.stderr
    for name, done in (("status", status), ("failover", failover), ("config show", show)):
        texts |= {f"{name} stdout": done.stdout, f"{name} stderr": done.stderr}
    assert secret_hits(all_secrets(secure, wrong), texts, [tmp_path / "state"]) == []
