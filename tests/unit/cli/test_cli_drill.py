"""``drkit drill run`` with a bad spec or a drill that cannot work: one line, exit 2 or 3, nothing started.

No broker runs here: every refusal happens before the drill touches a cluster (the config names
unreachable ports, so any attempt to reach one would fail differently and slowly).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from drkit.cli.app import main

CONFIG = """\
[state]
root = {root}

[clusters.A]
bootstrap_servers = "127.0.0.1:1"

[clusters.B]
bootstrap_servers = "127.0.0.1:2"

[[flows]]
source = "A"
target = "B"
topics = {{ include = ["drill\\\\..*"] }}
"""

GOOD = """\
[drill]
name = "d"
flow = "A->B"
disaster = "{disaster}"

[workload]
topic = "{topic}"
group = "g"

[local_kafka]
state_dir = {state}
"""


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(args)
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "drkit.toml"
    path.write_text(CONFIG.format(root=json.dumps(str(tmp_path / "state"))))
    return path


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def _good(tmp_path: Path, disaster: str = "stop_mirror", topic: str = "drill.x") -> str:
    return GOOD.format(disaster=disaster, topic=topic, state=json.dumps(str(tmp_path / "no-clusters")))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.replace('disaster = "stop_mirror"', 'disaster = "flood"'), "drill.disaster: Input should be"),
        (lambda s: s + "\n[jobs]\nmirror_lag_seconds = -1\n", "jobs.mirror_lag_seconds: Input should be greater"),
        (lambda s: s + "\n[jobs]\ngroup_active_on_target = 3\n", "jobs.group_active_on_target"),
        (lambda s: s.replace('group = "g"', 'group = "g"\nrate_per_second = nan'), "workload.rate_per_second"),
        (lambda s: s + "\n[drill2]\n", "drill2: Extra inputs are not permitted"),
        (lambda s: s.replace('name = "d"', 'name = "a b"'), "drill.name: String should match pattern"),
        (lambda s: s + "\n[[", "is not valid TOML"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_key(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[str], str], message: str
) -> None:
    spec = _spec(tmp_path, edit(_good(tmp_path)))
    code, _, err = _run(["drill", "run", str(spec), "-c", str(config)], capsys)
    assert code == 2, err
    [line] = err.strip().splitlines()
    assert str(spec) in line and message in line, line
    assert not (tmp_path / "state" / "drills").exists() or not any((tmp_path / "state" / "drills").iterdir())


def test_a_missing_spec_is_named(tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["drill", "run", str(tmp_path / "nope.toml"), "-c", str(config)], capsys)
    assert code == 2 and "nope.toml not found" in err and len(err.strip().splitlines()) == 1


def test_a_topic_the_flow_does_not_select_is_refused_before_anything(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, _good(tmp_path, topic="orders"))
    code, _, err = _run(["drill", "run", str(spec), "-c", str(config)], capsys)
    assert code == 2, err
    assert "drill topic orders is not selected by flow A->B: add it to the flow's topics" in err


@pytest.mark.parametrize("disaster", ["kill_source", "partition_source"])
def test_a_signal_disaster_on_a_cluster_drkit_did_not_start_is_refused(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str], disaster: str
) -> None:
    spec = _spec(tmp_path, _good(tmp_path, disaster=disaster))
    code, _, err = _run(["drill", "run", str(spec), "-c", str(config)], capsys)
    assert code == 3, err
    [line] = err.strip().splitlines()
    assert f"disaster {disaster} needs cluster A (127.0.0.1:1) to be a local cluster" in line
    assert "drkit signals no broker it did not start" in line
