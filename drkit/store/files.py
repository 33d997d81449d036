"""Files under the state root, local or in an object store: the one place that reads and writes them.

A :class:`~drkit.layout.StatePath` is a local path or an object-store URI; this module turns a remote one
into a pyarrow file system (S3 through pyarrow's own client, the other stores through delta-rs's, with the
same options as their Delta tables) and the rest of drkit never asks which kind it holds. Local files are
replaced atomically (a temporary file renamed); an object is replaced by one PUT, which S3 and the others
make atomic. Invariant: a remote path is never handed to the local file system (no folder named ``s3a:``).
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from drkit.core.storage import S3_SCHEMES, RootUri, StorageSettings, delta_options, parse_root, s3_client_settings
from drkit.layout import StatePath

if TYPE_CHECKING:
    from pyarrow import fs

#: A path under the state root, or a plain local path (tests, tools).
Location = StatePath | Path


def _is_remote(path: Location) -> bool:
    return isinstance(path, StatePath) and path.remote


def delta_location(path: str | StatePath) -> tuple[str, dict[str, str] | None]:
    """(table URI, delta-rs storage options) of a Delta table's path (no options for a local one)."""
    if isinstance(path, str) or not path.remote:
        return str(path), None
    uri = _uri(path)
    return str(uri), delta_options(uri, path.storage or StorageSettings())


def read_text(path: Location) -> str | None:
    """The file's text; None when it does not exist. Other failures raise OSError."""
    if not _is_remote(path):
        try:
            return Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
    filesystem, where = _remote(path)
    try:
        with filesystem.open_input_stream(where) as stream:
            data: bytes = stream.read()
    except FileNotFoundError:
        return None
    return data.decode("utf-8")


def write_text(path: Location, text: str) -> None:
    """Replace the file's content with ``text`` in one step (readers see the old or the new whole file)."""
    if not _is_remote(path):
        local = Path(path)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(local)
        return
    filesystem, where = _remote(path)
    with filesystem.open_output_stream(where) as out:
        out.write(text.encode("utf-8"))


def exists(path: Location) -> bool:
    if not _is_remote(path):
        return Path(path).exists()
    from pyarrow import fs

    filesystem, where = _remote(path)
    return bool(filesystem.get_file_info(where).type != fs.FileType.NotFound)


def make_dirs(path: Location) -> None:
    """Create the folder (and its parents) where folders exist: locally; an object store has none to make."""
    if not _is_remote(path):
        Path(path).mkdir(parents=True, exist_ok=True)


def listing(path: Location) -> list[str]:
    """The names of the files directly under the folder ``path`` (none when it does not exist)."""
    if not _is_remote(path):
        folder = Path(path)
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    from pyarrow import fs

    filesystem, where = _remote(path)
    found = filesystem.get_file_info(fs.FileSelector(where, allow_not_found=True))
    return sorted(info.base_name for info in found)


def _uri(path: Location) -> RootUri:
    found = parse_root(str(path))
    if not isinstance(found, RootUri):  # a StatePath is remote only when it holds '://'
        raise ValueError(f"{path} is not an object-store URI")
    return found


def _remote(path: Location) -> tuple[fs.FileSystem, str]:
    """The file system of a remote path's store, and the path inside it."""
    uri = _uri(path)
    settings = (path.storage if isinstance(path, StatePath) else None) or StorageSettings()
    if uri.scheme in S3_SCHEMES:
        return _s3(settings), f"{uri.authority}/{uri.key}"
    return _delta_rs(RootUri(uri.scheme, uri.authority), settings), uri.key


@functools.cache
def _s3(settings: StorageSettings) -> fs.FileSystem:
    from pyarrow import fs

    return fs.S3FileSystem(**s3_client_settings(settings))


@functools.cache
def _delta_rs(store: RootUri, settings: StorageSettings) -> fs.FileSystem:
    """Azure, GCS and HDFS through delta-rs's object_store (the same client and options as the tables)."""
    from deltalake.fs import DeltaStorageHandler
    from pyarrow import fs

    return fs.PyFileSystem(DeltaStorageHandler(str(store), delta_options(store, settings)))


def remove_tree(path: Location) -> None:
    """Delete the folder ``path`` and everything under it (nothing when it does not exist)."""
    if not _is_remote(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    from pyarrow import fs

    filesystem, where = _remote(path)
    if filesystem.get_file_info(where).type != fs.FileType.NotFound:
        filesystem.delete_dir(where)


def copy_tree(source: Location, target: Location, keep: Callable[[str], bool] = lambda relative: True) -> int:
    """Copy every file under the folder ``source`` whose path relative to it (``/``-separated) ``keep`` accepts
    to the same relative path under ``target``; how many files were copied."""
    if not _is_remote(source):
        root, copied = Path(source), 0
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and keep(relative):
                out = Path(target) / relative
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, out)
                copied += 1
        return copied
    from pyarrow import fs

    filesystem, where = _remote(source)
    _, there = _remote(target)
    prefix = where.rstrip("/") + "/"
    found = filesystem.get_file_info(fs.FileSelector(where, recursive=True, allow_not_found=True))
    wanted = [i.path for i in found if i.type == fs.FileType.File and keep(i.path[len(prefix) :])]
    # One request per object, all at once: an object store answers each in tens of milliseconds.
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(wanted)))) as pool:
        list(pool.map(lambda path: filesystem.copy_file(path, there.rstrip("/") + "/" + path[len(prefix) :]), wanted))
    return len(wanted)
