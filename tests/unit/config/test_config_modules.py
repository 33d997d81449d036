"""drkit.config is one model per component: its modules take no private name from each other and import
each other without a circle (imports under ``if TYPE_CHECKING:`` and inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[3] / "drkit" / "config"


def _module_name(path: Path) -> str:
    parts = path.relative_to(CONFIG.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, list[tuple[str, str]]]:
    """Each config module's ``from drkit.config... import name`` pairs (module, name)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(CONFIG.rglob("*.py")):
        pairs = found.setdefault(_module_name(path), [])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("drkit.config"):
                pairs.extend((node.module, alias.name) for alias in node.names)
    return found


def test_no_private_name_crosses_a_module() -> None:
    crossing = [
        f"{module} imports {name} from {source}"
        for module, pairs in _imports().items()
        for source, name in pairs
        if name.startswith("_")
    ]
    assert crossing == []


def test_the_modules_import_each_other_without_a_circle() -> None:
    modules = _imports()
    # A package's __init__ re-exports its modules: the arrow into a package is the arrow into what it names.
    edges = {
        module: {f"{source}.{name}" if f"{source}.{name}" in modules else source for source, name in pairs}
        for module, pairs in modules.items()
        if not module.endswith(("drkit.config", ".mm2"))
    }
    state: dict[str, str] = {}

    def circle_through(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for target in sorted(edges.get(module, set())):
            if state.get(target) == "open":
                return [*path, module, target]
            if target not in state:
                found = circle_through(target, [*path, module])
                if found:
                    return found
        state[module] = "done"
        return None

    circles = [c for m in sorted(edges) if m not in state and (c := circle_through(m, [])) is not None]
    assert circles == []
