"""Operator commands reject bad input before touching Spark or any cluster (exit 2, one line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from drkit.cli.app import main

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = str(REPO / "examples" / "drkit.local.toml")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["failover", "-c", EXAMPLE, "--flow", "A->B"], "give --group G (one or more) or --all-groups"),
        (["failover", "-c", EXAMPLE, "--flow", "A->B", "--group", "g", "--all-groups"], "give --group G"),
        (
            ["failover", "-c", EXAMPLE, "--flow", "A->B", "--group", "g", "--as-of", "yesterday"],
            "'yesterday' is not an ISO 8601 time",
        ),
        (["failback", "-c", EXAMPLE, "--flow", "A->B"], "give --group G (one or more) or --all-groups"),
        (
            ["offsets", "-c", EXAMPLE, "--group", "g", "--as-of", "2026-01-01T00:00:00Z", "--version", "3"],
            "give --as-of or --version, not both",
        ),
        (["maintain", "-c", EXAMPLE, "--vacuum-retention-hours", "24"], "below Delta's minimum of 168 hours"),
        (["maintain", "-c", EXAMPLE, "--keep-recent-batches", "0"], "--keep-recent-batches"),
        (["status", "-c", EXAMPLE, "--metrics-port", "9464"], "only with --watch"),
        (["status", "-c", EXAMPLE, "--watch", "15"], "needs a port to serve the metrics on"),
        (["status", "-c", EXAMPLE, "--watch", "0.5", "--metrics-port", "9464"], "--watch"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, out, err = run(capsys, *args)
    assert code == 2
    assert message in out + err


def test_unknown_flow_is_a_config_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "failover", "-c", EXAMPLE, "--flow", "A->C", "--group", "g", "-o", "json")
    assert code == 2
    assert json.loads(out) == {"error": "unknown flow 'A->C'; defined flows: A->B, B->A", "exit_code": 2}


def test_missing_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "status", "-c", str(tmp_path / "nope.toml"))
    assert code == 2
    assert "config file not found" in err


# -- the commands on a facade of in-memory fakes: parse, one facade call, render, exit code ----------


def fake_world(tmp_path: Path) -> Any:
    from support.fakes import NOW_MS, world

    from drkit.core.offsets import SyncRange
    from drkit.store.runs import RunFiles, TranslatorRun

    w = world(tmp_path)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.a.ends[("orders", 0)] = 100
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40)
    RunFiles(w.context.layout).write_last_run("A->B", TranslatorRun(NOW_MS, 0.1, 1, 1, 0))
    RunFiles(w.context.layout).write_last_run("B->A", TranslatorRun(NOW_MS, 0.1, 0, 0, 0))
    w.syncs.add("B->A", "local", "B.local", 0, SyncRange(0, 0, 0, 0))
    w.b.ends[("local", 0)] = 1
    return w


def run_on(w: Any, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from drkit.service import Drkit

    with pytest.raises(SystemExit) as exit_info:
        main(list(args), facade_factory=lambda path: Drkit(w.config, context=w.context))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_status_exit_code_is_the_verdict(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    w = fake_world(tmp_path)
    code, out, _ = run_on(w, capsys, "status", "-o", "json")
    assert (code, json.loads(out)["verdict"]) == (0, "healthy")
    w.a.ends[("orders", 0)] = 130
    code, out, _ = run_on(w, capsys, "status", "--flow", "A->B", "-o", "json")
    assert (code, json.loads(out)["flows"][0]["lag_records"]) == (20, 30)
    w.a.reachable = False
    code, out, _ = run_on(w, capsys, "status", "--flow", "A->B")
    assert code == 22 and "source unreachable" in out
    # A is also the target of B->A: the overall verdict is the worse one.
    code, out, _ = run_on(w, capsys, "status")
    assert code == 25 and "target unreachable" in out


def test_status_names_a_diverged_target_in_text_and_exits_23(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    w = fake_world(tmp_path)
    w.b.ends[("A.orders", 0)] = 0  # deleted and created again: empty under syncs up to 99
    code, out, err = run_on(w, capsys, "status", "--flow", "A->B")
    assert code == 23 and "Traceback" not in err
    assert "target diverged" in out and "target topic A.orders on B holds fewer records" in out


def test_failover_dry_run_then_apply(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    w = fake_world(tmp_path)
    code, out, _ = run_on(w, capsys, "failover", "--flow", "A->B", "--group", "billing")
    assert code == 0 and "dry run: nothing was changed" in out and w.b.commits == []
    code, out, _ = run_on(
        w, capsys, "failover", "--flow", "A->B", "--group", "billing", "--apply", "--yes", "-o", "json"
    )
    data = json.loads(out)
    assert code == 0 and data["status"] == "applied" and data["verified"] == {"billing": {"A.orders/0": 40}}
    assert data["rpo"]["unmirrored_offsets"] == 0


def test_failover_refused_exits_3_and_changes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    w = fake_world(tmp_path)
    code, out, _ = run_on(w, capsys, "failover", "--flow", "A->B", "--group", "nobody", "--apply", "--yes")
    assert code == 3 and "refused (unknown_group)" in out and w.b.commits == []


def test_apply_in_json_mode_needs_yes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    w = fake_world(tmp_path)
    code, out, _ = run_on(w, capsys, "failover", "--flow", "A->B", "--group", "billing", "--apply", "-o", "json")
    assert code == 3 and "needs --yes" in json.loads(out)["error"] and w.b.commits == []


def test_failback_and_history(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    w = fake_world(tmp_path)
    w.b.offsets["billing"] = {("A.orders", 0): 70}
    code, out, _ = run_on(w, capsys, "failback", "--flow", "A->B", "--all-groups", "--apply", "--yes", "-o", "json")
    assert code == 0 and json.loads(out)["status"] == "applied"
    assert w.a.commits == [("billing", {("orders", 0): 70})]
    code, out, _ = run_on(w, capsys, "history", "-o", "json")
    assert code == 0 and [(o["action"], o["result"]["status"]) for o in json.loads(out)] == [("failback", "applied")]
    code, out, _ = run_on(w, capsys, "history")
    assert code == 0 and "applied" in out


def test_offsets_of_a_group(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    w = fake_world(tmp_path)
    code, out, _ = run_on(w, capsys, "offsets", "--group", "billing", "--flow", "A->B", "-o", "json")
    [flow] = json.loads(out)
    assert code == 0 and flow["partitions"][0]["translated_now"] == 40


def test_apply_with_no_answer_to_the_prompt_is_declined_and_audited(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    class EmptyTerminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    w = fake_world(tmp_path)
    monkeypatch.setattr(sys, "stdin", EmptyTerminal(""))  # a terminal that ends (Ctrl-D): no answer
    code, _, err = run_on(w, capsys, "failover", "--flow", "A->B", "--group", "billing", "--apply")
    assert code == 1 and "Traceback" not in err
    assert w.b.commits == []
    assert [r.status for r in w.operations.records] == ["declined"]


def test_ctrl_c_at_the_prompt_is_declined_audited_and_exits_130(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    class CtrlC:
        def isatty(self) -> bool:
            return True

        def readline(self, *args: object) -> str:
            raise KeyboardInterrupt

    w = fake_world(tmp_path)
    monkeypatch.setattr(sys, "stdin", CtrlC())
    code, out, err = run_on(w, capsys, "failover", "--flow", "A->B", "--group", "billing", "--apply")
    assert code == 130 and "Traceback" not in err and "not confirmed: nothing was changed" in out
    assert w.b.commits == [] and [r.status for r in w.operations.records] == ["declined"]


def test_a_partial_apply_exits_4_lists_what_was_not_committed_and_history_shows_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from drkit.core.groups import Member

    w = fake_world(tmp_path)
    w.checkpoints.add("A->B", "audit", "orders", "A.orders", 0, 30)
    # A consumer joins "audit" on B once the intent is written: B refuses that group's commit.
    w.operations.after_append = lambda record: w.b.members.__setitem__("audit", (Member("m", "c", "h"),))
    args = ("failover", "--flow", "A->B", "--group", "billing", "--group", "audit", "--apply", "--yes")
    code, out, _ = run_on(w, capsys, *args)
    assert code == 4 and "partial: some groups were not committed" in out
    assert "not committed: 1 of 2 partitions" in out and "cannot commit offsets for group 'audit'" in out
    code, out, _ = run_on(w, capsys, "history", "-o", "json")
    [op] = json.loads(out)
    assert op["result"]["status"] == "partial" and op["result"]["committed"] == {"billing": {"A.orders/0": 40}}
    code, out, _ = run_on(w, capsys, "history")
    assert "partial (1 of 2" in out
    w.b.members.clear()
    code, out, _ = run_on(w, capsys, *args)
    assert code == 0 and "completes operation" in out
    assert w.b.commits[-1] == ("audit", {("A.orders", 0): 30})


@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)])
def test_a_signal_during_the_commits_exits_128_plus_it_with_the_result_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int, code: int
) -> None:
    import signal

    from drkit.operate import apply as apply_module

    w = fake_world(tmp_path)
    w.checkpoints.add("A->B", "audit", "orders", "A.orders", 0, 30)
    monkeypatch.setattr(apply_module, "COMMIT_BATCH_GROUPS", 1)
    w.b.after_commit = lambda group: signal.raise_signal(signal.Signals(signum))
    args = ("failover", "--flow", "A->B", "--group", "billing", "--group", "audit", "--apply", "--yes", "-o", "json")
    exit_code, out, _ = run_on(w, capsys, *args)
    data = json.loads(out)  # one JSON object: the result, no error object after it
    assert exit_code == code and data["status"] == "interrupted"
    assert data["committed"] == {"audit": {"A.orders/0": 30}} and list(data["not_committed"]) == ["billing"]
    assert [r.status for r in w.operations.records] == ["applying", "interrupted"]
