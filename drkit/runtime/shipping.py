"""drkit for the executors: a zip of the driver's own drkit package, made once and added to the session.

With a cluster master, tasks run in Python workers on other machines (or other processes): they import
drkit from the zip :func:`ship_drkit` adds with ``SparkContext.addPyFile``, which Spark serves from the
driver and puts at the front of each Python worker's ``sys.path``, so a task runs the very code the
driver planned with, whatever drkit the executors' image holds (or none).

Invariant: the zip's name holds the drkit version and a digest of the package's files, so a zip is never
reused for other code (a development tree edited between two runs gets a new one); before reuse its
contents are digested again and must match that name; and it is written under a temporary name and
renamed, so a reader never sees half a zip. Only drkit travels: its
dependencies (confluent-kafka, pyarrow, deltalake...) must be on the executors' Python (docs/deploy.md:
a packed virtual environment through ``spark.archives``, or an image).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from drkit._version import __version__
from drkit.runtime.artifacts import cache_root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Folders and suffixes that are not part of the package (bytecode is made by each Python itself).
_SKIP_DIRS = frozenset({"__pycache__"})
_SKIP_SUFFIXES = (".pyc", ".pyo")
#: A fixed time for every zip entry: the same files give the same zip, byte for byte.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def package_dir() -> Path:
    """The folder of the drkit package this process imported (this module's grandparent)."""
    return Path(__file__).resolve().parents[1]


def package_files(root: Path) -> list[Path]:
    """The package's files (code and data), sorted, relative to ``root``."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in files:
            if not name.endswith(_SKIP_SUFFIXES):
                found.append(Path(folder, name).relative_to(root))
    return sorted(found)


def package_digest(root: Path, files: list[Path]) -> str:
    """A digest of the files' names and contents: the zip's identity beyond the version."""
    return _digest((rel.as_posix(), root.joinpath(rel).read_bytes()) for rel in files)


def _digest(entries: Iterable[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, data in entries:
        digest.update(name.encode() + b"\0")
        digest.update(data + b"\0")
    return digest.hexdigest()[:16]


def zip_digest(path: Path) -> str | None:
    """The digest of what a drkit zip holds (as :func:`package_digest` of the files it was made from); None
    for a file that is not a readable zip."""
    try:
        with zipfile.ZipFile(path) as z:
            entries = sorted(i.filename for i in z.infolist() if not i.is_dir())
            return _digest((name.removeprefix("drkit/"), z.read(name)) for name in entries)
    except (OSError, zipfile.BadZipFile):
        return None


def drkit_zip(cache: Path | None = None) -> Path:
    """The zip of this process's drkit package (``drkit/...`` inside), made on the first call for its code."""
    root = package_dir()
    files = package_files(root)
    folder = (cache or cache_root()) / "pyfiles"
    expected = package_digest(root, files)
    target = folder / f"drkit-{__version__}-{expected}.zip"
    # Checked, not trusted by its name: the executors run whatever the zip holds, so a zip changed or cut
    # short in the cache since it was made is made again from this process's own files.
    if target.exists() and zip_digest(target) == expected:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".drkit-", suffix=".zip", dir=folder)
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as out:
            for rel in files:
                entry = zipfile.ZipInfo(f"drkit/{rel.as_posix()}", _EPOCH)
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = 0o644 << 16
                out.writestr(entry, root.joinpath(rel).read_bytes())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def ship_drkit(session: SparkSession) -> Path:
    """Add the drkit zip to the session's Python files (every executor's Python workers import it first)."""
    path = drkit_zip()
    context = session.sparkContext
    # addPyFile also puts the zip on this process's sys.path: drkit is already imported from its own
    # folder, so the driver keeps running that (the zip holds the same files).
    if path.name not in {Path(p).name for p in context._python_includes or ()}:
        context.addPyFile(str(path))
    return path
