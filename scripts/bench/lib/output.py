"""How a benchmark talks: progress lines on stderr, its report as one JSON document on stdout (and optionally a
file), a Markdown table on stderr (and optionally a file). The JSON is what docs/results/ keeps."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def logger(name: str) -> Callable[[str], None]:
    """A progress printer: ``[name HH:MM:SS] message`` on stderr, flushed at once."""

    def log(message: str) -> None:
        print(f"[{name} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    return log


def to_json(report: Any) -> str:
    """The report as the benchmarks write it (anything JSON cannot hold, e.g. a path, as its str)."""
    return json.dumps(report, indent=2, default=str)


def print_json(report: Any, out: Path | None = None) -> str:
    """The report on stdout, and in ``out`` if given; returns the text."""
    text = to_json(report)
    print(text)
    if out is not None:
        out.write_text(text + "\n")
    return text


def finish_report(
    results: dict[str, Any],
    summarize: Callable[[dict[str, Any]], dict[str, Any]],
    tabulate: Callable[[dict[str, Any]], str],
    markdown: Path | None,
) -> None:
    """A run's results completed and written: their ``summary`` and Markdown table (``markdown``) added, the JSON
    on stdout, the table on stderr and in the file ``markdown`` if given."""
    results["summary"] = summarize(results)
    table = tabulate(results)
    results["markdown"] = table
    print(to_json(results))
    print(table, file=sys.stderr)
    if markdown is not None:
        markdown.write_text(table)
