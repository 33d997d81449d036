"""Where a command's log lines go (drkit.cli.logs): drkit's own lines on the terminal; librdkafka's (masked,
one line each, repeats counted), other libraries' and Python warnings into the state root's library log; with
``--verbose`` or ``DRKIT_LOG=debug`` everything on the terminal. After a failure the CLI names the log files
the command wrote to. The setup is undone after each command."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import pytest

from drkit.cli.app import main
from drkit.config import ClusterConfig, DrkitConfig, load_config
from drkit.errors import ClusterError
from drkit.kafka.clients import client_config
from drkit.layout import LOG_ROTATE_BYTES, StateLayout

SECRET = "hunter2-pw"
REFUSED = (
    "FAIL [rdkafka#consumer-2] [thrd:127.0.0.1:1/bootstrap]: Connect to ipv4#127.0.0.1:1 failed: Connection refused"
)


def config_file(tmp_path: Path, make_root: bool = True) -> Path:
    root = tmp_path / "state"
    if make_root:
        root.mkdir()
    path = tmp_path / "drkit.toml"
    path.write_text(
        f'[state]\nroot = "{root}"\n[clusters.A]\nbootstrap_servers = "127.0.0.1:1"\n'
        '[clusters.A.properties]\n"security.protocol" = "SASL_PLAINTEXT"\n"sasl.mechanism" = "PLAIN"\n'
        f'"sasl.username" = "u"\n"sasl.password" = "{SECRET}"\n'
        '[clusters.B]\nbootstrap_servers = "127.0.0.1:2"\n[[flows]]\nsource = "A"\ntarget = "B"\n'
        'topics = { include = ["t"] }\n'
    )
    return path


class Chatty:
    """A facade whose ``history`` logs as a command's adapters do, then answers (or fails)."""

    def __init__(self, config: DrkitConfig, fail: bool = False) -> None:
        self.config = config
        self.fail = fail

    def history(self, flow: str | None, limit: int) -> Any:
        from drkit.results import History

        a = config_cluster(self.config, "A")
        librdkafka = client_config(a, "A")["logger"]  # the logger librdkafka's lines of cluster A go to
        for _ in range(5):  # a refused connection, at each reconnect
            librdkafka.log(logging.ERROR, "%s", REFUSED)
        librdkafka.log(logging.WARNING, "%s", f"SASL auth with sasl.password={SECRET} failed\n  retrying")
        librdkafka.log(logging.INFO, "%s", "BGQUEUE: purging 1 event")  # made only at debug
        logging.getLogger("drkit.mirror.job").warning("flow A->B: drkit's own warning")
        logging.getLogger("drkit.mirror.job").info("flow A->B: drkit's own progress")
        logging.getLogger("drkit.mirror.job").debug("flow A->B: drkit's own debug line")
        logging.getLogger("py4j.clientserver").error("py4j: a library's error")
        warnings.warn("a library's deprecation warning", DeprecationWarning, stacklevel=1)
        if self.fail:
            raise ClusterError("cluster A (127.0.0.1:1) is unreachable")
        return History(())


def config_cluster(config: DrkitConfig, alias: str) -> ClusterConfig:
    return config.clusters[alias]


def run(path: Path, *args: str, fail: bool = False) -> int:
    with pytest.raises(SystemExit) as done:
        main([*args, "history", "-c", str(path)], facade_factory=lambda p: Chatty(load_config(str(p)), fail))  # type: ignore[arg-type,return-value]
    return int(done.value.code or 0)


def library_log(path: Path) -> Path:
    return StateLayout(load_config(str(path)).state_root()).library_log


@pytest.fixture(autouse=True)
def _no_drkit_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRKIT_LOG", raising=False)


def test_the_terminal_gets_drkits_own_lines_and_the_library_log_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path)
    assert run(path) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == ["flow A->B: drkit's own warning"]
    assert "operations" in out and "FAIL" not in out
    lines = library_log(path).read_text().splitlines()
    refused = [ln for ln in lines if REFUSED in ln]
    assert len(refused) == 2, lines  # the first, and at the end the count of the four repeats left out
    assert " ERROR drkit.kafka.A: " in refused[0]
    assert "4 more like" in refused[1] and "left out" in refused[1]
    sasl = next(ln for ln in lines if "SASL auth" in ln)
    assert SECRET not in library_log(path).read_text() and "********" in sasl
    assert sasl.endswith("failed | retrying")  # one line
    assert any("py4j.clientserver: py4j: a library's error" in ln for ln in lines)
    assert any("py.warnings" in ln and "deprecation warning" in ln for ln in lines)
    assert not any("BGQUEUE" in ln or "own progress" in ln or "own debug" in ln for ln in lines)


def test_a_library_log_past_its_limit_is_moved_aside_before_the_next_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path)
    log = library_log(path)
    log.parent.mkdir(parents=True)
    log.write_bytes(b"old line\n" * (LOG_ROTATE_BYTES // 9 + 1))
    assert run(path) == 0
    capsys.readouterr()
    rotated = StateLayout.rotated_log(log)
    assert rotated.stat().st_size > LOG_ROTATE_BYTES and rotated.read_text().count("old line") > 0
    fresh = log.read_text()
    assert "old line" not in fresh and REFUSED in fresh


@pytest.mark.parametrize("how", ["--verbose", "DRKIT_LOG=debug"])
def test_verbose_shows_everything_on_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    path = config_file(tmp_path)
    if how == "--verbose":
        assert run(path, "--verbose") == 0
    else:
        monkeypatch.setenv("DRKIT_LOG", "debug")
        assert run(path) == 0
    err = capsys.readouterr().err
    for line in (
        "WARNING drkit.mirror.job: flow A->B: drkit's own warning",
        "INFO drkit.mirror.job: flow A->B: drkit's own progress",
        "DEBUG drkit.mirror.job: flow A->B: drkit's own debug line",
        f"ERROR drkit.kafka.A: {REFUSED}",
        "INFO drkit.kafka.A: BGQUEUE: purging 1 event",
        "ERROR py4j.clientserver: py4j: a library's error",
    ):
        assert line in err.splitlines(), err
    assert "deprecation warning" in err
    assert SECRET not in err  # masked on the terminal too
    assert not library_log(path).exists()


def test_info_adds_drkits_progress_lines_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRKIT_LOG", "info")
    path = config_file(tmp_path)
    assert run(path) == 0
    assert capsys.readouterr().err.splitlines() == ["flow A->B: drkit's own warning", "flow A->B: drkit's own progress"]


def test_a_failure_names_the_log_files_the_command_wrote_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config_file(tmp_path)
    assert run(path, fail=True) == 4
    err = capsys.readouterr().err.splitlines()
    assert err[-2:] == ["error: cluster A (127.0.0.1:1) is unreachable", f"logs: {library_log(path)}"]


def test_a_failure_that_logged_nothing_names_no_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config_file(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["history", "-c", str(path), "--flow", "nope"])
    assert done.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err


def test_no_state_root_no_log_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A read-only command on a fresh config creates nothing, not even a log."""
    path = config_file(tmp_path, make_root=False)
    assert run(path) == 0
    assert capsys.readouterr().err.splitlines() == ["flow A->B: drkit's own warning"]
    assert not (tmp_path / "state").exists()


def test_a_drkit_log_naming_no_verbosity_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRKIT_LOG", "loud")
    path = config_file(tmp_path)
    assert run(path) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: DRKIT_LOG must be one of warning, info, debug (unset: warning); unset it or pick one"
    ]
    assert not library_log(path).exists()


def test_the_setup_is_undone_after_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    handlers, levels = list(root.handlers), {n: logging.getLogger(n).level for n in ("", "drkit", "drkit.kafka")}
    path = config_file(tmp_path)
    run(path, "--verbose")
    import os

    assert "DRKIT_LOG" not in os.environ
    assert root.handlers == handlers
    assert {n: logging.getLogger(n).level for n in levels} == levels
    assert warnings.showwarning.__module__ == "warnings"  # captureWarnings(False) put Python's back


@pytest.mark.parametrize(
    ("env", "properties", "level"),
    [
        (None, {}, "4"),  # warnings and up: librdkafka makes no info line (BGQUEUE) nor debug line
        ("debug", {}, "6"),  # its info lines too
        (None, {"log_level": "7"}, "7"),  # the operator's own level is kept
    ],
)
def test_librdkafka_makes_only_the_lines_the_verbosity_keeps(
    monkeypatch: pytest.MonkeyPatch, env: str | None, properties: dict[str, str], level: str
) -> None:
    if env:
        monkeypatch.setenv("DRKIT_LOG", env)
    conf = client_config(ClusterConfig(bootstrap_servers="h:1", properties=properties), "A")
    assert str(conf["log_level"]) == level
    assert str(client_config(ClusterConfig(bootstrap_servers="h:1"), "A", log_level=2)["log_level"]) == "2"
