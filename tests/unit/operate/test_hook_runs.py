"""Running an after-apply hook for real (a command, a webhook on 127.0.0.1), and an apply that runs it:
only after every offset read back, recorded in a third audit row, a failure exits 40 with the offsets
left committed, and a webhook's token in no output, row or log."""

from __future__ import annotations

import base64
import json
import logging
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.fakes import World, two_cluster_config, world
from support.webhook import webhook_receiver

from drkit.config.hooks import HookConfig
from drkit.core.audit import OperationStatus
from drkit.core.groups import Member
from drkit.core.hooks import HOOK_FAILED_EXIT, HookVerdict
from drkit.core.offsets import SyncRange
from drkit.operate.failback import FailbackRequest, failback
from drkit.operate.failover import FailoverRequest, failover
from drkit.operate.hooks import run_hook

PAYLOAD = {
    "operation_id": "op1",
    "action": "failover",
    "flow": "A->B",
    "from_cluster": "A",
    "to_cluster": "B",
    "groups": ["g1"],
    "committed": {"g1": {"A.orders/0": 140}},
}
TOKEN = "tok-9f8e7d6c"


def command(code: str, timeout: float = 10.0) -> HookConfig:
    return HookConfig(command=[sys.executable, "-c", code], timeout_seconds=timeout)


def test_a_command_gets_the_operation_on_stdin_and_in_its_environment(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    code = (
        "import json, os, sys; d = json.load(sys.stdin); "
        f"d['env'] = {{k: v for k, v in os.environ.items() if k.startswith('DRKIT_')}}; "
        f"open({str(out)!r}, 'w').write(json.dumps(d)); print('switched dns')"
    )
    outcome = run_hook(command(code), PAYLOAD)
    assert (outcome.verdict, outcome.code, outcome.output.strip()) == (HookVerdict.SUCCEEDED, 0, "switched dns")
    seen = json.loads(out.read_text())
    assert {k: v for k, v in seen.items() if k != "env"} == PAYLOAD
    assert seen["env"]["DRKIT_OPERATION_ID"] == "op1" and seen["env"]["DRKIT_GROUPS"] == "g1"


def test_a_failing_command_is_failed_with_its_output_masked(tmp_path: Path) -> None:
    code = "import sys; print('password hunter2-secret in use'); sys.exit(3)"
    outcome = run_hook(command(code), PAYLOAD, {"hunter2-secret"})
    assert (outcome.verdict, outcome.code, outcome.error) == (HookVerdict.FAILED, 3, "exited with 3")
    assert "hunter2" not in json.dumps(outcome.as_dict()) and "***" in outcome.output


def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    child = f"import time; time.sleep(1.5); open({str(marker)!r}, 'w')"
    code = (
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); "
        "print('started', flush=True); time.sleep(60)"
    )
    outcome = run_hook(command(code, timeout=0.5), PAYLOAD)
    assert outcome.verdict is HookVerdict.TIMED_OUT and outcome.duration_ms < 5000
    assert "started" in outcome.output
    time.sleep(2)
    assert not marker.exists()  # the grandchild was killed with the group


def test_a_command_that_cannot_start_is_not_started() -> None:
    outcome = run_hook(HookConfig(command=["/nonexistent/switch-dns"]), PAYLOAD)
    assert outcome.verdict is HookVerdict.NOT_STARTED and outcome.code is None and outcome.error


def test_a_webhook_gets_the_operation_as_json_and_the_user_information_as_basic_auth() -> None:
    with webhook_receiver() as receiver:
        url = receiver.url().replace("127.0.0.1", f"svc:{TOKEN}@127.0.0.1") + f"?token={TOKEN}"
        outcome = run_hook(HookConfig(webhook=url), PAYLOAD)
    [request] = receiver.requests
    assert json.loads(request.body) == PAYLOAD and request.path == f"/switch?token={TOKEN}"
    assert request.headers["Authorization"] == "Basic " + base64.b64encode(f"svc:{TOKEN}".encode()).decode()
    assert (outcome.verdict, outcome.code, outcome.output) == (HookVerdict.SUCCEEDED, 200, "switched")
    assert outcome.target == f"http://***@127.0.0.1:{receiver.port}/switch?***"
    assert TOKEN not in json.dumps(outcome.as_dict()) and TOKEN not in outcome.line()


def test_a_webhook_answering_500_is_rejected_and_its_answer_masked() -> None:
    with webhook_receiver(500, f"bad token {TOKEN}".encode()) as receiver:
        outcome = run_hook(HookConfig(webhook=receiver.url(f"/x?token={TOKEN}")), PAYLOAD)
    assert (outcome.verdict, outcome.code) == (HookVerdict.REJECTED, 500)
    assert outcome.output == "bad token ***" and TOKEN not in outcome.line()


def test_a_webhook_refusing_connections_is_not_reached_and_no_token_shows(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens
    caplog.set_level(logging.DEBUG)
    outcome = run_hook(HookConfig(webhook=f"http://u:{TOKEN}@127.0.0.1:{port}/?t={TOKEN}"), PAYLOAD)
    assert outcome.verdict is HookVerdict.NOT_STARTED and outcome.error and "not reached" in outcome.error
    assert TOKEN not in json.dumps(outcome.as_dict()) + outcome.line() + caplog.text
    assert "not_started" in caplog.text  # the failure is logged, masked


def test_a_webhook_not_answering_in_time_times_out() -> None:
    with socket.socket() as s:  # accepts (the backlog) and never answers
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        outcome = run_hook(HookConfig(webhook=f"http://127.0.0.1:{s.getsockname()[1]}/", timeout_seconds=0.3), PAYLOAD)
    assert outcome.verdict is HookVerdict.TIMED_OUT and outcome.duration_ms < 5000


# --- an apply that runs the hook (in-memory clusters and audit trail) ---


def hooked(tmp_path: Path, hook: dict[str, Any], back: dict[str, Any] | None = None) -> World:
    """g1 at 40 on orders/0 (mirrored 0..99 -> 100..199): a failover moves it to 140 on B."""
    hooks = {"after_failover": hook} | ({"after_failback": back} if back else {})
    flows = [{"source": "A", "target": "B", "hooks": hooks}, {"source": "B", "target": "A"}]
    w = world(tmp_path, two_cluster_config(tmp_path, flows=flows))
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 100, 199))
    w.a.ends[("orders", 0)] = 100
    w.checkpoints.add("A->B", "g1", "orders", "A.orders", 0, 40)
    return w


def apply(w: World, really: bool = True) -> Any:
    return failover(w.context, FailoverRequest(w.config.flow("A->B"), ["g1"], apply=really), lambda plan: True)


def test_an_applied_failover_runs_the_hook_and_records_it_in_a_third_row(tmp_path: Path) -> None:
    out = tmp_path / "stdin.json"
    code = f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"
    w = hooked(tmp_path, {"command": [sys.executable, "-c", code]})
    result = apply(w)
    assert result.status is OperationStatus.APPLIED and result.hook.verdict is HookVerdict.SUCCEEDED
    assert json.loads(out.read_text())["committed"] == {"g1": {"A.orders/0": 140}}
    _, outcome, hook_row = w.operations.records
    assert [r.status for r in w.operations.records] == ["applying", "applied", "applied"]
    assert hook_row.id == outcome.id and hook_row.result == outcome.result | {"hook": result.hook.as_dict()}
    assert w.operations.folded == [hook_row]
    assert result.as_dict()["hook"]["verdict"] == "succeeded"


def test_a_failing_hook_leaves_the_offsets_committed_and_is_recorded(tmp_path: Path) -> None:
    w = hooked(tmp_path, {"command": [sys.executable, "-c", "import sys; sys.exit(3)"]})
    result = apply(w)
    assert result.status is OperationStatus.APPLIED and result.hook.exit_code == HOOK_FAILED_EXIT
    assert w.b.offsets["g1"] == {("A.orders", 0): 140}  # not undone
    assert w.operations.records[-1].result["hook"]["verdict"] == "failed"
    assert w.operations.records[-1].result["hook"]["code"] == 3


def test_no_hook_on_a_dry_run_a_refusal_or_a_partial_apply(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    w = hooked(tmp_path, {"command": [sys.executable, "-c", f"open({str(ran)!r}, 'w')"]})
    assert apply(w, really=False).hook is None
    w.b.members["g1"] = (Member("m-1", "c-1", "host"),)  # active on B: the plan refuses
    refused = apply(w)
    assert refused.status is OperationStatus.REFUSED and refused.hook is None
    del w.b.members["g1"]
    # A consumer joins g1 on B after the plan was made: B refuses the commit, nothing reads back.
    w.operations.after_append = lambda record: w.b.members.__setitem__("g1", (Member("m-1", "c-1", "host"),))
    failed = apply(w)
    assert failed.status is OperationStatus.FAILED and failed.hook is None
    assert not ran.exists()
    assert all("hook" not in r.result for r in w.operations.records)


def test_an_applied_failback_runs_its_own_hook(tmp_path: Path) -> None:
    with webhook_receiver() as receiver:
        w = hooked(tmp_path, {"command": ["/nonexistent"]}, {"webhook": receiver.url(f"/back?token={TOKEN}")})
        w.b.offsets["g1"] = {("A.orders", 0): 150}  # on B at 150: back to 50 on A
        result = failback(w.context, FailbackRequest(w.config.flow("A->B"), ["g1"], apply=True), lambda plan: True)
    assert result.hook.verdict is HookVerdict.SUCCEEDED
    [request] = receiver.requests
    sent = json.loads(request.body)
    assert (sent["action"], sent["from_cluster"], sent["to_cluster"]) == ("failback", "B", "A")
    assert TOKEN not in json.dumps([r.as_dict() for r in w.operations.records])
