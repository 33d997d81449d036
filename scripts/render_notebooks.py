"""Execute every notebook of notebooks/ on a drkit state and render it to HTML (scripts/render-notebooks).

Each notebook runs headless in a fresh ``python3`` kernel of this virtualenv (papermill, the parameters
injected into its ``parameters`` cell); a cell error stops here with exit 1. The executed notebooks, their
HTML (nbconvert, plots embedded) and their plots as PNG (``figures/<notebook>/``) go under ``--out``
(default ``<state root>/notebooks``). The notebooks read the state only through ``drkit.service.Drkit``.

The output is this script's lines only: the kernel talks over local IPC sockets (over TCP ipykernel warns
that its traffic is unencrypted), its own stdout and stderr go to ``<out>/kernel.log``, and papermill's and
nbconvert's log lines show only with ``--verbose``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
NAMES = ("offset_mappings", "group_checkpoints", "operations", "drill_trend")

# The venv's kernelspec first: a user-level "python3" kernelspec must not run the notebooks in another Python.
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    p for p in (str(Path(sys.prefix) / "share" / "jupyter"), os.environ.get("JUPYTER_PATH")) if p
)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/render-notebooks", description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", default="drkit.toml", help="drkit config file (default drkit.toml)")
    parser.add_argument("--flow", default="A->B")
    parser.add_argument("--topic", default="demo.orders", help="source topic (offset_mappings, group_checkpoints)")
    parser.add_argument("--partition", type=int, default=0, help="partition of --topic (offset_mappings)")
    parser.add_argument("--group", default="demo-app", help="consumer group (group_checkpoints)")
    parser.add_argument("--as-of", default="", help="moment for time travel, ISO 8601 (default: inside the history)")
    parser.add_argument("--version", type=int, default=-1, help="checkpoints table version (default: one inside)")
    parser.add_argument("--out", type=Path, help="output folder (default: <state root>/notebooks)")
    parser.add_argument("--only", nargs="*", choices=NAMES, help="only these notebooks")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may run")
    parser.add_argument("--verbose", action="store_true", help="show papermill's, nbconvert's and the kernel's lines")
    parser.add_argument(
        "--strip",
        action="store_true",
        help="only strip notebooks/*.ipynb in place (outputs, execution counts and metadata; "
        "what tests/unit/test_notebooks_clean.py requires) and exit",
    )
    return parser.parse_args(argv)


def strip(path: Path) -> bool:
    """Remove outputs, execution counts, execution metadata and papermill's injected cells; True if changed."""
    import nbformat

    book = nbformat.read(path, as_version=4)
    before = nbformat.writes(book)
    book.cells = [c for c in book.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    for cell in book.cells:
        tags = [t for t in cell.metadata.get("tags", []) if t != "injected-parameters"]
        cell.metadata = nbformat.NotebookNode({"tags": tags} if tags else {})
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    book.metadata = nbformat.NotebookNode({k: v for k, v in book.metadata.items() if k == "kernelspec"})
    book.metadata["language_info"] = {"name": "python"}  # the kernel's version is not part of the source
    book.metadata.setdefault(
        "kernelspec", {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    )
    after = nbformat.writes(book)
    if after != before:
        path.write_text(after + "\n", encoding="utf-8")
    return after != before


def kernel_python() -> str:
    """The interpreter the python3 kernel starts (its kernelspec's argv[0]; "python" means this one)."""
    from jupyter_client.kernelspec import KernelSpecManager

    argv0 = KernelSpecManager().get_kernel_spec("python3").argv[0]
    return sys.executable if argv0 in {"python", "python3", f"python3.{sys.version_info.minor}"} else argv0


def kernel_manager_class(log: Path | None) -> type[Any]:
    """The kernel manager nbclient makes (and shuts down) for each notebook: IPC transport, the kernel
    process's output appended to ``log`` (None: here)."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class QuietKernel(AsyncKernelManager):  # type: ignore[misc]
        @default("transport")
        def _default_transport(self) -> str:
            return "ipc"

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            if log is None:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            with open(log, "ab") as out:  # the kernel keeps its own copy of the descriptor
                return await super()._async_launch_kernel(kernel_cmd, **{**kw, "stdout": out, "stderr": out})

    return QuietKernel


def render(args: argparse.Namespace) -> dict[str, Path]:
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    from drkit.service import Drkit

    config = Path(args.config).resolve()
    out = (args.out or Path(Drkit.from_file(str(config)).layout.root) / "notebooks").resolve()
    out.mkdir(parents=True, exist_ok=True)
    python = kernel_python()
    if Path(python).absolute().parent != Path(sys.executable).absolute().parent:  # another venv's python
        sys.exit(
            f"render-notebooks: the python3 kernel runs {python}, not {sys.executable}: "
            f"run `{sys.executable} -m ipykernel install --sys-prefix`"
        )
    html: dict[str, Path] = {}
    for name in args.only or NAMES:
        executed = out / f"{name}.ipynb"
        parameters = {
            "config": str(config),
            "flow": args.flow,
            "topic": args.topic,
            "partition": args.partition,
            "group": args.group,
            "as_of": args.as_of,
            "version": args.version,
            "figures_dir": str(out / "figures" / name),
        }
        print(f"executing notebooks/{name}.ipynb ...", flush=True)
        papermill.execute_notebook(
            str(NOTEBOOKS / f"{name}.ipynb"),
            str(executed),
            parameters=parameters,
            kernel_name="python3",
            cwd=str(NOTEBOOKS),
            progress_bar=False,
            execution_timeout=args.timeout,
            kernel_manager_class=kernel_manager_class(None if args.verbose else out / "kernel.log"),
        )
        body, _ = HTMLExporter().from_notebook_node(nbformat.read(executed, as_version=4))
        html[name] = out / f"{name}.html"
        html[name].write_text(body, encoding="utf-8")
    return html


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.strip:
        for path in sorted(NOTEBOOKS.glob("*.ipynb")):
            print(f"{path.relative_to(ROOT)}: {'stripped' if strip(path) else 'clean'}")
        return 0
    try:
        import papermill
    except ImportError:
        sys.exit("render-notebooks: papermill is missing: run scripts/setup")
    # papermill's and nbconvert's own lines (an unknown parameter, alt text missing on a plot) are for --verbose.
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(name)s: %(message)s")
    try:
        html = render(args)
    except papermill.PapermillExecutionError as exc:
        print(f"render-notebooks: a cell failed: {exc.ename}: {exc.evalue}", file=sys.stderr)
        return 1
    for name, path in html.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
