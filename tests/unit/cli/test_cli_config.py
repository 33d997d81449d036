"""``drkit --version`` and ``drkit config validate|show`` through the real entry point, drkit.cli.app.main."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drkit import __version__
from drkit.cli.app import main

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "drkit.local.toml"
SECRET = "s3cr3t-value"

SECRET_CONFIG = """\
[clusters.A]
bootstrap_servers = "127.0.0.1:19092"

[clusters.B]
bootstrap_servers = "127.0.0.1:19102"
properties = { "security.protocol" = "SASL_SSL", "sasl.password" = "${env:PW}", \
"ssl.key.password" = "${env:PW}", "sasl.jaas.config" = "x required password=\\"${env:PW}\\";" }

[[flows]]
source = "A"
target = "B"
"""

BAD_CONFIG = """\
[clusters.A]
bootstrap_servers = "localhost"
"""
BAD_MESSAGE = "clusters.A.bootstrap_servers: expected host:port[,host:port...] with a port from 1 to 65535"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``drkit argv`` in-process; (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    code = info.value.code
    return (0 if code is None else int(code)), out, err


@pytest.fixture
def bad_config(tmp_path: Path) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(BAD_CONFIG, encoding="utf-8")
    return path


@pytest.fixture
def secret_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PW", SECRET)
    path = tmp_path / "secret.toml"
    path.write_text(SECRET_CONFIG, encoding="utf-8")
    return path


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--version"], capsys)
    assert code == 0
    assert __version__ == "0.1.0"
    assert out == f"drkit {__version__}\n"
    assert err == ""


def test_validate_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["config", "validate", "-c", str(EXAMPLE)], capsys)
    assert code == 0, err
    assert out.startswith(f"valid: {EXAMPLE}\n")
    assert "A->B, B->A" in out
    assert err == ""


def test_validate_example_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["config", "validate", "--config", str(EXAMPLE), "--output", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data == {
        "valid": True,
        "file": str(EXAMPLE),
        "clusters": ["A", "B"],
        "flows": ["A->B", "B->A"],
        "state_root": str((REPO / ".drkit" / "state").resolve()),
    }
    assert err == ""


def test_show_masks_secrets_in_json(secret_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["config", "show", "-c", str(secret_config), "-o", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["clusters"]["B"]["properties"] == {
        "security.protocol": "SASL_SSL",
        "sasl.password": "********",
        "ssl.key.password": "********",
        "sasl.jaas.config": "********",
    }
    assert data["flows"][0]["replication_policy"] == "prefix"  # defaults are filled in
    assert data["flows"][0]["mirror"]["trigger_interval_seconds"] == 1.0
    assert SECRET not in out
    assert SECRET not in err


def test_show_masks_secrets_in_text(secret_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["config", "show", "-c", str(secret_config)], capsys)
    assert code == 0, err
    assert "********" in out
    assert "SASL_SSL" in out
    assert SECRET not in out
    assert SECRET not in err


@pytest.mark.parametrize("command", ["validate", "show"])
def test_bad_config_exits_2_with_one_error_line(
    command: str, bad_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["config", command, "-c", str(bad_config)], capsys)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"error: {bad_config}: {BAD_MESSAGE}"]
    assert "Traceback" not in out + err


@pytest.mark.parametrize("json_flag", [["-o", "json"], ["--output", "json"], ["--output=json"]])
def test_bad_config_json_error_object(
    json_flag: list[str], bad_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["config", "validate", "-c", str(bad_config), *json_flag], capsys)
    assert code == 2
    assert json.loads(out) == {"error": f"{bad_config}: {BAD_MESSAGE}", "exit_code": 2}
    assert err.splitlines() == [f"error: {bad_config}: {BAD_MESSAGE}"]
    assert "Traceback" not in out + err


def test_unset_env_secret_reference_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PW", raising=False)
    path = tmp_path / "secret.toml"
    path.write_text(SECRET_CONFIG, encoding="utf-8")
    code, out, err = run(["config", "show", "-c", str(path)], capsys)
    assert code == 2
    assert "Traceback" not in out + err
    assert err.splitlines() == [
        f"error: {path}: clusters.B.properties.sasl.password: environment variable PW is not set"
    ]


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "missing.toml"
    code, out, err = run(["config", "validate", "-c", str(path)], capsys)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"error: {path}: config file not found (create one from examples/drkit.local.toml)"]


def test_default_config_path_is_drkit_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["config", "validate"], capsys)
    assert code == 2
    assert err.splitlines() == ["error: drkit.toml: config file not found (create one from examples/drkit.local.toml)"]

    (tmp_path / "drkit.toml").write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    code, out, err = run(["config", "validate", "-o", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["file"] == "drkit.toml"


def test_usage_error_exits_2_without_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["config", "validate", "--no-such-option"], capsys)
    assert code == 2
    assert "--no-such-option" in err
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [([], "Usage"), (["config"], "Usage"), (["no-such-command"], "No such command")],
)
def test_missing_or_unknown_command_exits_2_without_traceback(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2
    assert needle in out + err
    assert "Traceback" not in out + err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["config", "--help"], capsys)
    assert code == 0
    assert "validate" in out


def test_typer_exit_code_of_a_command_is_the_process_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # main() runs Typer with standalone_mode=False, which returns Exit codes instead of raising.
    import typer

    from drkit.cli import app as app_module

    probe = typer.Typer()

    @probe.command("exit-probe")
    def exit_probe(code: int) -> None:
        raise typer.Exit(code)

    commands = [*app_module.app.registered_commands, *probe.registered_commands]
    monkeypatch.setattr(app_module.app, "registered_commands", commands)
    assert run(["exit-probe", "3"], capsys)[0] == 3
    assert run(["exit-probe", "0"], capsys)[0] == 0


@pytest.mark.parametrize("pattern", ["[a-z]+(", "[/x]("])
def test_error_message_with_brackets_is_printed_verbatim(
    pattern: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "brackets.toml"
    path.write_text(
        '[clusters.A]\nbootstrap_servers = "h:1"\n[clusters.B]\nbootstrap_servers = "h:2"\n'
        f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics.include = ["{pattern}"]\n',
        encoding="utf-8",
    )
    try:
        code, _, err = run(["config", "validate", "-c", str(path)], capsys)
    except Exception:  # the MarkupError escapes main()
        pytest.fail("main() raised instead of exiting 2")
    assert code == 2
    # the message is full of brackets (flows[0]...); none may be eaten as Rich markup
    assert err == f"error: {path}: flows[0].topics.include[0]: not a valid regular expression: missing ), " + (
        f"unterminated subpattern at position {len(pattern) - 1}\n"
    )


def _subprocess(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_real_process_exit_code_for_bad_config(bad_config: Path, tmp_path: Path) -> None:
    proc = _subprocess(["config", "validate", "-c", str(bad_config)], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: {bad_config}: {BAD_MESSAGE}"]
    assert "Traceback" not in proc.stderr

    proc = _subprocess(["config", "validate", "-c", str(bad_config), "-o", "json"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert json.loads(proc.stdout) == {"error": f"{bad_config}: {BAD_MESSAGE}", "exit_code": 2}
    assert "Traceback" not in proc.stdout + proc.stderr


def test_real_process_validates_the_example(tmp_path: Path) -> None:
    proc = _subprocess(["config", "validate", "-c", str(EXAMPLE), "-o", "json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["valid"] is True
