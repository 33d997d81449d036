"""A state root in an S3-compatible object store (issue 22, "an object-store root").

moto's standalone S3 server runs on loopback; ``[state] root = "s3a://BUCKET/drkit"``. The real CLI, in its
own processes as an operator runs it: ``drkit mirror --once`` over a real multi-partition topic (its Spark
streaming checkpoint through S3A, its syncs through delta-rs, its run files through pyarrow), ``drkit
checkpoint --once``, ``drkit failover`` (dry run, then ``--apply``). Every record is counted on the target,
the syncs and checkpoints are read back from the bucket, and nothing is written under a local folder named
after the URI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.kafka_io import Rec, commit, committed_on, create_topic, produce, read_all, unique
from support.object_store import ACCESS_KEY_ID, BUCKET, SECRET_ACCESS_KEY, S3Server

from drkit.config import load_config
from drkit.layout import StateLayout
from drkit.runtime.artifacts import jvm_working_dir
from drkit.store.checkpoints import CheckpointTable
from drkit.store.offset_syncs import SyncTable

RECORDS, PARTITIONS = 600, 3
COMMITTED = {0: 150, 1: 37, 2: 200}  # the group's offsets on A, per partition (each holds 200 records)


def env() -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
    return {**environ, "TEST_S3_KEY_ID": ACCESS_KEY_ID, "TEST_S3_SECRET": SECRET_ACCESS_KEY}


def drkit(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", *args, "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env(),
        cwd=config.parent,  # a root taken as a local path would land here, as 's3a:'
    )


def drkit_json(config: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = drkit(config, *args, "-o", "json")
    try:
        return done.returncode, json.loads(done.stdout)
    except ValueError:
        raise AssertionError(
            f"not JSON (exit {done.returncode}): {done.stdout[-2000:]} {done.stderr[-3000:]}"
        ) from None


def write_config(folder: Path, s3: S3Server, clusters: dict[str, str], topic: str, group: str) -> Path:
    config = folder / "drkit.toml"
    config.write_text(
        f'[state]\nroot = "s3a://{BUCKET}/drkit"\nlocal_dir = "host"\n\n'
        f'[state.storage]\nendpoint = "{s3.endpoint}"\npath_style = true\n'
        'access_key_id = "${env:TEST_S3_KEY_ID}"\nsecret_access_key = "${env:TEST_S3_SECRET}"\n\n'
        '[spark]\nmaster = "local[1]"\n\n'
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        + f"groups = {{ include = [{json.dumps(group)}] }}\n"
    )
    return config


def identity(r: Rec) -> tuple[object, ...]:
    return (r.partition, r.offset, r.key, r.value, r.timestamp)


def uri_folders(*roots: Path) -> list[Path]:
    """Local files or folders whose name starts like one of the root's URI scheme (what a root taken as a path
    makes: ``s3a:``)."""
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.name.lower().startswith(("s3a:", "s3:"))]


def test_mirror_checkpoint_and_failover_with_the_state_in_an_object_store(
    s3: S3Server, clusters: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, group = unique("s3root"), unique("s3root-app")
    create_topic(clusters["A"], topic, PARTITIONS)
    produce(
        clusters["A"],
        topic,
        [{"partition": i % PARTITIONS, "key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(RECORDS)],
    )
    commit(clusters["A"], group, {(topic, p): o for p, o in COMMITTED.items()})
    config = write_config(tmp_path, s3, clusters, topic, group)

    # -- the mirror: every record exactly once, in order --------------------------------------------
    mirror = drkit(config, "mirror", "--flow", "A->B", "--once")
    assert mirror.returncode == 0, (mirror.stdout + mirror.stderr)[-4000:]
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert len(source) == RECORDS
    assert len(target) == RECORDS, f"{len(target)} of {RECORDS} records on the target"
    assert sorted(identity(r) for r in target) == sorted(identity(r) for r in source)

    # -- the state is in the bucket, read back from it ------------------------------------------------
    keys = s3.keys(BUCKET, "drkit/")
    flow = "A_to_B"
    for expected in (
        "drkit/delta/offset_syncs/_delta_log/00000000000000000000.json",
        f"drkit/mirror/{flow}/checkpoint-1/metadata",  # the first lease epoch's (drkit.core.mirror_lease)
        f"drkit/mirror/{flow}/checkpoint-1/offsets/0",
        f"drkit/mirror/{flow}/checkpoint-1/commits/0",
        f"drkit/mirror/{flow}/batch_state.json",
        f"drkit/mirror/{flow}/source_ends.json",
    ):
        assert expected in keys, (expected, sorted(keys))
    for name, value in env().items():
        monkeypatch.setenv(name, value)  # the test reads the state as the commands do: the same config
    loaded = load_config(config)
    uri = loaded.state_uri()
    assert uri is not None and str(uri) == f"s3a://{BUCKET}/drkit"
    layout = StateLayout(loaded.state_root(), uri, loaded.state.storage.settings())
    ranges = SyncTable(layout).ranges("A->B", [topic])
    pairs = [(p, u, d) for (t, p), rs in ranges.items() if t == topic for rng in rs for u, d in rng.pairs()]
    assert len(pairs) == len({(p, d) for p, _, d in pairs}) == RECORDS, "each copy described by exactly one sync"
    source_at = {(r.partition, r.offset): r.value for r in source}
    target_at = {(r.partition, r.offset): r.value for r in target}
    assert all(source_at[(p, u)] == target_at[(p, d)] for p, u, d in pairs)

    # -- the checkpoint translator ---------------------------------------------------------------------
    checkpoint = drkit(config, "checkpoint", "--flow", "A->B", "--once")
    assert checkpoint.returncode == 0, (checkpoint.stdout + checkpoint.stderr)[-4000:]
    assert f"drkit/checkpoint/{flow}/last_run.json" in s3.keys(BUCKET, "drkit/checkpoint/")
    assert "drkit/delta/checkpoints/_delta_log/00000000000000000000.json" in s3.keys(BUCKET, "drkit/delta/")
    latest = CheckpointTable(layout).latest("A->B", [group])
    assert {(c.checkpoint.partition, c.checkpoint.upstream_offset, c.checkpoint.downstream_offset) for c in latest} == {
        (p, o, o) for p, o in COMMITTED.items()
    }

    # -- failover: a dry run changes nothing, --apply commits the translated offsets on B ---------------
    code, dry = drkit_json(config, "failover", "--flow", "A->B", "--group", group)
    assert code == 0 and dry["status"] == "dry_run", dry
    assert committed_on(clusters["B"], group, f"A.{topic}") == {}, "a dry run changed the target"
    code, applied = drkit_json(config, "failover", "--flow", "A->B", "--group", group, "--apply", "--yes")
    assert code == 0 and applied["status"] == "applied", applied
    # A fresh topic copied whole: each partition's offsets are the same on both sides.
    assert committed_on(clusters["B"], group, f"A.{topic}") == COMMITTED
    assert any(k.startswith("drkit/delta/operations/_delta_log/") for k in s3.keys(BUCKET, "drkit/delta/operations/"))

    # -- drkit maintain: delta-rs rewrites the tables in the bucket; translation unchanged ------------------
    maintain = drkit(config, "maintain", "--keep-recent-batches", "1")
    assert maintain.returncode == 0, (maintain.stdout + maintain.stderr)[-4000:]
    after = SyncTable(layout).ranges("A->B", [topic])
    assert sorted(
        (p, u, d) for (t, p), rs in after.items() if t == topic for rng in rs for u, d in rng.pairs()
    ) == sorted(pairs)

    # -- what stayed on this host, and nothing named after the URI ---------------------------------------
    host = tmp_path / "host"
    assert (host / "logs" / "spark.log").is_file()  # the JVM's output is host-local
    assert not (host / "delta").exists() and not (host / "mirror" / flow / "checkpoint").exists()
    assert uri_folders(tmp_path, Path.cwd(), Path(__file__).parents[3], jvm_working_dir()) == []
    secrets = [SECRET_ACCESS_KEY]
    for done in (mirror, checkpoint, maintain):
        assert not any(s in done.stdout + done.stderr for s in secrets)
    assert not any(s in (host / "logs" / "spark.log").read_text() for s in secrets)


def test_a_store_that_does_not_answer_is_one_line_naming_the_storage_settings(
    clusters: dict[str, str], tmp_path: Path
) -> None:
    """Nothing listens on port 1: the command says so in one line (exit 6), names what to check, shows no secret
    and makes no local folder after the URI."""
    config = write_config(tmp_path, S3Server("http://127.0.0.1:1", None), clusters, "t", "g")  # type: ignore[arg-type]
    done = drkit(config, "history")
    assert done.returncode == 6, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: Delta table operations at s3a://{BUCKET}/drkit/delta/operations cannot be read")
    assert "[state.storage] reaches it (endpoint, bucket, credentials)" in lines[0]
    assert SECRET_ACCESS_KEY not in done.stdout + done.stderr
    assert uri_folders(tmp_path) == []
