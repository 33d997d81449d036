"""The zip of drkit that executors import (drkit.runtime.shipping): the package's files, made once for
their content, importable as drkit by another Python."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from drkit._version import __version__
from drkit.runtime import shipping


def test_the_zip_holds_the_package_and_is_made_once_for_the_same_code(tmp_path: Path) -> None:
    made = shipping.drkit_zip(tmp_path)
    assert made.parent == tmp_path / "pyfiles" and made.name.startswith(f"drkit-{__version__}-")
    names = set(zipfile.ZipFile(made).namelist())
    root = shipping.package_dir()
    expected = {f"drkit/{p.as_posix()}" for p in shipping.package_files(root)}
    assert names == expected
    assert "drkit/__init__.py" in names and "drkit/runtime/shipping.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    stamp = made.stat().st_mtime_ns
    assert shipping.drkit_zip(tmp_path) == made and made.stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "pyfiles").iterdir()] == [made.name]  # no temporary file left


def test_other_code_gets_another_zip(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("x = 1\n")
    (root / "sub" / "m.py").write_text("y = 2\n")
    files = shipping.package_files(root)
    before = shipping.package_digest(root, files)
    assert shipping.package_digest(root, files) == before
    (root / "sub" / "m.py").write_text("y = 3\n")
    assert shipping.package_digest(root, files) != before


def test_another_python_imports_drkit_from_the_zip(tmp_path: Path) -> None:
    made = shipping.drkit_zip(tmp_path)
    code = f"import sys; sys.path.insert(1, {str(made)!r}); import drkit.core.offsets, drkit; print(drkit.__file__)"
    # -S and another folder: neither the worktree's .pth entry nor the current folder can answer instead.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, env=env, cwd=tmp_path
    )
    assert out.stdout.strip() == f"{made}/drkit/__init__.py"


def test_a_zip_changed_in_the_cache_is_made_again_before_executors_use_it(tmp_path: Path) -> None:
    made = shipping.drkit_zip(tmp_path)
    good = made.read_bytes()
    with zipfile.ZipFile(made) as z:
        entries = {name: z.read(name) for name in z.namelist()}
    entries["drkit/core/offsets.py"] = b"raise SystemExit('not drkit')\n"
    with zipfile.ZipFile(made, "w") as z:  # same name, other code: what executors would run if trusted
        for name, data in entries.items():
            z.writestr(name, data)
    assert shipping.zip_digest(made) != made.name.removesuffix(".zip").rsplit("-", 1)[1]
    assert shipping.drkit_zip(tmp_path) == made and made.read_bytes() == good
    made.write_bytes(good[: len(good) // 2])  # cut short
    assert shipping.zip_digest(made) is None
    assert shipping.drkit_zip(tmp_path) == made and made.read_bytes() == good
