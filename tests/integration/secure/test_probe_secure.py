"""The probe drill over SASL_SSL (A) and mutual TLS (B) as a principal holding exactly the operator's rows of
docs/security.md and the probe's: it passes, every record of the window verified by its content (the copies
here carry no origin header: another tool's copies), and no drill group is left.

No Spark: B's copy is produced with the same records, the offset-syncs and the checkpoint are written to the
Delta tables, and a mirror's lease claim is appended to B's lease topic, as a running mirror would have it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient
from support.acl_table import Names, acls, documented_rows
from support.kafka_io import commit, create_topic, produce, unique
from support.secure import SecureClusters
from support.sync_writer import sync, write_syncs

from drkit.config import load_config
from drkit.core.checkpoints import Checkpoint
from drkit.core.mirror_lease import Instance, LeaseAct
from drkit.core.probe import DRILL_GROUP_PREFIX
from drkit.core.translate import Position
from drkit.kafka.lease_log import LeaseLog
from drkit.layout import StateLayout
from drkit.store.checkpoints import CheckpointTable

FLOW, GROUP, PRINCIPAL, RECORDS, COMMITTED = "A->B", "ledger", "probe-operator", 30, 10


def test_the_probe_passes_as_a_least_privilege_principal(secure: SecureClusters, tmp_path: Path) -> None:
    topic = unique("probed")
    copy = f"A.{topic}"
    flow = (
        f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = ["{topic}"] }}\n'
        "[flows.heartbeats]\ninterval_seconds = 0\n"
    )
    rows = [r for r in documented_rows() if r.role == "operator"]
    secure.grant(acls(rows, Names("A", "B", topic, GROUP), {"operator": PRINCIPAL}, frozenset({"probe"})))
    records = [{"partition": 0, "key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(RECORDS)]
    create_topic(secure.bootstrap["A"], topic, client=secure.client("A"))
    create_topic(secure.bootstrap["B"], copy, client=secure.client("B"))
    produce(secure.bootstrap["A"], topic, records, **secure.client("A"))
    produce(secure.bootstrap["B"], copy, records, **secure.client("B"))
    commit(secure.bootstrap["A"], GROUP, {(topic, 0): COMMITTED}, client=secure.client("A"))
    layout = StateLayout(tmp_path / "state")
    write_syncs(layout, [sync(FLOW, topic, 0, (0, RECORDS - 1), (0, RECORDS - 1), 0)])
    CheckpointTable(layout).append([Checkpoint(FLOW, GROUP, topic, copy, 0, COMMITTED, COMMITTED, Position.MIRRORED)])
    admin = load_config(secure.write_config(tmp_path / "admin.toml", "admin", tmp_path / "state", flow))
    lease = LeaseLog(admin.clusters["B"], "B", FLOW)
    try:
        lease.ensure()
        lease.append(LeaseAct.CLAIM, Instance(unique("mirror"), "elsewhere", 1), 120_000)
    finally:
        lease.close()

    config = secure.write_config(tmp_path / "operator.toml", PRINCIPAL, tmp_path / "state", flow)
    argv = ["drill", "probe", "--flow", FLOW, "--group", GROUP, "-c", str(config), "-o", "json", "--wait-seconds", "20"]
    proc = subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["verdict"] == "pass" and report["records"]["verified"] == RECORDS - COMMITTED
    assert report["records"]["missed"] == report["records"]["reread"] == 0
    groups = AdminClient({"bootstrap.servers": secure.bootstrap["B"], **secure.client("B")}).list_consumer_groups()
    assert not [g.group_id for g in groups.result(30).valid if g.group_id.startswith(DRILL_GROUP_PREFIX)]
    assert not [s for s in secure.passwords.values() if s in proc.stdout + proc.stderr]
