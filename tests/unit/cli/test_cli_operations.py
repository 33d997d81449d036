"""Operator commands reject bad input before touching Spark or any cluster (exit 2, one line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drkit.cli.app import main

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = str(REPO / "examples" / "drkit.local.toml")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


@pytest.mark.parametrize("args, message", [
    (["failover", "-c", EXAMPLE, "--flow", "A->B"], "give --group G (one or more) or --all-groups"),
    (["failover", "-c", EXAMPLE, "--flow", "A->B", "--group", "g", "--all-groups"], "give --group G"),
    (["failover", "-c", EXAMPLE, "--flow", "A->B", "--group", "g", "--as-of", "yesterday"],
     "'yesterday' is not an ISO 8601 time"),
    (["failback", "-c", EXAMPLE, "--flow", "A->B"], "give --group G (one or more) or --all-groups"),
    (["offsets", "-c", EXAMPLE, "--group", "g", "--as-of", "2026-01-01T00:00:00Z", "--version", "3"],
     "give --as-of or --version, not both"),
    (["maintain", "-c", EXAMPLE, "--vacuum-retention-hours", "24"], "below Delta's minimum of 168 hours"),
    (["maintain", "-c", EXAMPLE, "--keep-recent-batches", "0"], "--keep-recent-batches"),
])
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
