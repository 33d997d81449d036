"""scripts/bench/against_mm2.py's pure parts on fake results: its options, the summary and the Markdown table with
the exactly-once copier (drkit-eos), steady steps at several sizes and the ratios; and that a result of a run before
those (no ``size`` on its steps, no ``latency_at``) is summarized as it was."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts.bench.against_mm2 import parse_args  # noqa: E402
from scripts.bench.lib.against_mm2_report import (  # noqa: E402
    BacklogAt,
    backlog_at,
    default_latency_at,
    markdown,
    summarize,
)
from scripts.bench.lib.paced import LatencyAt  # noqa: E402


def test_exactly_once_among_the_copiers_measures_every_copier_at_a_read_committed_consumer() -> None:
    args = parse_args(["--copiers", "drkit,drkit-eos,mm2", "--steady-sizes", "100,1000", "--rates", "2000,10000"])
    assert args.copiers == ["drkit", "drkit-eos", "mm2"]
    assert args.latency_at is LatencyAt.CONSUMER
    assert args.steady_sizes == [100, 1000] and args.rates == [2000, 10000]
    assert parse_args(["--copiers", "drkit,mm2"]).latency_at is LatencyAt.APPEND
    forced = parse_args(["--copiers", "drkit-eos,mm2", "--latency-at", "append"])
    assert forced.latency_at is LatencyAt.APPEND
    assert default_latency_at(["mm2"]) is LatencyAt.APPEND
    assert backlog_at("drkit-eos") is BacklogAt.READ_COMMITTED and backlog_at("drkit") is BacklogAt.APPEND_SPAN


def test_the_defaults_stay_as_before() -> None:
    args = parse_args([])
    assert args.copiers == ["drkit", "mm2", "plain"] and args.steady_sizes == [1000]
    assert args.sizes == [100, 1000, 100_000] and args.rates == [2000, 5000, 10000, 20000]
    assert args.records == {"100": 300_000, "1000": 100_000, "100000": 2_000}
    assert parse_args(["--quick"]).records == {"100": 90_000, "1000": 30_000, "100000": 600}
    assert parse_args(["--sizes", "1000,2000", "--records", "500"]).records == {"1000": 500, "2000": 500}


@pytest.mark.parametrize(
    "argv",
    [
        ["--steady-sizes", "1000,abc"],
        ["--steady-sizes", "4"],
        ["--steady-sizes", ""],
        ["--sizes", "1000,x"],
        ["--copiers", "drkit,eos"],
        ["--latency-at", "commit"],
        ["--records", "0"],
    ],
)
def test_bad_options_end_with_one_line_and_status_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    error = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(error) == 1


def step(rate: int, size: int | None, p50: float, p99: float, sustained: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"rate": rate, "p50_ms": p50, "p99_ms": p99, "sustained": sustained, "load_before": 1.0}
    if size is not None:
        out["size"] = size
    return out


def backlog_run(copier: str, rep: int, rate: int) -> dict[str, Any]:
    return {
        "copier": copier,
        "size": 1000,
        "rep": rep,
        "records_per_s": rate,
        "mb_per_s": round(rate / 1000, 2),
        "startup_seconds": 5.0,
        "stop_seconds": 1.0,
        "load_before": 1.5,
        "peak_rss_mb": 700.0 if copier != "mm2" else 500.0,
        "backlog_measured_at": str(backlog_at(copier)),
    }


def three_copier_run() -> dict[str, Any]:
    steady = [
        {
            "copier": "drkit",
            "startup_to_first_record_seconds": 6.0,
            "highest_sustained_rate": 10000,
            "highest_sustained_rate_by_size": {"100": 10000, "1000": 10000},
            "steps": [
                step(2000, 100, 10, 30),
                step(10000, 100, 12, 40),
                step(2000, 1000, 11, 32),
                step(10000, 1000, 14, 50),
            ],
            "peak_rss_mb": 800.0,
        },
        {
            "copier": "drkit-eos",
            "startup_to_first_record_seconds": 7.0,
            "highest_sustained_rate": 2000,
            "highest_sustained_rate_by_size": {"100": 10000, "1000": 2000},
            "steps": [
                step(2000, 100, 40, 90),
                step(10000, 100, 60, 120),
                step(2000, 1000, 50, 100),
                step(10000, 1000, 900, 2500, sustained=False),
            ],
        },
        {
            "copier": "mm2",
            "startup_to_first_record_seconds": 3.0,
            "highest_sustained_rate": 10000,
            "highest_sustained_rate_by_size": {"100": 10000, "1000": 10000},
            "steps": [
                step(2000, 100, 8, 15),
                step(10000, 100, 9, 20),
                step(2000, 1000, 9, 16),
                step(10000, 1000, 10, 25),
            ],
        },
    ]
    backlog = [
        backlog_run("drkit", 0, 40000),
        backlog_run("drkit-eos", 0, 30000),
        backlog_run("mm2", 0, 50000),
        backlog_run("mm2", 1, 40000),
        backlog_run("drkit-eos", 1, 36000),
        backlog_run("drkit", 1, 40000),
    ]
    return {
        "started": "2026-11-28 12:00:00 UTC",
        "quick": False,
        "repetitions": 2,
        "sizes": [1000],
        "rates": [2000, 10000],
        "compression": "lz4",
        "copiers": ["drkit", "drkit-eos", "mm2"],
        "steady_sizes": [100, 1000],
        "latency_at": "consumer",
        "backlog_measured_at": {c: str(backlog_at(c)) for c in ("drkit", "drkit-eos", "mm2")},
        "backlog_skipped": False,
        "records": {"1000": 100000},
        "load_start": 1.0,
        "load_end": 2.0,
        "backlog": backlog,
        "steady": steady,
    }


def test_the_summary_gives_each_size_and_rate_and_the_exactly_once_ratios() -> None:
    s = summarize(three_copier_run())
    eos = s["steady"]["drkit-eos"]
    assert eos["sizes"]["100"]["steps"] == {2000: (40, 90, True), 10000: (60, 120, True)}
    assert eos["sizes"]["1000"]["steps"][10000] == (900, 2500, False)
    assert eos["sizes"]["100"]["highest_sustained_rate"] == 10000
    assert eos["sizes"]["1000"]["highest_sustained_rate"] == 2000
    assert eos["steps"] == eos["sizes"]["1000"]["steps"]  # the old key: 1 KB
    ratios = s["steady_ratios"]
    assert ratios["100"][2000]["p99_drkit-eos/mm2"] == 6.0
    assert ratios["100"][2000]["p99_drkit-eos/drkit"] == 3.0
    assert ratios["1000"][10000]["p99_drkit/mm2"] == 2.0
    assert ratios["1000"][2000]["p50_drkit-eos/drkit"] == round(50 / 11, 2)
    assert "p99_drkit/plain" not in ratios["1000"][2000]  # plain did not run
    backlog = s["backlog"]["1000"]
    # per repetition: rep 0 30000/40000 and 30000/50000, rep 1 36000/40000 both; medians of those
    assert backlog["ratios"]["drkit-eos/drkit"] == round((0.75 + 0.9) / 2, 2)
    assert backlog["ratios"]["drkit-eos/mm2"] == round((0.6 + 0.9) / 2, 2)
    assert backlog["ratios"]["drkit/mm2"] == round((0.8 + 1.0) / 2, 2)
    assert backlog["drkit-eos"]["records_per_s"] == 33000
    assert s["memory_mb"] == {"drkit": 800.0, "drkit-eos": 700.0, "mm2": 500.0}


def test_the_markdown_names_the_method_and_shows_every_size_and_rate() -> None:
    results = three_copier_run()
    results["summary"] = summarize(results)
    table = markdown(results)
    assert "read_committed consumer of B received the record" in table
    assert "Backlog rate of drkit, exactly-once: from B's first append" in table
    header = next(line for line in table.splitlines() if line.startswith("| steady state"))
    assert header == (
        "| steady state | drkit | drkit, exactly-once | MirrorMaker 2 | p99 drkit/mm2 | p99 drkit-eos/drkit | "
        "p99 drkit-eos/mm2 |"
    )
    assert (
        "| 100 B, 2,000/s: latency p50 / p99 | 10 / 30 ms | 40 / 90 ms | 8 / 15 ms | 2.00x | 3.00x | 6.00x |" in table
    )
    assert "| 1 KB, 10,000/s: latency p50 / p99 | 14 / 50 ms | 900 / 2500 ms (not sustained) | 10 / 25 ms |" in table
    assert "| highest sustained rate (p99 < 2 s), 1 KB | 10,000/s | 2,000/s | 10,000/s |" in table
    assert "drkit-eos/drkit" in next(line for line in table.splitlines() if line.startswith("| backlog copy"))
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    steady_rows = rows[rows.index(header) :]
    assert {line.count("|") for line in steady_rows} == {header.count("|")}


def test_a_result_from_before_the_sizes_is_summarized_as_before() -> None:
    old: dict[str, Any] = {
        "started": "2026-11-26 12:00:00 UTC",
        "quick": True,
        "repetitions": 1,
        "sizes": [1000],
        "rates": [2000],
        "compression": "lz4",
        "copiers": ["drkit", "mm2"],
        "backlog_skipped": True,
        "records": {"1000": 30000},
        "load_start": 1.0,
        "load_end": 1.0,
        "backlog": [],
        "steady": [
            {"copier": "drkit", "highest_sustained_rate": 2000, "steps": [step(2000, None, 12, 35)]},
            {"copier": "mm2", "highest_sustained_rate": 2000, "steps": [step(2000, None, 9, 16)]},
        ],
    }
    s = summarize(old)
    assert s["steady"]["drkit"]["steps"] == {2000: (12, 35, True)}
    assert s["steady"]["drkit"]["highest_sustained_rate"] == 2000
    assert s["steady"]["drkit"]["sizes"]["1000"]["highest_sustained_rate"] == 2000
    old["summary"] = s
    table = markdown(old)
    assert "B's append time of the record minus its send time" in table
    assert "| steady state, 1 KB records | drkit | MirrorMaker 2 | p99 drkit/mm2 |" in table
    assert "| 2,000/s: latency p50 / p99 | 12 / 35 ms | 9 / 16 ms | 2.19x |" in table
    assert "Backlog rate of" not in table


def test_without_the_steady_part_the_table_shows_no_steady_rows() -> None:
    results = three_copier_run()
    results["steady"] = []
    results["summary"] = summarize(results)
    table = markdown(results)
    assert "latency p50" not in table and "Steady latency" not in table
    assert "| backlog copies | 700 MB | 700 MB | 500 MB |" in table
    assert "| 1 KB x 100,000 | 40,000 rec/s" in table
