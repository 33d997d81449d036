"""``drkit config import-mm2`` through the real entry point: the file it writes passes ``drkit config validate``,
an existing file is replaced only with --force, bad input writes nothing, and no secret is printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drkit.cli.app import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mm2"
SECURE = FIXTURES / "docs-us-west-us-east.properties"
SECRET = "my-secret-password"  # the docs' example password, in SECURE


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    code = info.value.code
    return (0 if code is None else int(code)), out, err


def test_the_written_config_validates_with_its_variables_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "drkit.toml"
    code, out, err = run(["config", "import-mm2", str(SECURE), "--write", str(target)], capsys)
    assert (code, err) == (0, "")
    assert "written" in out and "DRKIT_US_EAST_SSL_TRUSTSTORE_PASSWORD" in out
    assert "us-east.producer.buffer.memory" in out and "client_unsupported" in out
    assert SECRET not in out and SECRET not in target.read_text()

    code, _, err = run(["config", "validate", "-c", str(target)], capsys)
    assert code == 2 and "environment variable DRKIT_US_EAST_SSL_" in err  # the variables are needed
    for name in ("TRUSTSTORE", "KEYSTORE", "KEY"):
        monkeypatch.setenv(f"DRKIT_US_EAST_SSL_{name}_PASSWORD", "from-the-environment")
    code, out, _ = run(["config", "validate", "-c", str(target), "-o", "json"], capsys)
    assert code == 0
    assert json.loads(out)["flows"] == ["us-west->us-east"]


def test_kafkas_sample_file_becomes_a_valid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "drkit.toml"
    code, _, _ = run(
        ["config", "import-mm2", str(FIXTURES / "connect-mirror-maker.properties"), "-w", str(target)], capsys
    )
    assert code == 0
    code, out, _ = run(["config", "validate", "-c", str(target), "-o", "json"], capsys)
    assert code == 0
    assert json.loads(out)["flows"] == ["A->B", "B->A"]


def test_json_report_and_no_file_without_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["config", "import-mm2", str(SECURE), "-o", "json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["written"] is None
    assert report["toml"].startswith("# drkit config made by `drkit config import-mm2`")
    assert {d["key"]: d["reason"] for d in report["dropped"]}["tasks.max"] == "no_equivalent"
    assert {e["name"] for e in report["env"]} >= {"DRKIT_US_EAST_SSL_KEY_PASSWORD"}
    assert SECRET not in out
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_replaced_only_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "drkit.toml"
    target.write_text("# mine\n")
    code, _, err = run(["config", "import-mm2", str(SECURE), "-w", str(target)], capsys)
    assert code == 3 and "already exists; nothing was written (use --force" in err
    assert target.read_text() == "# mine\n"
    code, _, _ = run(["config", "import-mm2", str(SECURE), "-w", str(target), "--force"], capsys)
    assert code == 0 and "[clusters.us-east]" in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drkit.toml"]  # no temporary file left


def test_the_mm2_file_itself_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "mm2.properties"
    source.write_bytes(SECURE.read_bytes())
    code, _, err = run(["config", "import-mm2", str(source), "-w", str(source), "--force"], capsys)
    assert code == 3 and "is the MirrorMaker 2 file being imported" in err
    assert source.read_bytes() == SECURE.read_bytes()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "MirrorMaker 2 properties file not found"),
        ("A.bootstrap.servers = a:1\n", "no clusters"),
        ("clusters = A\nA.bootstrap.servers = a:1\nA->Z.enabled = true\n", "A->Z.enabled: names a flow between"),
        ("clusters = A\nA.bootstrap.servers = a\\u12\n", "not a valid .properties file"),
        ("clusters = A, B\nA.bootstrap.servers = a:1\n", "B.bootstrap.servers: missing"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    content: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "mm2.properties"
    if content is not None:
        source.write_text(content)
    target = tmp_path / "drkit.toml"
    code, out, err = run(["config", "import-mm2", str(source), "-w", str(target)], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {source}: ") and message in err
    assert len(err.strip().splitlines()) == 1
    assert not target.exists()
