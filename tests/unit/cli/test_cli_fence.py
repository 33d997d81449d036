"""``drkit fence`` on a facade of fakes: the dry run's table and verdict, the apply's JSON, and a flow without
producers as one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fakes import World, two_cluster_config, world

from drkit.cli.app import main
from drkit.core.fencing import denial
from drkit.core.offsets import SyncRange
from drkit.service import Drkit


def fenced(tmp_path: Path, producers: list[str]) -> World:
    flow = {"source": "A", "target": "B", "fencing": {"producers": producers, "read_only_copies": True}}
    w = world(tmp_path, two_cluster_config(tmp_path, flows=[flow]))
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.a.acls, w.b.acls = set(), set()
    return w


def run_on(w: World, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["fence", "--flow", "A->B", *args], facade_factory=lambda path: Drkit(w.config, context=w.context))
    out, _ = capsys.readouterr()
    return int(exit_info.value.code or 0), out


def test_a_dry_run_lists_the_denials_and_an_apply_makes_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    w = fenced(tmp_path, ["User:app"])
    code, out = run_on(w, capsys)
    assert code == 0 and w.b.acls == set()
    assert "producers on the source" in out and "fencing: ACLs to change" in out
    assert "A.orders" in out and "User:app" in out and "DENY WRITE" in out
    assert "dry run: nothing was changed" in out

    code, out = run_on(w, capsys, "--apply", "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["status"] == "applied" and data["producers_on"] == "source"
    [change] = data["fencing"]["changes"]
    assert (change["cluster"], change["side"], [a["name"] for a in change["add"]]) == ("B", "target", ["A.orders"])
    assert w.b.acls == {denial("A.orders", "User:app")}

    code, out = run_on(w, capsys, "--apply")
    assert code == 0 and "fencing: no ACL to change" in out and "applied" in out


def test_a_flow_without_producers_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    w = fenced(tmp_path, [])
    code, out = run_on(w, capsys, "--apply", "-o", "json")
    assert code == 2
    error = json.loads(out)["error"]
    assert error.startswith("fence A->B: the flow names no producers") and "\n" not in error
    assert w.operations.records == [] and w.b.acls == set()
