"""Runtime faults and output contracts of the CLI (issue 15, items 7 and 8), table-driven.

Each case asserts the exit code, exactly one line on stderr (or exactly one JSON document on stdout
with ``-o json``), no traceback, and that nothing under the state root changed. The Delta tables are
real (delta-rs, in tmp_path); Spark is never started: the faults are found before it would be.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.privileges import permissions_bind

from drkit.cli.app import main
from drkit.config import load_config
from drkit.core.checkpoints import Checkpoint
from drkit.core.translate import Position
from drkit.layout import StateLayout
from drkit.service import Drkit
from drkit.store import delta
from drkit.store.checkpoints import CheckpointTable
from drkit.store.offset_syncs import SPEC as SYNCS_SPEC

REPO = Path(__file__).resolve().parents[3]


class NoSpark:
    """Fails any use: these faults must be refused before a Spark session is needed."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"Spark was used ({name}) although the fault is found before it")


def state_world(tmp_path: Path) -> tuple[Path, StateLayout]:
    """A config whose state root holds real offset_syncs, checkpoints and operations tables (delta-rs)."""
    root = tmp_path / "state"
    config = tmp_path / "drkit.toml"
    text = (REPO / "examples" / "drkit.local.toml").read_text()
    config.write_text(text.replace('root = "../.drkit/state"', f'root = "{root}"'))
    layout = StateLayout(root)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    store = CheckpointTable(layout)
    for n in range(3):
        store.append([Checkpoint("A->B", "g", "demo.x", "A.demo.x", 0, n, n, Position.MIRRORED)], at=at)
    syncs = [
        {
            "flow": "A->B",
            "source_topic": "demo.x",
            "target_topic": "A.demo.x",
            "partition": 0,
            "upstream_first": 0,
            "upstream_last": 9,
            "downstream_first": 0,
            "downstream_last": 9,
            "record_count": 10,
            "batch_id": 0,
            "stream_id": "s",
            "written_at": at,
            "sync_date": at.date(),
        }
    ]
    delta.write(layout.offset_syncs, SYNCS_SPEC, pa.Table.from_pylist(syncs, schema=SYNCS_SPEC.schema))
    from drkit.core.audit import Action, OperationRecord
    from drkit.store.operations import OperationTable

    OperationTable(layout).append(
        OperationRecord("op", Action.FAILOVER, "A->B", ("g",), None, True, {}, {}, "u", "h", "v", at, None)
    )
    return config, layout


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its content: equal before and after means nothing changed.
    The log files a state root holds (``StateLayout.log_dir``) are what a command said, not state: left out."""
    if root.is_file():
        return {str(root): hashlib.sha256(root.read_bytes()).hexdigest()}
    logs = StateLayout(root).log_dir
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and not p.is_relative_to(logs)
    }


def run(
    capsys: pytest.CaptureFixture[str], factory: Callable[[Path], Drkit] | None, *args: str
) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args), facade_factory=factory)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def no_spark(path: Path) -> Drkit:
    return Drkit(load_config(str(path)), spark=NoSpark())  # type: ignore[arg-type]


def assert_one_error(code: int, out: str, err: str, expected: int, json_mode: bool, *needles: str) -> None:
    assert code == expected, (code, out, err)
    assert "Traceback" not in out + err
    assert len(err.strip().splitlines()) == 1, err
    if json_mode:
        document = json.loads(out)  # exactly one JSON document, nothing else
        assert document["exit_code"] == expected
        message = document["error"]
    else:
        assert out == ""
        message = err
    for needle in needles:
        assert needle in " ".join(message.split()), message


# -- damaged Delta tables: exit 6, the table named, what to do, nothing changed ------------------------


def _log(layout: StateLayout, table: str) -> Path:
    return Path(getattr(layout, table)) / "_delta_log"


def corrupt_last(layout: StateLayout, table: str) -> None:
    last = sorted(_log(layout, table).glob("*.json"))[-1]
    last.write_text("{not json")


def delete_middle(layout: StateLayout, table: str) -> None:
    sorted(_log(layout, table).glob("*.json"))[1].unlink()


def delete_first(layout: StateLayout, table: str) -> None:
    sorted(_log(layout, table).glob("*.json"))[0].unlink()


def delete_log(layout: StateLayout, table: str) -> None:
    shutil.rmtree(_log(layout, table))


def delete_data_file(layout: StateLayout, table: str) -> None:
    next(Path(getattr(layout, table)).rglob("*.parquet")).unlink()


FAULTS = [corrupt_last, delete_middle, delete_first, delete_log, delete_data_file]
COMMANDS = [
    # (args, the damaged table): each command reads that table before anything else
    (["history"], "operations"),
    (["recover", "--flow", "A->B"], "operations"),
    (["offsets", "-g", "g", "--flow", "A->B"], "checkpoints"),
    (["maintain"], "checkpoints"),  # the second table maintain works on: offset_syncs must stay untouched
    (["maintain"], "offset_syncs"),
    (["mirror", "--once", "--flow", "A->B"], "offset_syncs"),
]


@pytest.mark.parametrize("json_mode", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("args, table", COMMANDS, ids=lambda v: v if isinstance(v, str) else "-".join(v[:1]))
def test_a_damaged_table_is_one_line_exit_6_and_nothing_changes(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    args: list[str],
    table: str,
    fault: Callable[[StateLayout, str], None],
    json_mode: bool,
) -> None:
    config, layout = state_world(tmp_path)
    fault(layout, table)
    before = snapshot(layout.root)
    extra = ["-o", "json"] if json_mode else []
    code, out, err = run(capsys, no_spark, *args, "-c", str(config), *extra)
    assert_one_error(
        code,
        out,
        err,
        6,
        json_mode,
        f"Delta table {table}" if fault is not delete_data_file else "Delta table",
        str(getattr(layout, table)).rstrip("/").split("/state/")[1],
        "backup",
        "nothing was changed",
    )
    assert snapshot(layout.root) == before


# -- the state root: a file, or not writable --------------------------------------------------------


def root_is_a_file(layout: StateLayout) -> None:
    shutil.rmtree(layout.root)
    layout.root.write_text("not a folder")


def root_read_only(layout: StateLayout) -> None:
    for p in [layout.root, *layout.root.rglob("*")]:
        if p.is_dir():
            p.chmod(0o555)


STATE_COMMANDS = [
    ["history"],
    ["failover", "--flow", "A->B", "-g", "g"],
    ["failback", "--flow", "A->B", "-g", "g"],
    ["maintain"],
    ["mirror", "--once", "--flow", "A->B"],
    ["checkpoint", "--once", "--flow", "A->B"],
]


@pytest.mark.parametrize("json_mode", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("args", STATE_COMMANDS, ids=lambda a: a[0])
def test_a_state_root_that_is_a_file_is_one_line_exit_6(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], json_mode: bool
) -> None:
    config, layout = state_world(tmp_path)
    root_is_a_file(layout)
    before = snapshot(layout.root)
    code, out, err = run(capsys, no_spark, *args, "-c", str(config), *(["-o", "json"] if json_mode else []))
    assert_one_error(code, out, err, 6, json_mode, f"[state] root {layout.root} is not a folder")
    assert snapshot(layout.root) == before


@pytest.mark.parametrize("args", [["status"], *STATE_COMMANDS, ["topics", "sync"], ["drill", "history"]], ids=str)
def test_a_state_root_that_cannot_be_created_is_one_line_exit_6(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]
) -> None:
    """[state] root under a file: drkit cannot create it (once an unexpected FileNotFoundError)."""
    config, layout = state_world(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    config.write_text(config.read_text().replace(f'root = "{layout.root}"', f'root = "{blocker}/state"'))
    before = snapshot(tmp_path)
    code, out, err = run(capsys, no_spark, *args, "-c", str(config))
    assert_one_error(
        code, out, err, 6, False, f"[state] root {blocker}/state is not a folder (its parent {blocker} is a file)"
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("args", STATE_COMMANDS[1:], ids=lambda a: a[0])
def test_a_state_root_that_cannot_be_written_is_one_line_exit_6(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, request: pytest.FixtureRequest, args: list[str]
) -> None:
    if not permissions_bind(request):
        return  # run and passed in a child without root's capabilities
    config, layout = state_world(tmp_path)
    root_read_only(layout)
    try:
        before = snapshot(layout.root)
        code, out, err = run(capsys, no_spark, *args, "-c", str(config))
        assert_one_error(code, out, err, 6, False, "is not writable by this user")
        assert snapshot(layout.root) == before
    finally:
        for p in [layout.root, *layout.root.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)


# -- output contracts, on a facade of fakes -----------------------------------------------------------


def fakes(tmp_path: Path) -> tuple[Any, Callable[[Path], Drkit]]:
    from support.fakes import world

    from drkit.core.offsets import SyncRange

    w = world(tmp_path)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.a.ends[("orders", 0)] = 100
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40)
    return w, lambda path: Drkit(w.config, context=w.context)


FUTURE = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

CONTRACT_CASES = [
    # (args, exit code, a phrase of the one line)
    (["offsets", "-g", "nobody", "--flow", "A->B"], 3, "group 'nobody' has no checkpoints in flow A->B"),
    (["offsets", "-g", "nobody"], 3, "group 'nobody' has no checkpoints in flows A->B, B->A"),
    (
        ["offsets", "-g", "billing", "--flow", "A->B", "--as-of", "2000-01-01T00:00:00Z"],
        3,
        "no checkpoints as of 2000-01-01T00:00:00Z in flow A->B: its checkpoints start later",
    ),
    (
        ["offsets", "-g", "nobody", "--flow", "A->B", "--as-of", "2000-01-01T00:00:00Z"],
        3,
        "nor now: check the group name",
    ),
    (["offsets", "-g", "billing", "--as-of", FUTURE], 2, "is in the future"),
    (["failover", "--flow", "A->B", "-g", "billing", "--as-of", FUTURE], 2, "is in the future"),
    (["offsets", "-g", "billing", "--as-of", "yesterday"], 2, "'yesterday' is not an ISO 8601 time"),
    (["offsets", "--nope"], 2, "No such option: --nope"),
    (["no-such-command"], 2, "No such command"),
]


@pytest.mark.parametrize("json_mode", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("args, expected, phrase", CONTRACT_CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_output_contracts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], expected: int, phrase: str, json_mode: bool
) -> None:
    w, factory = fakes(tmp_path)
    code, out, err = run(capsys, factory, *args, *(["-o", "json"] if json_mode else []))
    assert_one_error(code, out, err, expected, json_mode, phrase)
    assert w.b.commits == [] and w.operations.records == []


def test_tables_are_not_cut_when_stdout_is_not_a_terminal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    w, factory = fakes(tmp_path)
    group = "a-consumer-group-with-a-rather-long-name-" * 3
    w.checkpoints.add("A->B", group, "orders", "A.orders", 0, 40)
    code, out, _ = run(capsys, factory, "offsets", "-g", group, "--flow", "A->B")
    assert code == 0
    assert group in out  # the title whole, not cut at 80 columns
    assert max(len(line) for line in out.splitlines()) > 80
    assert "…" not in out


def sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler raises before this ends


def ctrl_c() -> None:
    raise KeyboardInterrupt


def bug() -> None:
    raise RuntimeError("boom\n\tat a.java.Trace")


def ctrl_c_in_a_library() -> None:
    """A SIGINT that a library turns into an error of its own (py4j while Spark starts: "An error occurred
    while calling None.None", its JVM interrupted too)."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises before this ends
    except KeyboardInterrupt:
        raise RuntimeError("An error occurred while calling None.None") from None


def ctrl_c_as_a_drkit_error() -> None:
    from drkit.errors import MirrorError

    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        raise MirrorError("the mirror could not start: the Spark gateway exited") from None


@pytest.mark.parametrize(
    "fault, expected, phrase",
    [
        (sigterm, 143, "terminated (SIGTERM)"),
        (ctrl_c, 130, "interrupted"),
        (bug, 1, "unexpected RuntimeError: boom"),
        (ctrl_c_in_a_library, 130, "interrupted (Ctrl-C)"),
        (ctrl_c_as_a_drkit_error, 130, "interrupted (Ctrl-C)"),
    ],
    ids=["sigterm", "sigint", "bug", "sigint-in-a-library", "sigint-as-a-drkit-error"],
)
@pytest.mark.parametrize("json_mode", [False, True], ids=["text", "json"])
def test_interruptions_and_unexpected_errors_are_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault: Callable[[], None],
    expected: int,
    phrase: str,
    json_mode: bool,
) -> None:
    _, factory = fakes(tmp_path)

    def status(self: Drkit, flow: str | None = None) -> Any:
        fault()
        raise AssertionError("not reached")

    monkeypatch.setattr(Drkit, "status", status)
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    code, out, err = run(capsys, factory, "status", *(["-o", "json"] if json_mode else []))
    assert_one_error(code, out, err, expected, json_mode, phrase)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == previous  # the CLI's handlers go


NOISY = """
import os, sys
sys.path[:0] = {paths!r}
from drkit.cli.app import main
from drkit.core.reports import CoalesceFigures, MaintenanceReport, TableFigures
from drkit.service import Drkit
from support.fakes import world
from pathlib import Path

class Noisy(Drkit):
    def maintain(self, keep_recent_batches=100, vacuum_retention_hours=168.0):
        print("Delta: a line a library prints")
        os.write(1, b"a line the JVM writes to fd 1\\n")
        if os.environ.get("FAIL"):
            from drkit.errors import StoreError
            raise StoreError("damaged")
        return MaintenanceReport("state", 100, 168.0, TableFigures(), CoalesceFigures(), TableFigures(), 1.0)

w = world(Path({tmp!r}))
main(["maintain", "-o", "json"], facade_factory=lambda p: Noisy(w.config, context=w.context))
"""


@pytest.mark.parametrize("fail", [False, True], ids=["ok", "error"])
def test_json_stdout_holds_only_the_document(tmp_path: Path, fail: bool) -> None:
    script = tmp_path / "noisy.py"
    script.write_text(NOISY.format(paths=[str(REPO), str(REPO / "tests")], tmp=str(tmp_path)))
    env = dict(os.environ, FAIL="1" if fail else "")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == (6 if fail else 0), done.stderr
    document = json.loads(done.stdout)
    assert document == {"error": "damaged", "exit_code": 6} if fail else document["seconds"] == 1.0
    assert "a line a library prints" in done.stderr and "a line the JVM writes" in done.stderr
    assert "Traceback" not in done.stderr
