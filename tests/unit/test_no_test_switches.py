"""No module under drkit/ reads an environment variable meant for tests: a test's faults are injected
(drkit.mirror.faults), so no production process can be made to fail or kill itself by an environment variable.

Two scans of the source: every string literal (a variable's name is one wherever it is read: a constant, a
call's argument), and every read of ``os.environ`` / ``os.getenv`` whose key is a literal or a module constant.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

DRKIT = Path(__file__).resolve().parents[2] / "drkit"
#: An environment variable's name: capitals, digits and underscores.
ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9_]{2,}\b")


def _test_names_in_literals(tree: ast.AST) -> set[str]:
    return {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for name in ENV_NAME.findall(node.value)
        if "TEST" in name
    }


def _constants(trees: list[ast.Module]) -> dict[str, str]:
    """Module-level ``NAME = "value"`` of every module (the names environment reads use as keys)."""
    found: dict[str, str] = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                        found[target.id] = node.value.value
    return found


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _env_keys(tree: ast.AST) -> list[ast.expr]:
    """The key of every read: ``environ.get(k)``, ``environ.setdefault(k)``, ``environ[k]``, ``getenv(k)``,
    ``k in environ``."""
    keys: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            mapping = isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault", "pop")
            if (mapping and _is_environ(func.value)) or getattr(func, "attr", getattr(func, "id", "")) == "getenv":
                keys.append(node.args[0])
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            keys.append(node.slice)
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            keys.append(node.left)
    return keys


def _read_names(trees: list[ast.Module]) -> set[str]:
    constants = _constants(trees)
    names: set[str] = set()
    for tree in trees:
        for key in _env_keys(tree):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names.add(key.value)
            elif isinstance(key, ast.Name) and key.id in constants:
                names.add(constants[key.id])
    return names


@functools.cache
def _trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(DRKIT.rglob("*.py"))}


def test_no_string_in_drkit_names_a_test_variable() -> None:
    found = {str(p.relative_to(DRKIT.parent)): n for p, t in _trees().items() if (n := _test_names_in_literals(t))}
    assert found == {}, f"drkit names test-only variables (inject a drkit.mirror.faults plan instead): {found}"


def test_no_environment_read_in_drkit_is_of_a_test_variable() -> None:
    names = _read_names(list(_trees().values()))
    # The scan sees drkit's real reads (a literal key, a module constant's): it can find one.
    assert {"DRKIT_MIRROR_TASK_TIMING", "PYSPARK_SUBMIT_ARGS", "DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL"} <= names, names
    assert sorted(n for n in names if "TEST" in n) == []


def test_the_scans_find_the_switches_drkit_had() -> None:
    before = ast.parse(
        'import os\nKILL_AT_ENV = "DRKIT_TEST_KILL_AT"\n'
        "kill = os.environ.get(KILL_AT_ENV)\n"
        'once = os.environ["DRKIT_TEST_FAIL_COPY_TASK_ONCE"]\n'
    )
    assert _read_names([before]) == {"DRKIT_TEST_KILL_AT", "DRKIT_TEST_FAIL_COPY_TASK_ONCE"}
    assert _test_names_in_literals(before) == {"DRKIT_TEST_KILL_AT", "DRKIT_TEST_FAIL_COPY_TASK_ONCE"}
    assert _test_names_in_literals(ast.parse('LATEST_OFFSET = "latestOffset"')) == set()
