"""notebooks/ is kept without outputs, each notebook has its papermill parameters and reads only the facade.

Strip the notebooks after working on them in Jupyter with ``scripts/render-notebooks --strip`` (outputs,
execution counts, execution metadata, papermill's injected cells); scripts/render-notebooks itself writes
the executed copies under the state folder, never here.
That they run, against real state, is tests/integration/notebooks/test_notebooks.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ["drill_trend", "group_checkpoints", "offset_mappings", "operations"]
PARAMETERS = ["config", "flow", "topic", "partition", "group", "as_of", "version", "figures_dir"]


def load(name: str) -> dict[str, Any]:
    return json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))


def test_the_notebooks_are_there() -> None:
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_no_outputs_and_no_execution_metadata(name: str) -> None:
    book = load(name)
    for n, cell in enumerate(book["cells"]):
        where = f"notebooks/{name}.ipynb cell {n}: run scripts/render-notebooks --strip"
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{where}: has outputs"
            assert cell.get("execution_count") is None, f"{where}: has an execution count"
        assert set(cell.get("metadata", {})) <= {"tags"}, f"{where}: has execution metadata {cell['metadata']}"
    assert set(book["metadata"]) <= {"kernelspec", "language_info"}, f"notebooks/{name}.ipynb: notebook metadata"
    assert book["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("name", NAMES)
def test_opens_with_text_then_a_parameters_cell_and_reads_only_the_facade(name: str) -> None:
    cells = load(name)["cells"]
    assert cells[0]["cell_type"] == "markdown" and "point it at your own state" in "".join(cells[0]["source"])
    [parameters] = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assigned = re.findall(r"^(\w+) = ", "".join(parameters["source"]), re.M)
    assert assigned == PARAMETERS
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    imports = set(re.findall(r"^\s*(?:from|import) (drkit[\w.]*)", code, re.M))
    assert imports == {"drkit.service"}, f"notebooks/{name}.ipynb imports {imports}: read through the facade only"
