"""drkit.core stays pure: no Spark, Delta, Kafka client, CLI or pydantic imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import drkit.core

CORE = Path(drkit.core.__file__).resolve().parent
BANNED = frozenset({"pyspark", "delta", "confluent_kafka", "typer", "rich", "pydantic", "py4j"})
_DYNAMIC = frozenset({"import_module", "__import__"})


def banned_imports(source: str, filename: str = "<string>") -> list[str]:
    """Banned modules imported by ``source``: import statements anywhere (including inside
    functions and ``if TYPE_CHECKING:``) and importlib.import_module / __import__ with a literal."""
    found: list[str] = []

    def check(module: str) -> None:
        if module.split(".")[0] in BANNED:
            found.append(module)

    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                check(node.module)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if (
                name in _DYNAMIC
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                check(node.args[0].value)
    return found


def core_files() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def test_core_files_found() -> None:
    names = {p.name for p in core_files()}
    assert {"__init__.py", "offsets.py", "translate.py", "policy.py", "selection.py"} <= names


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_is_pure(path: Path) -> None:
    assert banned_imports(path.read_text(encoding="utf-8"), str(path)) == []


@pytest.mark.parametrize(
    "source",
    [
        "import pyspark",
        "import pyspark.sql.functions as F",
        "from pyspark.sql import DataFrame",
        "from delta.tables import DeltaTable",
        "import confluent_kafka",
        "from confluent_kafka.admin import AdminClient",
        "import typer",
        "from rich.console import Console",
        "from pydantic import BaseModel",
        "import py4j.java_gateway",
        "import os, rich",
        "def f():\n    import pyspark\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pydantic import BaseModel\n",
        "try:\n    import confluent_kafka\nexcept ImportError:\n    pass\n",
        "import importlib\nimportlib.import_module('pyspark.sql')\n",
        "__import__('typer')",
    ],
)
def test_checker_catches_banned_imports(source: str) -> None:
    assert banned_imports(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "import re",
        "from dataclasses import dataclass",
        "from drkit.core.offsets import SyncRange",
        "from . import offsets",
        "from .delta import x",  # relative: a sibling module, not the delta package
        "import richtext",  # only whole top-level names count
        "import deltalake_like",
        "import pydantic_core_like",
    ],
)
def test_checker_allows_other_imports(source: str) -> None:
    assert banned_imports(source) == []


def test_importing_core_loads_no_banned_module() -> None:
    code = (
        "import sys, drkit.core.offsets, drkit.core.translate, drkit.core.policy, drkit.core.selection\n"
        f"banned = {sorted(BANNED)!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in banned))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
