"""Every measured figure in README.md, docs/ and runbooks/ comes from a JSON file under docs/results.

The rule, so that a figure typed by hand, or left behind by a newer measurement, fails here:

* **The documents**: README.md, docs/*.md, docs/design/*.md, runbooks/*.md (``DOCUMENTS``).
* **A figure** is a number followed by a unit of measurement, in prose or tables: a duration (``us``,
  ``ms``, ``s``, ``seconds``, ``minutes``, ``hours``), a size (``MB``, ``GB``, ``MiB``, ``GiB``; not ``KB``:
  record sizes are settings), a rate (``records/s``, ``rec/s``, ``MB/s``, ``N/s``), a ratio (``4.4x``), a percentage,
  and a load average (``load 1.2-2.9``). Counts (records, partitions, groups) are mostly a run's set-up, not what it
  measured, so they are not figures. Thousands separators and an ``M``/``k`` multiplier are read
  (``143k records/s``); in a range ``0.94-1.05 s`` both ends are figures.
* **Declared not measured**: ``NOT_MEASURED`` lists, per document, the figures that are settings,
  thresholds or a test's own parameters in clauses the setting words miss, each with its reason.
* **Not figures**: anything inside code (backticks, fenced blocks: commands, flags, config keys and values);
  and settings, bounds and constants: a number whose clause (the text since the last ``.``, ``;``, ``:``,
  ``|`` or line start) holds one of ``SETTING_WORDS`` ("default", "every", "at least", "under", "<", ...).
* **Sourced**: a figure's section (from one heading to the next) cites a JSON (``docs/results/x.json``,
  the whole name), and one number of the same dimension in a cited JSON, printed at the figure's precision
  (half up or half even), is the figure. A number's dimension comes from its key, or the nearest enclosing
  key that names one (``*_ms``/``*_ms_*`` ms; ``*seconds``, ``*_s``, ``phases`` s; ``*_mb`` MB;
  ``*mb_per_s`` MB/s; ``*per_s``, ``*rate`` records/s; ``ratio*``, ``*_vs_*``, ``a/b`` ratios, also as
  percentages; ``load*`` load averages; other keys counts). A load range ``A-B`` is a file's lowest and
  highest load. README's ``0.72 s`` is sourced by ``721.4`` under a ``*_ms`` key, never by ``0.8 s`` or a
  count. There is no other source: not a date, not another document.
* **Dated**: a section that quotes figures and names a day (``2026-11-25``) cites a JSON of that day (its
  name holds the date), so "measured on <day>" cannot stand next to figures of another run.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
RESULTS = REPO / "docs" / "results"
DOCUMENTS = [
    README,
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "docs" / "design").glob("*.md")),
    *sorted((REPO / "runbooks").glob("*.md")),
]

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
    "MB": ("size", Decimal(1000**2)),
    "GB": ("size", Decimal(1000**3)),
    "MiB": ("size", Decimal(1024**2)),
    "GiB": ("size", Decimal(1024**3)),
    "MB/s": ("bandwidth", Decimal(1)),
    "records/s": ("rate", Decimal(1)),
    "rec/s": ("rate", Decimal(1)),
    "/s": ("rate", Decimal(1)),
    "x": ("ratio", Decimal(1)),
    "%": ("percent", Decimal(1)),
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
    "configured",
    "within",
)
#: Figures that are settings, thresholds or a test's own parameters, not measurements, in clauses the
#: setting words do not catch; per document, the figure's text and why it is not measured. Each must
#: still be in its document (test below), so the list cannot outlive the text.
NOT_MEASURED: dict[str, dict[str, str]] = {
    "docs/deploy.md": {"0s": "the value spark.locality.wait is set to"},
    "docs/state.md": {"9.5 MB": "the size of the jars fetched", "558 MB": "the size of a jar not fetched"},
    "docs/monitoring.md": {"300 s": "alert thresholds", "60 s": "an alert threshold"},
    "docs/reliability.md": {
        "5 minutes": "the long-outage test's blackhole length",
        "10 minutes": "how long an apply intent blocks (a constant)",
        "30 s": "the SIGSTOP length and the backoff's ceiling (test and code constants)",
        "20 s": "the test restarts the broker after this",
        "1 s": "the backoff's first wait (a code constant)",
    },
    "docs/design/mirror.md": {
        "60 s": "librdkafka's default.api.timeout.ms / request timeouts, as set",
        "120 s": "the delivery timeout, as set",
        "5 s": "client timeouts, as set",
        "10 s": "fetchOffset.retryIntervalMs, as set",
        "5 minutes": "the long-outage test's blackhole length",
        "30 s": "the backoff's ceiling (a code constant)",
        "20 s": "the test restarts the broker after this",
    },
    "runbooks/failover.md": {"10 minutes": "how long an apply intent blocks (a constant)"},
    "runbooks/status.md": {"60 s": "how long the operator waits before looking again"},
    "runbooks/switchover.md": {"10 s": "how long the operator waits between two looks"},
}
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
_unit_alternatives = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
FIGURE = re.compile(
    rf"(?<![\w.,/-]){NUMBER}(?:-{NUMBER})?\s?([Mk])?\s?({_unit_alternatives})(?![\w/])",
)
LOAD = re.compile(rf"\bload(?: average)?(?: of| was)? {NUMBER}(?:-{NUMBER})?(?![\w.-]*\d)")
DATE = re.compile(r"(?<![\d-])20\d\d-[01]\d-[0-3]\d(?![\d-])")
CITED = re.compile(r"docs/results/([\w.-]+\.json)")


@dataclass(frozen=True)
class Figure:
    text: str
    dimension: str
    value: Decimal  # in the dimension's base unit
    quantum: Decimal  # the precision it is printed at, in the base unit
    end: str = ""  # "low"/"high" for the ends of a load range (a file's extremes), else ""

    def printed(self, other: Decimal) -> bool:
        """``other`` (base unit), printed at this figure's precision (half up or half even), is this figure."""
        steps = other / self.quantum
        return any(
            steps.quantize(Decimal(1), rounding=r) * self.quantum == self.value
            for r in (ROUND_HALF_UP, ROUND_HALF_EVEN)
        )


def _number(raw: str, multiplier: Decimal, factor: Decimal) -> tuple[Decimal, Decimal]:
    number = Decimal(raw.replace(",", ""))
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)
    return number * multiplier * factor, Decimal(1).scaleb(exponent) * multiplier * factor


def _figures(text: str) -> list[Figure]:
    out = []
    for m in FIGURE.finditer(text):
        multiplier = {"M": Decimal(10**6), "k": Decimal(1000), None: Decimal(1)}[m.group(3)]
        dimension, factor = UNITS[m.group(4)]
        for raw in (m.group(1), m.group(2)):
            if raw is not None:
                out.append(Figure(m.group(0), dimension, *_number(raw, multiplier, factor)))
    for m in LOAD.finditer(text):
        ranged = m.group(2) is not None
        for raw, end in ((m.group(1), "low" if ranged else ""), (m.group(2), "high")):
            if raw is not None:
                out.append(Figure(m.group(0), "load", *_number(raw, Decimal(1), Decimal(1)), end))
    return out


def _without_code(text: str) -> str:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "``", text)


def _clauses(line: str) -> list[str]:
    # A '.' ends a clause only before a space or the end (not inside 1.43), likewise ':'.
    return [c for c in re.split(r"\.(?=\s|$)|[;|]|:(?=\s)", line) if c.strip()]


def sections(text: str) -> list[str]:
    """``text`` in sections, each from a heading to the next (code blocks removed, code spans kept)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [s for s in re.split(r"\n(?=#{1,6} )", text) if s.strip()]


def quoted_figures(section: str) -> list[Figure]:
    found = []
    # Lines joined: a figure may be wrapped ("2,000\nrecords/s"); table cells are clauses of their own.
    lines = [ln for ln in _without_code(section).splitlines() if not re.fullmatch(r"\s*\|?[\s|:-]+\|?\s*", ln)]
    for clause in _clauses(" ".join(lines)):
        lowered = clause.lower()
        if any(w in lowered for w in SETTING_WORDS):
            continue
        found.extend(_figures(clause))
    return found


def _dimension(path: tuple[str, ...]) -> str:
    if any(re.search(r"(^|_)ratio|_vs_|\w/\w", k) for k in path):
        return "ratio"
    for key in reversed(path):
        k = key.lower()
        if k.startswith("load") or k.endswith("load_1m"):
            return "load"
        if "mb_per_s" in k:
            return "bandwidth"
        if "per_s" in k or k.endswith("rate"):
            return "rate"
        if k.endswith("_ms") or "_ms_" in k:
            return "ms"
        if "seconds" in k or k.endswith("_s") or k in ("phases", "copies"):  # copies: [[seconds, records, error]]
            return "time"
        if k.endswith("_mb"):
            return "size"
    return "count"


def _json_numbers(data: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Decimal]]:
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _json_numbers(v, (*path, str(k)))
    elif isinstance(data, list):
        for v in data:
            yield from _json_numbers(v, path)
    elif isinstance(data, int | float) and not isinstance(data, bool):
        value, dimension = Decimal(str(data)), _dimension(path)
        if dimension == "ms":
            yield "time", value / 1000
        elif dimension == "size":
            yield "size", value * 1000**2
        elif dimension == "ratio":
            yield "ratio", value
            yield "percent", value * 100
        else:
            yield dimension, value


Values = dict[str, list[Decimal]]


@functools.cache
def result_values() -> dict[str, Values]:
    """Per results JSON (by its file name), its numbers by dimension."""
    out: dict[str, Values] = {}
    for path in sorted(RESULTS.glob("*.json")):
        values: Values = {}
        for dimension, value in _json_numbers(json.loads(path.read_text())):
            values.setdefault(dimension, []).append(value)
        out[path.name] = values
    return out


def _sourced(figure: Figure, cited: list[Values]) -> bool:
    if figure.end:  # a load range: one file's lowest and highest load
        pick = min if figure.end == "low" else max
        return any(figure.printed(pick(v["load"])) for v in cited if v.get("load"))
    return any(figure.printed(x) for v in cited for x in v.get(figure.dimension, []))


def unsourced(sects: list[str], results: dict[str, Values], not_measured: dict[str, str] | None = None) -> list[str]:
    """The figures of ``sects`` that no JSON their section cites holds, and the days no cited JSON is of."""
    missing = []
    for section in sects:
        figures = [f for f in quoted_figures(section) if f.text not in (not_measured or {})]
        names = CITED.findall(section)
        unknown = [n for n in names if n not in results]
        missing += [f"docs/results/{n} (no such file)" for n in unknown]
        cited = [results[n] for n in names if n in results]
        missing += [f.text for f in figures if not _sourced(f, cited)]
        if figures:
            days = {d for n in names for d in DATE.findall(n)}
            missing += [f"{d} (no cited JSON of that day)" for d in DATE.findall(section) if d not in days]
    return missing


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_figure_in_the_documents_is_in_a_cited_json(document: Path) -> None:
    name = str(document.relative_to(REPO))
    assert unsourced(sections(document.read_text()), result_values(), NOT_MEASURED.get(name)) == []


@pytest.mark.parametrize("name", sorted(NOT_MEASURED))
def test_every_figure_declared_not_measured_is_in_its_document(name: str) -> None:
    figures = {f.text for s in sections((REPO / name).read_text()) for f in quoted_figures(s)}
    assert sorted(set(NOT_MEASURED[name]) - figures) == []


def test_the_extraction_finds_the_figures() -> None:
    """The check above cannot pass by finding nothing: the benchmark sections quote many figures."""
    assert sum(len(quoted_figures(s)) for s in sections(README.read_text())) >= 20
    assert sum(len(quoted_figures(s)) for s in sections((REPO / "docs" / "performance.md").read_text())) >= 100


def test_every_json_under_results_is_cited_by_a_document() -> None:
    cited = {n for d in DOCUMENTS for n in CITED.findall(d.read_text())}
    assert sorted(p.name for p in RESULTS.glob("*.json") if p.name not in cited) == []


RESULTS_FOR_TESTS: dict[str, Values] = {
    "a_2026-11-20.json": {
        "time": [Decimal("0.7214"), Decimal("16.27")],
        "size": [Decimal(769 * 10**6)],
        "ratio": [Decimal("4.38")],
        "percent": [Decimal("438")],
        "load": [Decimal("1.24"), Decimal("2.2"), Decimal("3.12")],
    },
}
CITE = " (docs/results/a_2026-11-20.json)"


@pytest.mark.parametrize(
    "section, missing",
    [
        ("drkit's p50 was 0.72 s and its start-up 16 s; peak RSS 0.77 GB, 4.4x MirrorMaker 2" + CITE, []),
        ("drkit's p50 was 721.4 ms" + CITE, []),
        ("drkit's p50 was 0.72 s", ["0.72 s"]),  # no JSON cited: nothing sources it
        ("the p99 was 13 s (MirrorMaker 2: 1.2 s)" + CITE, ["13 s", "1.2 s"]),
        ("drkit's p50 was 0.8 s" + CITE, ["0.8 s"]),  # 0.7214 printed at one decimal is 0.7
        ("backlog copies are 3.6x MirrorMaker 2" + CITE, ["3.6x"]),
        ("17 s were lost" + CITE, ["17 s"]),  # 16.27 printed at no decimal is 16
        ("imports took 0.94-1.05 s" + CITE, ["0.94-1.05 s", "0.94-1.05 s"]),
        ("the p99 was 13 s, measured 2026-11-20", ["13 s", "2026-11-20 (no cited JSON of that day)"]),
        ("measured 2026-11-21: p50 0.72 s" + CITE, ["2026-11-21 (no cited JSON of that day)"]),
        ("| figure | value |\n| --- | --- |\n| p99 | 13 s |" + CITE, ["13 s"]),
        ("the reconciliation runs every 10 s (MirrorMaker 2's default is 600 s)", []),
        ("A on 127.0.0.1:19092, `--interval 5` s, `13 s`", []),
        ("a peak of 1.2k MB" + CITE, ["1.2k MB"]),
        ("load 1.2-3.1" + CITE, []),
        ("load 1.2-2.9" + CITE, ["load 1.2-2.9"]),  # 2.9 is a load of no file's top
        ("load 2.2" + CITE, []),
        ("drkit ran at 438% of MM2" + CITE, []),
        ("see docs/results/gone.json: 13 s", ["docs/results/gone.json (no such file)", "13 s"]),
    ],
)
def test_the_rule_on_examples(section: str, missing: list[str]) -> None:
    assert unsourced(sections(section), RESULTS_FOR_TESTS) == missing


def test_a_json_sources_only_the_section_that_cites_it() -> None:
    text = "## One\n\n`status` took 0.72 s (`docs/results/a_2026-11-20.json`)\n\n## Two\n\n`offsets` took 0.72 s\n"
    assert unsourced(sections(text), RESULTS_FOR_TESTS) == ["0.72 s"]


def test_json_keys_give_the_dimension() -> None:
    numbers = list(_json_numbers({"p99_ms": 721.4, "runs": [{"records_per_s": 5, "ratio_a": {"b_per_s": 1.5}}]}))
    assert ("time", Decimal("0.7214")) in numbers
    assert ("rate", Decimal(5)) in numbers
    assert ("ratio", Decimal("1.5")) in numbers and ("rate", Decimal("1.5")) not in numbers


def test_a_stale_figure_in_the_readme_would_fail() -> None:
    """The README check itself, with the latency of its known limits changed to a p99 no measurement gave."""
    readme = README.read_text()
    assert "15 / 31 ms at a steady" in readme
    stale = readme.replace("15 / 31 ms at a steady", "15 / 77 ms at a steady")
    assert unsourced(sections(stale), result_values()) == ["77 ms"]


def _bench_operator_modules() -> list[ModuleType]:
    """Every module of the operator benchmark (scripts/bench/operator/), imported from this checkout."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    folder = REPO / "scripts" / "bench" / "operator"
    names = sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__"))
    return [importlib.import_module(f"scripts.bench.operator.{name}") for name in names]


def test_the_operator_benchmark_prints_only_measured_figures() -> None:
    """No baseline column typed into the benchmark: without ``--baseline`` its table holds the run's medians
    only; with one, the baseline's medians come from that report."""
    modules = _bench_operator_modules()
    assert not [
        name
        for module in modules
        for name in vars(module)
        if name.isupper() and ("BEFORE" in name or "BASELINE" in name)
    ]
    bench = importlib.import_module("scripts.bench.operator.report")
    measured = {"median_seconds": 0.7, "peak_tree_rss_mb": 234.0, "all_ok": True}
    report = {"phases": {"without_maintain": {"commands": {"status": measured}}}}
    table = bench.markdown(report)
    assert "| `status` | 0.7 s, 234 MB |" in table
    assert "baseline" not in table and "before" not in table
    older = {"phases": {"without_maintain": {"commands": {"status": {**measured, "median_seconds": 1.43}}}}}
    with_baseline = bench.markdown(report, bench.baseline_medians(older))
    assert "| `status` | 1.43 s, 234 MB | 0.7 s, 234 MB |" in with_baseline
