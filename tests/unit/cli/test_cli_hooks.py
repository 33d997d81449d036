"""``drkit failover --apply`` with an after-apply hook, on a facade of fakes: the hook's one line after the
verdict, exit 40 when it failed (0 when it succeeded), the same in JSON, and the offsets committed either way."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support.fakes import World, two_cluster_config, world

from drkit.cli.app import main
from drkit.core.hooks import HOOK_FAILED_EXIT
from drkit.core.offsets import SyncRange
from drkit.service import Drkit


def hooked(tmp_path: Path, code: str) -> World:
    hook = {"after_failover": {"command": [sys.executable, "-c", code]}}
    w = world(tmp_path, two_cluster_config(tmp_path, flows=[{"source": "A", "target": "B", "hooks": hook}]))
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 100, 199))
    w.a.ends[("orders", 0)] = 100
    w.checkpoints.add("A->B", "g1", "orders", "A.orders", 0, 40)
    return w


def failover(w: World, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    args = ["failover", "-c", "drkit.toml", "--flow", "A->B", "--group", "g1", "--apply", "--yes", *extra]
    with pytest.raises(SystemExit) as exit_:
        main(args, facade_factory=lambda path: Drkit(w.config, context=w.context))
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


def test_a_failed_hook_is_one_line_and_exit_40_with_the_offsets_committed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = hooked(tmp_path, "import sys; sys.exit(3)")
    code, out, _ = failover(w, capsys)
    assert code == HOOK_FAILED_EXIT
    [line] = [x for x in out.splitlines() if "after-apply hook" in x]
    assert "failed exit 3" in line and "the offsets stay applied" in line
    assert "applied and verified" in out and w.b.offsets["g1"] == {("A.orders", 0): 140}


def test_a_succeeded_hook_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = failover(hooked(tmp_path, "print('ok')"), capsys)
    assert code == 0 and "succeeded exit 0" in out


def test_json_has_the_hook_and_the_same_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = failover(hooked(tmp_path, "import sys; print('no'); sys.exit(2)"), capsys, "-o", "json")
    answer: dict[str, Any] = json.loads(out)
    assert code == HOOK_FAILED_EXIT and answer["status"] == "applied"
    assert (answer["hook"]["verdict"], answer["hook"]["code"], answer["hook"]["output"]) == ("failed", 2, "no\n")


def test_history_shows_the_hook_s_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = hooked(tmp_path, "import sys; sys.exit(3)")
    failover(w, capsys)
    with pytest.raises(SystemExit):
        main(["history", "-c", "drkit.toml"], facade_factory=lambda path: Drkit(w.config, context=w.context))
    out, _ = capsys.readouterr()
    assert "applied, hook failed" in out
