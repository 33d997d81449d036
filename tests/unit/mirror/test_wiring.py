"""The wiring of a mirror job: one copy path per run, chosen once from the delivery and where copies run;
and the mirror's modules reach the store only through their ports."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.fakes import held_job, mirror_context

import drkit.mirror
from drkit.config import parse_config
from drkit.mirror.copy_exactly_once import ExactlyOnceCopy
from drkit.mirror.copy_path import AtLeastOnceCopy, ContinuousCopy


def job(tmp_path: Path, master: str, once: bool, **mirror: Any) -> Any:
    cfg = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "a:1"}, "B": {"bootstrap_servers": "b:1"}},
            "flows": [{"source": "A", "target": "B", "mirror": mirror}],
            "state": {"root": str(tmp_path / "state")},
        }
    )
    conf = {"spark.driver.host": "127.0.0.1"}
    spark = SimpleNamespace(sparkContext=SimpleNamespace(master=master, defaultParallelism=2, getConf=lambda: conf))
    return held_job(replace(mirror_context(cfg), spark=spark), cfg.flows[0], once)


@pytest.mark.parametrize(
    ("master", "once", "mirror", "path"),
    [
        ("local[2]", False, {}, ContinuousCopy),
        ("local[2]", True, {}, AtLeastOnceCopy),
        ("local[2]", False, {"continuous_copy": False}, AtLeastOnceCopy),
        ("spark://m:7077", False, {}, ContinuousCopy),
        ("spark://m:7077", True, {}, AtLeastOnceCopy),
        ("spark://m:7077", False, {"continuous_copy": False}, AtLeastOnceCopy),
        ("local[2]", False, {"delivery": "exactly_once"}, ContinuousCopy),
        ("local[2]", True, {"delivery": "exactly_once"}, ExactlyOnceCopy),
        ("local[2]", False, {"delivery": "exactly_once", "continuous_copy": False}, ExactlyOnceCopy),
        ("spark://m:7077", False, {"delivery": "exactly_once"}, ExactlyOnceCopy),
        ("spark://m:7077", True, {"delivery": "exactly_once"}, ExactlyOnceCopy),
    ],
)
def test_each_run_gets_one_copy_path(
    tmp_path: Path, master: str, once: bool, mirror: dict[str, Any], path: type
) -> None:
    assert type(job(tmp_path, master, once, **mirror).path) is path


def test_no_mirror_module_but_the_checkpoint_reader_imports_the_store() -> None:
    root = Path(drkit.mirror.__file__).parent
    importers = set()
    for module in root.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(n == "drkit.store" or n.startswith("drkit.store.") for n in names):
                importers.add(module.name)
    assert importers == {"offset_log.py"}


def test_on_a_cluster_the_copy_tasks_copy_ahead_and_a_batch_they_cannot_give_is_copied_by_the_driver(
    tmp_path: Path,
) -> None:
    from drkit.core.copying import CopyPlace
    from drkit.mirror.continuous import ContinuousCopier
    from drkit.mirror.copier_tasks import CopierTasks

    on_cluster = job(tmp_path, "spark://m:7077", False).path
    assert isinstance(on_cluster.copier, CopierTasks) and on_cluster.copier.tasks == 2  # one per executor core
    # The copy tasks hold every executor core: a job of per-batch copy tasks would never get one.
    assert all(on_cluster.own.place(n) is CopyPlace.DRIVER for n in (1, 10**9))
    assert isinstance(job(tmp_path / "local", "local[2]", False).path.copier, ContinuousCopier)
