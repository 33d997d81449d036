"""After-apply hooks on real brokers, through the CLI: a command hook gets the applied operation on stdin, a
webhook on 127.0.0.1 gets it as a POST, and a hook that exits 3 makes the command exit 40 with its outcome in
the audit trail while the offsets stay committed on the target. The webhook's token shows nowhere.

No Spark: the offset-syncs and checkpoints are written to the Delta tables as the mirror and the translator
write them, and the target topic holds the records those syncs describe (tests/support/synced_flow.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from support.synced_flow import FLOW, synced_flow
from support.webhook import webhook_receiver

from drkit.core.checkpoints import Checkpoint
from drkit.core.hooks import HOOK_FAILED_EXIT
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.service import Drkit
from drkit.store.checkpoints import CheckpointTable

TOKEN = "tok-1a2b3c4d5e"


def mirrored(clusters: dict[str, str], tmp_path: Path, group: str, offset: int, hook: str) -> tuple[Path, str]:
    """A synced flow (support.synced_flow) whose ``group`` is checkpointed at ``offset`` and whose
    after_failover hook is ``hook`` (TOML)."""
    toml, topic = synced_flow(clusters, tmp_path, "hook", f"[flows.hooks.after_failover]\n{hook}\n")
    layout = StateLayout(tmp_path / "state")
    CheckpointTable(layout).append([Checkpoint(FLOW, group, topic, f"A.{topic}", 0, offset, offset, Position.MIRRORED)])
    return toml, topic


def failover(toml: Path, group: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "drkit.cli.app", "failover", "--flow", FLOW, "--group", group, "--apply", "--yes"]
    return subprocess.run([*argv, "-c", str(toml)], capture_output=True, text=True, timeout=120, check=False)


def held(bootstrap: str, group: str, topic: str) -> int | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    parts = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return next((tp.offset for tp in parts.topic_partitions or [] if (tp.topic, tp.partition) == (topic, 0)), None)


def audit(toml: Path) -> list[dict[str, object]]:
    """Every row of the newest operation, raw (not folded)."""
    records = Drkit.from_file(str(toml)).context.operations.list(FLOW, 10)
    return [dict(r.result) for r in records if r.id == records[0].id]


def test_a_command_hook_gets_the_applied_operation_on_stdin(clusters: dict[str, str], tmp_path: Path) -> None:
    seen = tmp_path / "stdin.json"
    code = f"import sys; open({str(seen)!r}, 'w').write(sys.stdin.read())"
    toml, topic = mirrored(clusters, tmp_path, "hook-cmd", 6, f"command = {json.dumps([sys.executable, '-c', code])}")
    done = failover(toml, "hook-cmd")
    assert done.returncode == 0, done.stderr
    assert "after-apply hook command" in done.stdout and "succeeded exit 0" in done.stdout
    payload = json.loads(seen.read_text())
    assert (payload["action"], payload["flow"], payload["groups"]) == ("failover", FLOW, ["hook-cmd"])
    assert payload["committed"] == {"hook-cmd": {f"A.{topic}/0": 6}}
    assert held(clusters["B"], "hook-cmd", f"A.{topic}") == 6
    rows = audit(toml)
    assert sorted(str(r["status"]) for r in rows) == ["applied", "applied", "applying"]
    [hooked] = [r for r in rows if "hook" in r]
    assert hooked["hook"]["verdict"] == "succeeded" and hooked["hook"]["code"] == 0  # type: ignore[index]
    [record] = Drkit.from_file(str(toml)).history(FLOW, 5).operations
    assert record.result["hook"]["verdict"] == "succeeded" and payload["operation_id"] == record.id


def test_a_webhook_gets_the_operation_and_its_token_shows_nowhere(clusters: dict[str, str], tmp_path: Path) -> None:
    with webhook_receiver() as receiver:
        url = receiver.url(f"/switch?token={TOKEN}")
        toml, topic = mirrored(clusters, tmp_path, "hook-web", 4, f"webhook = {json.dumps(url)}\ntimeout_seconds = 10")
        done = failover(toml, "hook-web")
        shown = subprocess.run(
            [sys.executable, "-m", "drkit.cli.app", "config", "show", "-c", str(toml)],
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    [request] = receiver.requests
    assert request.path == f"/switch?token={TOKEN}"
    assert json.loads(request.body)["committed"] == {"hook-web": {f"A.{topic}/0": 4}}
    assert f"webhook http://127.0.0.1:{receiver.port}/switch?***: succeeded HTTP 200" in done.stdout
    history = subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", "history", "-c", str(toml), "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "state").rglob("*.log"))
    table = json.dumps(audit(toml))
    for text in (done.stdout, done.stderr, history.stdout, shown.stdout, logs, table):
        assert TOKEN not in text
    assert '"verdict": "succeeded"' in history.stdout


def test_a_failing_hook_exits_40_is_audited_and_leaves_the_offsets(clusters: dict[str, str], tmp_path: Path) -> None:
    code = "import sys; print('dns api said no'); sys.exit(3)"
    toml, topic = mirrored(clusters, tmp_path, "hook-bad", 8, f"command = {json.dumps([sys.executable, '-c', code])}")
    done = failover(toml, "hook-bad")
    assert done.returncode == HOOK_FAILED_EXIT, done.stdout + done.stderr
    [line] = [x for x in done.stdout.splitlines() if "after-apply hook" in x]
    assert "failed exit 3" in line and "the offsets stay applied" in line
    assert held(clusters["B"], "hook-bad", f"A.{topic}") == 8  # committed, and not undone
    [hooked] = [r for r in audit(toml) if "hook" in r]
    assert hooked["status"] == "applied" and hooked["verified"] == {"hook-bad": {f"A.{topic}/0": 8}}
    hook = hooked["hook"]
    assert isinstance(hook, dict) and (hook["verdict"], hook["code"]) == ("failed", 3)
    assert "dns api said no" in hook["output"]
