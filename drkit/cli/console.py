"""The one place that writes to the terminal (Rich) or prints JSON.

Commands build plain data and hand it here with a function that turns it into Rich renderables;
``--output json`` prints the same data as JSON instead, so scripts and humans see one truth.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, TypeVar

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table

T = TypeVar("T")

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)


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
        sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
        sys.stdout.flush()
        return
    for renderable in render(data):
        stdout.print(renderable)


def error(message: str, output: Output = Output.text, code: int = 1) -> None:
    if output is Output.json:
        sys.stdout.write(json.dumps({"error": message, "exit_code": code}) + "\n")
        sys.stdout.flush()
    stderr.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True)


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
