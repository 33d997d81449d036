"""Upgrading keeps a flow's state: folders named by earlier versions are adopted, or refused in one line.

Earlier versions gave ``a_to->b`` and ``a->to_b`` one folder (``a_to_to_b``); today each flow has its own
(drkit.layout.flow_dir_name). A folder one configured flow can own is moved to its new name with its Spark
checkpoint; one two flows shared, or one an earlier version's job still holds, is refused, nothing moved.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from drkit.errors import RefusedError
from drkit.layout import JobKind, StateLayout
from drkit.runtime.process import adopt_legacy_dirs


@pytest.fixture
def layout(tmp_path: Path) -> StateLayout:
    return StateLayout(tmp_path / "state")


def _old_mirror(layout: StateLayout, flow: str) -> Path:
    """A mirror folder as an earlier version left it, with a Spark checkpoint and a (free) lock file."""
    folder = layout.legacy_job_dir(JobKind.MIRROR, flow)
    (folder / "checkpoint" / "offsets").mkdir(parents=True)
    (folder / "checkpoint" / "metadata").write_text('{"id": "q-1"}')
    (folder / "lock").write_text("")
    return folder


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_a_folder_one_flow_owns_is_moved_with_its_spark_checkpoint(layout: StateLayout) -> None:
    old = _old_mirror(layout, "a_to->b")
    adopt_legacy_dirs(layout, ["a_to->b", "b->a_to"])
    assert not old.exists()
    assert Path(layout.stream_checkpoint("a_to->b") / "metadata").read_text() == '{"id": "q-1"}'
    assert layout.job_dir(JobKind.MIRROR, "a_to->b").name == "a__to_to_b"


def test_a_folder_two_flows_shared_is_refused_naming_both_and_where_to_move_it(layout: StateLayout) -> None:
    _old_mirror(layout, "a_to->b")
    before = _files(layout.root)
    with pytest.raises(RefusedError) as refused:
        adopt_legacy_dirs(layout, ["a_to->b", "a->to_b"])
    message = str(refused.value)
    assert "\n" not in message
    assert "was shared by flows a->to_b and a_to->b" in message
    assert str(layout.job_dir(JobKind.MIRROR, "a_to->b")) in message
    assert str(layout.job_dir(JobKind.MIRROR, "a->to_b")) in message
    assert _files(layout.root) == before


def test_after_the_operator_moves_a_shared_folder_both_flows_run(layout: StateLayout) -> None:
    old = _old_mirror(layout, "a_to->b")
    old.rename(layout.job_dir(JobKind.MIRROR, "a->to_b"))
    adopt_legacy_dirs(layout, ["a_to->b", "a->to_b"])
    assert Path(layout.stream_checkpoint("a->to_b")).is_dir()
    assert not layout.job_dir(JobKind.MIRROR, "a_to->b").exists()


HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_folder_an_earlier_versions_job_still_holds_is_refused(layout: StateLayout) -> None:
    old = _old_mirror(layout, "my_a->b")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(old / "lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        with pytest.raises(RefusedError, match=r"flow my_a->b has a mirror of an earlier drkit version running"):
            adopt_legacy_dirs(layout, ["my_a->b"])
        assert old.is_dir()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    adopt_legacy_dirs(layout, ["my_a->b"])
    assert not old.exists() and Path(layout.stream_checkpoint("my_a->b")).is_dir()


def test_flows_without_underscores_and_missing_roots_are_left_alone(layout: StateLayout, tmp_path: Path) -> None:
    adopt_legacy_dirs(layout, ["A->B"])  # no state root: nothing made
    assert not layout.root.exists()
    folder = _old_mirror(layout, "A->B")
    adopt_legacy_dirs(layout, ["A->B"])
    assert folder == layout.job_dir(JobKind.MIRROR, "A->B") and folder.is_dir()


def test_a_flow_with_its_own_folder_already_keeps_it(layout: StateLayout) -> None:
    old = _old_mirror(layout, "my_a->b")
    own = layout.job_dir(JobKind.MIRROR, "my_a->b")
    own.mkdir(parents=True)
    adopt_legacy_dirs(layout, ["my_a->b"])
    assert old.is_dir() and own.is_dir() and not (own / "checkpoint").exists()
