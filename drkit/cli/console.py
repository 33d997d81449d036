"""The one place that writes to the terminal (Rich) or prints JSON.

Commands build plain data and hand it here with a function that turns it into Rich renderables;
``--output json`` prints the same data as JSON instead, so scripts and humans see one truth.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, TextIO, TypeVar

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table

T = TypeVar("T")

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)

#: The width of tables when stdout is not a terminal: wide enough for any row, so a script or a file gets
#: whole rows (Rich would otherwise cut them at 80 columns); tables take only the width they need.
PIPE_WIDTH = 100_000

#: Where the JSON document goes with ``--output json`` (see :func:`json_stdout`); None: sys.stdout.
_json_out: TextIO | None = None


class Output(StrEnum):
    text = "text"
    json = "json"


def emit(
    data: T,
    output: Output,
    render: Callable[[T], Iterable[RenderableType]] | None = None,
    as_json: Callable[[T], Any] | None = None,
) -> None:
    """Render ``data`` for a person, or print it as JSON: ``as_json(data)``, else its ``as_dict()``."""
    if output is Output.json or render is None:
        if as_json is not None:
            payload = as_json(data)
        else:
            to_dict = getattr(data, "as_dict", None)
            payload = to_dict() if callable(to_dict) else data
        # Indented for a person at a terminal; one line for a pipe, where Python's C encoder writes it
        # several times faster (a failover of a thousand groups is megabytes of JSON).
        indent = 2 if stdout.is_terminal else None
        _write_json(json.dumps(_finite(payload), indent=indent, sort_keys=False, default=str, allow_nan=False))
        return
    console = stdout if stdout.is_terminal else Console(soft_wrap=True, width=PIPE_WIDTH)
    for renderable in render(data):
        console.print(renderable)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float as null: Python writes them as NaN/Infinity, which is not JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def error(message: str, output: Output = Output.text, code: int = 1) -> None:
    """One line on stderr; with ``--output json`` also ``{"error": ..., "exit_code": ...}`` on stdout."""
    if output is Output.json:
        _write_json(json.dumps({"error": message, "exit_code": code}))
    stderr.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True)


def note(message: str) -> None:
    """One plain line on stderr (what goes with an error line: where to read more)."""
    stderr.print(escape(message), highlight=False, markup=True, soft_wrap=True)


def _write_json(document: str) -> None:
    out = _json_out or sys.stdout
    out.write(document + "\n")
    out.flush()


@contextmanager
def json_stdout(enabled: bool) -> Iterator[None]:
    """With ``--output json``: stdout holds the JSON document and nothing else.

    Why at the file-descriptor level: the Spark JVM and native libraries (delta-rs, librdkafka) write to
    fd 1 directly, and a library may ``print``. While the command runs, fd 1 and ``sys.stdout`` point at
    stderr; the document is written to a copy of the original stdout. When stdout has no descriptor
    (captured, as in tests) nothing else can write to it and it is used as it is.
    """
    global _json_out
    try:
        fd = sys.stdout.fileno() if enabled else -1
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd < 0:
        yield
        return
    sys.stdout.flush()
    original = sys.stdout
    saved = os.dup(fd)
    os.dup2(sys.stderr.fileno(), fd)
    document = open(saved, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (closed below)
    _json_out, sys.stdout = document, sys.stderr
    try:
        yield
    finally:
        document.flush()
        sys.stdout.flush()
        os.dup2(saved, fd)
        _json_out, sys.stdout = None, original
        document.close()
        os.close(saved)


def table(title: str, columns: list[str], rows: Iterable[Iterable[Any]]) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        t.add_column(column)
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    return t


class Progress:
    """A Rich spinner on stderr for long operations (text output on a terminal only)."""

    def __init__(self, message: str, output: Output) -> None:
        self._status = stderr.status(message) if output is Output.text and stderr.is_terminal else None

    def __enter__(self) -> Progress:
        if self._status is not None:
            self._status.__enter__()
        return self

    def update(self, message: str) -> None:
        if self._status is not None:
            self._status.update(message)

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
