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
        ("local[2]", False, {"delivery": "exactly_once"}, ExactlyOnceCopy),
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
