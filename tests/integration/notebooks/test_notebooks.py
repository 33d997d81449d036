"""Every notebook of notebooks/ runs headless against real state and draws non-empty plots.

A real mirror (Spark) copies a topic with committed and aborted transactions (gaps upstream: markers and
aborted records) in two batches, the translator checkpoints a group twice, and the group is failed over
(a dry run, then applied). Then scripts/render-notebooks executes each notebook with papermill, its
parameters injected, and renders it to HTML: any cell error fails (the script exits 1), each notebook
saves its plots as PNG and refuses to save an empty one, and this test checks every PNG has content and
that offset_mappings listed the gap. The notebooks read only through the facade, which reads the tables'
columns by name: a store column renamed without updating them fails here (and in the unit tests).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Producer
from support.drill_reports import drill_report
from support.kafka_io import commit, committed_on, create_topic, produce, unique

from drkit.config import DrkitConfig
from drkit.service import Drkit
from drkit.store.drills import DrillLog

ROOT = Path(__file__).resolve().parents[3]
FIGURES = {
    "offset_mappings": ["offset_mappings", "mapping_density"],
    "group_checkpoints": ["group_checkpoints", "failover_plan"],
    "operations": ["operations"],
    "drill_trend": ["drill_trend"],
}
#: Drills of the last week as the drills table holds them (drkit drill run's rows): (days ago, lost, RTO ms).
DRILLS = [
    (6.5, False, 1400),
    (5.5, False, 1500),
    (4.5, True, 1600),
    (3.5, False, 1450),
    (2.5, False, 1500),
    (1.5, False, 1550),
    (0.5, False, 4200),
    (0.1, False, 4600),
]


def transactions(bootstrap: str, topic: str, batches: list[tuple[bool, int]]) -> None:
    """Transactions of (commit?, size) records on partition 0."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"nb-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for n, (commit_it, size) in enumerate(batches):
        producer.begin_transaction()
        for i in range(size):
            producer.produce(topic, key=f"t{n}-{i}".encode(), value=f"t{n}-{i}".encode(), partition=0)
        producer.flush(30)
        if commit_it:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def plain(bootstrap: str, topic: str, n: int, tag: str) -> None:
    produce(
        bootstrap,
        topic,
        [{"partition": i % 2, "key": f"{tag}{i}".encode(), "value": f"{tag}{i}".encode()} for i in range(n)],
    )


def has_content(png: Path) -> bool:
    """More than a blank canvas: many distinct colours (axes, lines, text) and more than a few KB."""
    import matplotlib.image

    pixels = matplotlib.image.imread(str(png))
    colours = np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
    return png.stat().st_size > 8_000 and len(colours) > 50


def test_notebooks_run_on_real_state(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    started = time.monotonic()
    topic, group = unique("nb-orders"), unique("nb-billing")
    create_topic(clusters["A"], topic, 2)
    # Partition 0: 0-4 committed, 5 marker, 6-9 aborted, 10 marker, 11-13 committed, 14 marker, then plain.
    transactions(clusters["A"], topic, [(True, 5), (False, 4), (True, 3)])
    plain(clusters["A"], topic, 20, "a")
    flows = [{"source": "A", "target": "B", "topics": {"include": [topic]}, "groups": {"include": [group]}}]
    config = make_config(flows)
    toml = tmp_path / "drkit.toml"
    toml.write_text(
        f"[state]\nroot = {json.dumps(str(config.state_root()))}\n\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        f"groups = {{ include = [{json.dumps(group)}] }}\n"
    )
    service = Drkit(config, spark)

    commit(clusters["A"], group, {(topic, 0): 3, (topic, 1): 4})
    service.mirror(None, once=True)
    service.translate(None, once=True)
    version = service.table_versions("checkpoints").versions[-1].version
    # On purpose: the rendering below is another process that reads with the wall clock (the syncs' times
    # too), so the two runs' rows straddle a real instant rather than an injected clock's.
    time.sleep(1.5)
    between = datetime.now(UTC)
    time.sleep(1.5)
    plain(clusters["A"], topic, 20, "b")
    commit(clusters["A"], group, {(topic, 0): 12, (topic, 1): 15})
    service.mirror(None, once=True)
    service.translate(None, once=True)
    assert service.failover("A->B", [group]).status == "dry_run"
    assert service.failover("A->B", [group], apply=True).status == "applied"
    assert committed_on(clusters["B"], group, f"A.{topic}") == {0: 6, 1: 15}  # 12 -> 6: 5..10 never copied
    now_ms = int(time.time() * 1000)
    drills = DrillLog(service.layout)
    for i, (days, lost, rto_ms) in enumerate(DRILLS):
        drills.append(drill_report(f"nb-drill-{i}", "nightly", now_ms - int(days * 86_400_000), lost, rto_ms))
    print(f"state made in {time.monotonic() - started:.0f}s")

    out = tmp_path / "rendered"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "render_notebooks.py"),
            "-c",
            str(toml),
            "--flow",
            "A->B",
            "--topic",
            topic,
            "--partition",
            "0",
            "--group",
            group,
            "--as-of",
            between.isoformat(),
            "--version",
            str(version),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    print(f"state made and notebooks rendered in {time.monotonic() - started:.0f}s")
    # The script's own lines only: no kernel warning (IPC, not TCP; the kernel's output is in kernel.log), no
    # papermill or nbconvert line.
    assert proc.stderr == "", proc.stderr[-3000:]
    own = [f"executing notebooks/{name}.ipynb ..." for name in FIGURES] + [f"{n}: {out / n}.html" for n in FIGURES]
    assert sorted(proc.stdout.splitlines()) == sorted(own), proc.stdout

    for name, figures in FIGURES.items():
        executed = json.loads((out / f"{name}.ipynb").read_text())
        errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert errors == [], f"{name}: {errors}"
        assert any("image/png" in o.get("data", {}) for c in executed["cells"] for o in c.get("outputs", [])), name
        html = (out / f"{name}.html").read_text()
        assert "data:image/png;base64" in html, f"{name}.html has no plot"
        for figure in figures:
            png = out / "figures" / name / f"{figure}.png"
            assert png.exists() and has_content(png), f"{png} is missing or empty"

    with (out / "figures" / "offset_mappings" / "gaps.csv").open() as f:
        gaps = [(g["kind"], int(g["partition"]), int(g["first"]), int(g["last"])) for g in csv.DictReader(f)]
    assert ("upstream", 0, 5, 10) in gaps, gaps  # the aborted transaction and both markers around it
    assert ("upstream", 0, 14, 14) in gaps, gaps  # the last commit marker
    assert service.history("A->B").operations[0].result["status"] == "applied"  # the notebooks audited nothing
    assert len(service.history("A->B").operations) == 2
    assert [d.id for d in service.drill_history(100).drills] == [f"nb-drill-{i}" for i in reversed(range(len(DRILLS)))]
