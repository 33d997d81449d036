"""The side lane holds no test that needs a session fixture: those start once, in the main lane's worker
(tests/support/lanes.py); a side-lane module asking for one would start a second copy on the same ports."""

from __future__ import annotations

import ast
from pathlib import Path

from support.lanes import MAIN_LANE, SIDE_LANE, SIDE_PREFIXES, lane

ROOT = Path(__file__).resolve().parents[2]


def _session_fixtures() -> set[str]:
    """Every fixture the integration conftests define with ``scope="session"``, and those built on them."""
    names: set[str] = set()
    defs: dict[str, set[str]] = {}
    for conftest in (ROOT / "tests" / "integration").rglob("conftest.py"):
        for node in ast.walk(ast.parse(conftest.read_text())):
            if isinstance(node, ast.FunctionDef):
                defs[node.name] = {a.arg for a in node.args.args}
                if "session" in ast.unparse(node.decorator_list[0]) if node.decorator_list else False:
                    names.add(node.name)
    grown = True
    while grown:  # a fixture taking a session fixture (make_config, cluster_config) needs it as well
        more = {name for name, args in defs.items() if args & names} - names
        grown, names = bool(more), names | more
    return names


def _arguments(module: Path) -> set[str]:
    """The parameters of the module's tests and fixtures (its other functions' parameters are no fixtures)."""
    return {
        a.arg
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.FunctionDef)
        and (node.name.startswith("test_") or any("fixture" in ast.unparse(d) for d in node.decorator_list))
        for a in node.args.args
    }


def test_no_side_lane_module_takes_a_session_fixture() -> None:
    session = _session_fixtures()
    assert {"clusters", "spark", "make_config", "spark_cluster", "secure"} <= session
    side = [p for p in SIDE_PREFIXES if p.startswith("tests/integration/")]
    assert side, "no integration module in the side lane"
    for prefix in side:
        module = ROOT / prefix
        assert module.is_file(), f"{prefix}: no such module"
        assert not _arguments(module) & session, f"{prefix} takes {sorted(_arguments(module) & session)}"


def test_the_lanes_of_node_ids() -> None:
    assert lane("tests/unit/core/test_translate.py::test_x") == SIDE_LANE
    assert lane("tests/integration/mirror/test_long_outage.py::test_x") == SIDE_LANE
    assert lane("tests/integration/mirror/test_standby.py::test_x[exactly_once]") == MAIN_LANE
