"""Files under the state root (drkit.store.files): one module for local paths and object-store URIs."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.core.storage import RootUri, Scheme, StorageSettings
from drkit.layout import StateLayout
from drkit.store import files


def test_a_local_file_is_written_whole_and_read_back(tmp_path: Path) -> None:
    path = StateLayout(tmp_path / "state").store / "mirror" / "f" / "x.json"
    assert files.read_text(path) is None and not files.exists(path)
    files.write_text(path, '{"a": 1}')
    assert files.read_text(path) == '{"a": 1}' and files.exists(path)
    files.write_text(path, "{}")
    assert Path(path).read_text() == "{}"
    assert files.listing(path.parent) == ["x.json"]  # the temporary file was renamed over it
    assert files.listing(path.parent / "none") == []


def test_make_dirs_makes_local_folders_only(tmp_path: Path) -> None:
    local = StateLayout(tmp_path / "state").store / "a" / "b"
    files.make_dirs(local)
    assert Path(local).is_dir()
    remote = StateLayout(tmp_path / "host", RootUri(Scheme.S3A, "bucket", "x")).store / "a"
    files.make_dirs(remote)  # nothing to make in an object store, and no local folder named after it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_a_delta_tables_location_carries_its_options() -> None:
    settings = StorageSettings(endpoint="http://127.0.0.1:9", access_key_id="i", secret_access_key="s")
    layout = StateLayout(Path("/h"), RootUri(Scheme.S3A, "bucket", "x"), settings)
    uri, options = files.delta_location(layout.offset_syncs)
    assert uri == "s3a://bucket/x/delta/offset_syncs"
    assert options is not None and options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
    assert files.delta_location(StateLayout(Path("/h")).offset_syncs) == ("/h/delta/offset_syncs", None)
    assert files.delta_location("/plain/path") == ("/plain/path", None)


def test_an_unreachable_store_is_an_os_error_not_a_missing_file() -> None:
    # Nothing listens on port 1: the read fails, and is not taken for "no such file" (a run file that exists
    # in the store must not read as absent because the store did not answer).
    settings = StorageSettings(endpoint="http://127.0.0.1:1", access_key_id="i", secret_access_key="s", path_style=True)
    path = StateLayout(Path("/h"), RootUri(Scheme.S3A, "bucket", "x"), settings).store / "f.json"
    with pytest.raises(OSError):
        files.read_text(path)
