"""``[state]`` with an object-store root: where each part of the state goes, and the storage secrets masked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drkit.config import MASK, load_config, masked_dump
from drkit.core.storage import RootUri, Scheme, StorageSettings

CLUSTERS = """
[clusters.A]
bootstrap_servers = "127.0.0.1:19092"

[clusters.B]
bootstrap_servers = "127.0.0.1:19102"
"""
REMOTE = """\
[state]
root = "s3a://dr-state/drkit"
{local}
[state.storage]
endpoint = "http://127.0.0.1:9000"
path_style = true
access_key_id = "AKIA-not-secret-but-masked"
secret_access_key = "${{env:DRKIT_TEST_S3_SECRET}}"
session_token = "tok-3n-value"
options = {{ "AWS_S3_ALLOW_UNSAFE_RENAME" = "true" }}
"""
SECRET = "s3cr3t-from-env"


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DRKIT_TEST_S3_SECRET", SECRET)
    monkeypatch.setenv("DRKIT_CACHE", str(tmp_path / "cache"))


def write(tmp_path: Path, local: str = "") -> Path:
    path = tmp_path / "conf" / "drkit.toml"
    path.parent.mkdir()
    path.write_text(REMOTE.format(local=local) + CLUSTERS)
    return path


def test_a_remote_root_is_a_uri_and_its_host_folder_is_per_root_in_drkits_cache(tmp_path: Path) -> None:
    config = load_config(write(tmp_path))
    uri = config.state_uri()
    assert uri == RootUri(Scheme.S3A, "dr-state", "drkit")
    assert config.state_root() == (tmp_path / "cache" / "roots" / uri.digest).resolve()
    assert not config.state_root().exists()  # loading makes no folder
    settings = config.state.storage.settings()
    assert settings == StorageSettings(
        "http://127.0.0.1:9000",
        None,
        "AKIA-not-secret-but-masked",
        SECRET,
        "tok-3n-value",
        True,
        (("AWS_S3_ALLOW_UNSAFE_RENAME", "true"),),
    )


def test_local_dir_is_relative_to_the_config_file(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, 'local_dir = "host"\n'))
    assert config.state_root() == (tmp_path / "conf" / "host").resolve()


def test_a_local_root_has_no_uri(tmp_path: Path) -> None:
    path = tmp_path / "drkit.toml"
    path.write_text('[state]\nroot = "file:///var/drkit-state"\n' + CLUSTERS)
    config = load_config(path)
    assert config.state_uri() is None and config.state_root() == Path("/var/drkit-state").resolve()


def test_config_show_masks_the_storage_keys_and_token(tmp_path: Path) -> None:
    dump = masked_dump(load_config(write(tmp_path)))
    shown = json.dumps(dump)
    for secret in (SECRET, "tok-3n-value", "AKIA-not-secret-but-masked"):
        assert secret not in shown
    storage = dump["state"]["storage"]
    assert storage["secret_access_key"] == storage["session_token"] == storage["access_key_id"] == MASK
    assert storage["endpoint"] == "http://127.0.0.1:9000"  # not a secret: shown
