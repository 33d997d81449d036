"""A flow's folder name is its own: no two flow names share a folder, a lock or a Spark checkpoint."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.storage import RootUri, Scheme, StorageSettings
from drkit.layout import JobKind, StateLayout, flow_dir_name, legacy_flow_dir_name

#: Cluster aliases as the config allows them (drkit.config.clusters).
aliases = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,12}", fullmatch=True)
flows = st.builds(lambda s, t: f"{s}->{t}", aliases, aliases)


def _decode(name: str) -> str:
    """The inverse of flow_dir_name, written from its docstring: the proof that it is injective."""
    out, i = [], 0
    while i < len(name):
        if name[i] != "_":
            out.append(name[i])
            i += 1
        elif name.startswith("__", i):
            out.append("_")
            i += 2
        elif name.startswith("_to_", i):
            out.append("->")
            i += 4
        else:
            end = name.index("_", i + 1)
            out.append(chr(int(name[i + 1 : end], 16)))
            i = end + 1
    return "".join(out)


@given(st.text())
def test_any_name_decodes_back_so_no_two_share_a_folder(flow: str) -> None:
    assert _decode(flow_dir_name(flow)) == flow


@given(st.text(), st.text())
def test_two_names_never_share_a_folder(a: str, b: str) -> None:
    if a != b:
        assert flow_dir_name(a) != flow_dir_name(b)


@given(st.text())
def test_the_folder_name_is_safe_on_any_file_system(flow: str) -> None:
    name = flow_dir_name(flow)
    assert re.fullmatch(r"[A-Za-z0-9_-]*", name)
    assert name not in (".", "..")


@given(flows)
def test_a_configured_flow_gets_one_path_component(flow: str) -> None:
    path = StateLayout(Path("/s")).job_dir(JobKind.MIRROR, flow)
    assert path.parent == Path("/s/mirror")
    assert path.name == flow_dir_name(flow)


def test_the_names_the_issue_found_colliding_differ_now() -> None:
    assert legacy_flow_dir_name("a_to->b") == legacy_flow_dir_name("a->to_b") == "a_to_to_b"
    assert flow_dir_name("a_to->b") == "a__to_to_b"
    assert flow_dir_name("a->to_b") == "a_to_to__b"


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,12}", fullmatch=True), aliases)
def test_flows_without_underscores_keep_their_folder_of_earlier_versions(source: str, target: str) -> None:
    flow = f"{source}->{target.replace('_', '-')}"
    assert flow_dir_name(flow) == legacy_flow_dir_name(flow)


# -- a state root in an object store (issue 22) ---------------------------------------------------------

REMOTE = StateLayout(Path("/host/dir"), RootUri(Scheme.S3A, "bucket", "drkit"), StorageSettings(region="eu-west-1"))


def test_a_remote_roots_state_is_under_its_uri_and_what_is_host_local_under_the_host_folder() -> None:
    assert str(REMOTE.offset_syncs) == "s3a://bucket/drkit/delta/offset_syncs"
    assert str(REMOTE.stream_checkpoint("A->B")) == "s3a://bucket/drkit/mirror/A_to_B/checkpoint"
    assert (
        str(REMOTE.source_ends(JobKind.TRANSLATOR, "A->B")) == "s3a://bucket/drkit/checkpoint/A_to_B/source_ends.json"
    )
    assert str(REMOTE.translator_last_run("A->B")) == "s3a://bucket/drkit/checkpoint/A_to_B/last_run.json"
    assert REMOTE.job_lock(JobKind.MIRROR, "A->B") == Path("/host/dir/mirror/A_to_B/lock")
    assert REMOTE.pid_file(JobKind.MIRROR, "A->B") == Path("/host/dir/mirror/A_to_B/pid")
    assert REMOTE.spark_log == Path("/host/dir/logs/spark.log")
    assert REMOTE.drill_dir("d1") == Path("/host/dir/drills/d1")
    assert REMOTE.where == "s3a://bucket/drkit"
    assert REMOTE.offset_syncs.storage == StorageSettings(region="eu-west-1")  # the settings travel with the path


def test_a_remote_path_has_no_local_file_name() -> None:
    checkpoint = REMOTE.stream_checkpoint("A->B")
    assert checkpoint.remote
    with pytest.raises(TypeError, match="object store"):
        Path(checkpoint)
    with pytest.raises(TypeError):
        open(checkpoint / "metadata")  # noqa: SIM115


def test_a_local_roots_state_paths_are_its_folders() -> None:
    local = StateLayout(Path("/s"))
    assert Path(local.stream_checkpoint("A->B")) == local.job_dir(JobKind.MIRROR, "A->B") / "checkpoint"
    assert Path(local.offset_syncs) == Path("/s/delta/offset_syncs")
    assert not local.offset_syncs.remote and local.where == "/s"


@given(st.lists(st.from_regex(r"[a-z0-9_.-]{1,6}", fullmatch=True), min_size=1, max_size=4))
def test_a_state_path_joins_and_splits_like_a_path(parts: list[str]) -> None:
    path = REMOTE.store
    for part in parts:
        path = path / part
    assert path.name == parts[-1]
    assert str(path.parent) == "/".join(["s3a://bucket/drkit", *parts[:-1]])
    local = StateLayout(Path("/s")).store
    for part in parts:
        local = local / part
    assert Path(local) == Path("/s", *parts)
