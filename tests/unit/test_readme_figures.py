"""Every figure README.md quotes comes from a file in the repo, or is dated next to it.

The rule, so that a figure copied by hand and left behind by a newer measurement fails here:

* **A figure** is a number followed by a unit of measurement, in README's prose or tables: a duration
  (``us``, ``ms``, ``s``, ``seconds``, ``minutes``, ``hours``), a size (``KB``, ``MB``, ``GB``), a rate
  (``records/s``, ``rec/s``, ``MB/s``, ``N/s``), a ratio (``4.4x``), a percentage, or a count of
  ``records``, ``rows``, ``ranges``, ``offsets``, ``groups``, ``group-partitions`` or ``partitions``.
  Thousands separators and an ``M``/``k`` multiplier are read (``8.64M rows``); in a range ``0.94-1.05 s``
  both ends are figures.
* **Not figures**: anything inside code (backticks, fenced blocks: commands, flags, config keys and
  values); and settings, bounds and constants: a number whose clause (the text since the last ``.``,
  ``;``, ``:``, ``|`` or line start) holds one of the words in ``SETTING_WORDS`` ("default", "every",
  "at least", "under", "<", ...). Port numbers carry no unit, so they are never figures.
* **Sourced**: the figure, at the precision README prints it, equals a figure of the same dimension in
  ``docs/performance.md`` (read with the same extraction), or a number in a JSON under ``docs/results``
  that its paragraph names (``docs/results/x.json``; the number's unit from its key: ``*seconds`` s,
  ``*_ms`` ms, ``*_mb`` MB, other keys counts; a JSON holds hundreds of timings, so it sources only the
  paragraph that cites it): README's ``0.72 s`` is sourced by ``721.4 ms``, ``0.77 GB`` by ``769 MB``,
  ``4.4x`` by ``4.38x``, never by ``0.8 s`` or by a count.
* **Dated**: its paragraph holds a date (``2026-11-25``); a table's paragraph is the table and the
  paragraph right above it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SOURCES = REPO / "docs" / "performance.md"
RESULTS = REPO / "docs" / "results"

#: unit -> (dimension, factor to the dimension's base unit)
UNITS: dict[str, tuple[str, Decimal]] = {
    "us": ("time", Decimal("0.000001")),
    "ms": ("time", Decimal("0.001")),
    "s": ("time", Decimal(1)),
    "second": ("time", Decimal(1)),
    "seconds": ("time", Decimal(1)),
    "minute": ("time", Decimal(60)),
    "minutes": ("time", Decimal(60)),
    "hour": ("time", Decimal(3600)),
    "hours": ("time", Decimal(3600)),
    "KB": ("size", Decimal(1000)),
    "MB": ("size", Decimal(1000**2)),
    "GB": ("size", Decimal(1000**3)),
    "MB/s": ("bandwidth", Decimal(1)),
    "records/s": ("rate", Decimal(1)),
    "rec/s": ("rate", Decimal(1)),
    "/s": ("rate", Decimal(1)),
    "x": ("ratio", Decimal(1)),
    "%": ("percent", Decimal(1)),
    **{
        w: ("count", Decimal(1))
        for w in ("records", "rows", "ranges", "offsets", "groups", "group-partitions", "partitions")
    },
}
#: Words that make a number in their clause a setting, a bound or a constant, not a measurement.
SETTING_WORDS = (
    "default",
    "every",
    "at least",
    "at most",
    "up to",
    "under",
    "below",
    "above",
    "<",
    ">",
    "minimum",
    "maximum",
    "limit",
    "timeout",
    "interval",
    "holds for",
    "in batches of",
    "per batch",
    "a day of",
)
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
_unit_alternatives = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
FIGURE = re.compile(
    rf"(?<![\w.,/-]){NUMBER}(?:-{NUMBER})?\s?([Mk])?\s?({_unit_alternatives})(?![\w/])",
)
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


@dataclass(frozen=True)
class Figure:
    text: str
    dimension: str
    value: Decimal  # in the dimension's base unit
    quantum: Decimal  # the precision it is printed at, in the base unit

    def sourced_by(self, other: Decimal) -> bool:
        """``other`` (base unit), printed at this figure's precision, is this figure."""
        return (other / self.quantum).quantize(Decimal(1), rounding="ROUND_HALF_UP") * self.quantum == self.value


def _figures(text: str) -> list[Figure]:
    out = []
    for m in FIGURE.finditer(text):
        multiplier = {"M": Decimal(10**6), "k": Decimal(1000), None: Decimal(1)}[m.group(3)]
        dimension, factor = UNITS[m.group(4)]
        for raw in (m.group(1), m.group(2)):
            if raw is None:
                continue
            number = Decimal(raw.replace(",", ""))
            exponent = number.as_tuple().exponent
            assert isinstance(exponent, int)
            quantum = Decimal(1).scaleb(exponent) * multiplier * factor
            out.append(Figure(m.group(0), dimension, number * multiplier * factor, quantum))
    return out


def _without_code(text: str) -> str:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "``", text)


def _clauses(line: str) -> list[str]:
    # A '.' ends a clause only before a space or the end (not inside 1.43), likewise ':'.
    return [c for c in re.split(r"\.(?=\s|$)|[;|]|:(?=\s)", line) if c.strip()]


def paragraphs(text: str) -> list[str]:
    """``text`` in paragraphs (code blocks removed, code spans kept); a table joins the paragraph above it."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    blocks = [b for b in re.split(r"\n\s*\n", text) if b.strip()]
    out: list[str] = []
    for block in blocks:
        if block.lstrip().startswith("|") and out and not out[-1].lstrip().startswith("#"):
            out[-1] += "\n" + block
        else:
            out.append(block)
    return out


def quoted_figures(paragraph: str) -> list[Figure]:
    found = []
    # Lines joined: a figure may be wrapped ("2,000\nrecords/s"); table cells are clauses of their own.
    lines = [ln for ln in _without_code(paragraph).splitlines() if not re.fullmatch(r"\s*\|?[\s|:-]+\|?\s*", ln)]
    for line in [" ".join(lines)]:
        for clause in _clauses(line):
            lowered = clause.lower()
            if any(w in lowered for w in SETTING_WORDS):
                continue
            found.extend(_figures(clause))
    return found


def _json_numbers(data: Any, key: str = "") -> list[tuple[str, Decimal]]:
    if isinstance(data, dict):
        return [n for k, v in data.items() for n in _json_numbers(v, k)]
    if isinstance(data, list):
        return [n for v in data for n in _json_numbers(v, key)]
    if isinstance(data, bool) or not isinstance(data, int | float):
        return []
    value = Decimal(str(data))
    if key.endswith("seconds"):
        return [("time", value)]
    if key.endswith("_ms"):
        return [("time", value / 1000)]
    if key.endswith("_mb"):
        return [("size", value * 1000**2)]
    return [("count", value)]


Values = dict[str, list[Decimal]]


def document_values() -> Values:
    values: Values = {}
    for f in _figures(SOURCES.read_text()):
        values.setdefault(f.dimension, []).append(f.value)
    return values


def result_values() -> dict[str, Values]:
    """Per results JSON (by its path in the repo), its numbers by dimension."""
    out: dict[str, Values] = {}
    for path in sorted(RESULTS.glob("*.json")):
        values: Values = {}
        for dimension, value in _json_numbers(json.loads(path.read_text())):
            values.setdefault(dimension, []).append(value)
        out[str(path.relative_to(REPO))] = values
    return out


def unsourced(paras: list[str], document: Values, results: dict[str, Values] | None = None) -> list[str]:
    missing = []
    for paragraph in paras:
        if DATE.search(paragraph):
            continue
        cited = [v for name, v in (results or {}).items() if name in paragraph]
        for figure in quoted_figures(paragraph):
            candidates = document.get(figure.dimension, []) + [x for v in cited for x in v.get(figure.dimension, [])]
            if not any(figure.sourced_by(v) for v in candidates):
                missing.append(figure.text)
    return missing


def test_every_figure_in_the_readme_is_sourced_or_dated() -> None:
    paras = paragraphs(README.read_text())
    assert sum(len(quoted_figures(p)) for p in paras) >= 30  # the extraction finds the figures
    assert unsourced(paras, document_values(), result_values()) == []


SOURCES_FOR_TESTS: Values = {
    "time": [Decimal("0.7214"), Decimal("16.27")],
    "size": [Decimal(769 * 10**6)],
    "ratio": [Decimal("4.38")],
}


@pytest.mark.parametrize(
    "paragraph, missing",
    [
        ("drkit's p50 was 0.72 s and its start-up 16 s; peak RSS 0.77 GB, 4.4x MirrorMaker 2", []),
        ("drkit's p50 was 721.4 ms", []),
        ("the p99 was 13 s (MirrorMaker 2: 1.2 s)", ["13 s", "1.2 s"]),
        ("drkit's p50 was 0.8 s", ["0.8 s"]),  # 0.7214 printed at one decimal is 0.7
        ("backlog copies are 3.6x MirrorMaker 2", ["3.6x"]),
        ("16 records were lost", ["16 records"]),  # a count is not a duration
        ("imports took 0.94-1.05 s", ["0.94-1.05 s", "0.94-1.05 s"]),
        ("the p99 was 13 s (measured 2026-11-20)", []),
        ("| figure | value |\n| --- | --- |\n| p99 | 13 s |", ["13 s"]),
        ("the reconciliation runs every 10 s (MirrorMaker 2's default is 600 s)", []),
        ("A on 127.0.0.1:19092, `--interval 5` s, `13 s`", []),
        ("`status` took 1.71 s", ["1.71 s"]),
        ("8.64M rows in 14,500 ranges", ["8.64M rows", "14,500 ranges"]),
    ],
)
def test_the_rule_on_examples(paragraph: str, missing: list[str]) -> None:
    assert unsourced(paragraphs(paragraph), SOURCES_FOR_TESTS) == missing


def test_a_results_json_sources_only_the_paragraphs_that_cite_it() -> None:
    results = {"docs/results/b.json": {"time": [Decimal("1.43")]}}
    assert unsourced(["`status` took 1.43 s"], {}, results) == ["1.43 s"]
    assert unsourced(["`status` took 1.43 s (`docs/results/b.json`)"], {}, results) == []


def test_a_stale_figure_in_the_readme_would_fail() -> None:
    """The README check itself, on README with the latency of its known limits changed to a p99 no
    measurement gave (an undated paragraph: a dated one may quote figures of its date)."""
    readme = README.read_text()
    assert "15 / 31 ms at a steady" in readme
    stale = readme.replace("15 / 31 ms at a steady", "15 / 77 ms at a steady")
    assert unsourced(paragraphs(stale), document_values(), result_values()) == ["77 ms"]
