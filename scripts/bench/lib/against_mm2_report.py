"""The report of scripts/bench/against_mm2.py: which copiers it knows, how their figures are summarized and
tabulated. Pure functions of a run's results (the JSON it prints), so a stored result in docs/results can be
summarized again: a key a newer run adds is read with the value an older run implies (steady steps without a
``size`` were 1 KB, a run without ``latency_at`` measured at the target's append time)."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Any

from scripts.bench.lib.paced import LatencyAt
from scripts.bench.lib.stats import median

#: Every copier ``--copiers`` accepts, in table order; the default runs the first comparison's three.
COPIERS = ("drkit", "drkit-eos", "drkit-cluster", "mm2", "plain")
DEFAULT_COPIERS = ("drkit", "mm2", "plain")
#: drkit's mirror: with its default ``local[2]`` master (at-least-once and exactly-once), and on the Spark
#: standalone cluster (--spark-workers).
DRKIT = ("drkit", "drkit-eos", "drkit-cluster")
#: Copiers whose target is written in transactions: a record on the target counts once it is committed.
TRANSACTIONAL = ("drkit-eos",)
#: The [flows.mirror] settings that make ``drkit-eos`` of ``drkit`` (with the local master: the continuous copy).
EXACTLY_ONCE = {"delivery": "exactly_once"}
LABELS = {
    "drkit": "drkit",
    "drkit-eos": "drkit, exactly-once",
    "drkit-cluster": "drkit, Spark cluster",
    "mm2": "MirrorMaker 2",
    "plain": "plain loop",
}
#: Ratios formed when both copiers ran (numerator, denominator): backlog rates per repetition, steady latencies.
RATIOS = (
    ("drkit", "mm2"),
    ("drkit", "plain"),
    ("drkit-cluster", "drkit"),
    ("drkit-cluster", "mm2"),
    ("drkit-eos", "drkit"),
    ("drkit-eos", "mm2"),
)
#: The steady records' size of runs before ``--steady-sizes``.
DEFAULT_STEADY_SIZE = 1000


class BacklogAt(StrEnum):
    """Where a backlog copy's span ends: B's last append, or a read_committed consumer receiving the last record
    (it starts at B's first append either way)."""

    APPEND_SPAN = "append_span"
    READ_COMMITTED = "read_committed_receive"


def default_latency_at(copiers: list[str]) -> LatencyAt:
    """At a read_committed consumer as soon as one copier writes in transactions (every copier of a run is
    measured the same way), else at B's append time."""
    return LatencyAt.CONSUMER if any(c in TRANSACTIONAL for c in copiers) else LatencyAt.APPEND


def backlog_at(copier: str) -> BacklogAt:
    return BacklogAt.READ_COMMITTED if copier in TRANSACTIONAL else BacklogAt.APPEND_SPAN


def run_copiers(results: dict[str, Any]) -> list[str]:
    """The copiers of this run, in table order (reports before ``copiers`` was recorded: the default three)."""
    ran = results.get("copiers") or DEFAULT_COPIERS
    return [c for c in COPIERS if c in ran]


def steady_sizes(results: dict[str, Any]) -> list[int]:
    return list(results.get("steady_sizes") or [DEFAULT_STEADY_SIZE])


def reference_size(sizes: list[int]) -> int:
    """The size whose figures stand for a copier where one size is asked for (the keys of runs before
    ``--steady-sizes``): 1 KB if measured, else the first size."""
    return DEFAULT_STEADY_SIZE if DEFAULT_STEADY_SIZE in sizes else sizes[0]


def size_label(size: int) -> str:
    return {100: "100 B", 1000: "1 KB", 100_000: "100 KB"}.get(size, f"{size} B")


def steps_by_size(steady: dict[str, Any]) -> dict[int, dict[int, tuple[Any, Any, bool]]]:
    """One copier's steady steps: size -> rate -> (p50 ms, p99 ms, sustained)."""
    out: dict[int, dict[int, tuple[Any, Any, bool]]] = {}
    for s in steady["steps"]:
        out.setdefault(s.get("size", DEFAULT_STEADY_SIZE), {})[s["rate"]] = (s["p50_ms"], s["p99_ms"], s["sustained"])
    return out


def ratio(n: float | None, d: float | None) -> float | None:
    return round(n / d, 2) if n is not None and d else None


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    copiers = run_copiers(results)
    out: dict[str, Any] = {"backlog": {}, "steady": {}, "memory_mb": {}}
    for size in results["sizes"] if results["backlog"] else []:
        out["backlog"][str(size)] = backlog_row(results, copiers, size)
    sizes = steady_sizes(results)
    ref = reference_size(sizes)
    for r in results["steady"]:
        by_size = steps_by_size(r)
        highest = r.get("highest_sustained_rate_by_size") or {str(ref): r.get("highest_sustained_rate")}
        out["steady"][r["copier"]] = {
            "startup_to_first_record_seconds": r.get("startup_to_first_record_seconds"),
            "highest_sustained_rate": r.get("highest_sustained_rate"),
            "steps": by_size.get(ref, {}),
            "sizes": {
                str(size): {"highest_sustained_rate": highest.get(str(size)), "steps": by_size.get(size, {})}
                for size in sizes
            },
        }
    if any(n in out["steady"] and d in out["steady"] for n, d in RATIOS):
        out["steady_ratios"] = steady_ratios(out["steady"], sizes)
    for copier in copiers:
        peaks = [r.get("peak_rss_mb", 0) for r in results["backlog"] + results["steady"] if r["copier"] == copier]
        out["memory_mb"][copier] = max(peaks) if peaks else None
    workers = [
        sum(r["workers_peak_rss_mb"])
        for r in results["backlog"] + results["steady"]
        if r["copier"] == "drkit-cluster" and r.get("workers_peak_rss_mb")
    ]
    if workers:
        out["spark_workers_memory_mb"] = max(workers)
    return out


def backlog_row(results: dict[str, Any], copiers: list[str], size: int) -> dict[str, Any]:
    """Medians over the repetitions of one size per copier, and the ratios of the repetitions' rates."""
    row: dict[str, Any] = {}
    for copier in copiers:
        runs = [r for r in results["backlog"] if r["copier"] == copier and r["size"] == size and "error" not in r]
        row[copier] = {
            "records_per_s": median([r["records_per_s"] for r in runs]),
            "mb_per_s": median([r["mb_per_s"] for r in runs]),
            "startup_seconds": median([r["startup_seconds"] for r in runs]),
            "stop_seconds": median([r["stop_seconds"] for r in runs]),
            "load": median([r["load_before"] for r in runs]),
        }
    ratios: dict[str, list[float]] = {f"{n}/{d}": [] for n, d in RATIOS if n in copiers and d in copiers}
    for rep in range(results["repetitions"]):
        by = {
            r["copier"]: r for r in results["backlog"] if r["size"] == size and r.get("rep") == rep and "error" not in r
        }
        for n, d in RATIOS:
            if n in by and d in by:
                ratios[f"{n}/{d}"].append(by[n]["records_per_s"] / by[d]["records_per_s"])
    row["ratios"] = {k: median(v) for k, v in ratios.items()}
    return row


def steady_ratios(steady: dict[str, Any], sizes: list[int]) -> dict[str, dict[int, dict[str, float | None]]]:
    """size -> rate -> p50 and p99 of one copier over another's (``p99_drkit-eos/mm2``), where both measured it."""
    out: dict[str, dict[int, dict[str, float | None]]] = {}
    for size in sizes:
        rates: dict[int, dict[str, float | None]] = {}
        for n, d in RATIOS:
            if n not in steady or d not in steady:
                continue
            num, den = steady[n]["sizes"][str(size)]["steps"], steady[d]["sizes"][str(size)]["steps"]
            for rate in sorted(set(num) & set(den)):
                rates.setdefault(rate, {})[f"p50_{n}/{d}"] = ratio(num[rate][0], den[rate][0])
                rates[rate][f"p99_{n}/{d}"] = ratio(num[rate][1], den[rate][1])
        out[str(size)] = rates
    return out


def row_line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def method_lines(results: dict[str, Any], copiers: list[str]) -> list[str]:
    """How the latencies and the transactional copiers' backlog rates were taken."""
    at = LatencyAt(results.get("latency_at", LatencyAt.APPEND))
    lines = []
    if results["steady"]:
        lines.append(
            "Steady latency: "
            + (
                "when a read_committed consumer of B received the record minus its send time."
                if at is LatencyAt.CONSUMER
                else "B's append time of the record minus its send time."
            )
        )
    transactional = [LABELS[c] for c in copiers if backlog_at(c) is BacklogAt.READ_COMMITTED]
    if transactional and results["backlog"]:
        lines.append(
            f"Backlog rate of {', '.join(transactional)}: from B's first append to when a read_committed consumer "
            "of B received the last record (the others: B's first to last append)."
        )
    return lines


def markdown(results: dict[str, Any]) -> str:
    s = results["summary"]
    copiers = run_copiers(results)
    labels = [LABELS[c] for c in copiers]
    cluster = results.get("spark_cluster")
    reps = f"{results['repetitions']} repetition(s)"
    parts = "steady state only (--no-backlog)" if results.get("backlog_skipped") else reps
    lines = [
        f"Run {results['started']} ({'quick' if results['quick'] else 'full'}), {parts}, "
        f"{os.cpu_count()} cores, compression {results['compression']}; "
        f"1-min load average {results['load_start']} at start, {results['load_end']} at end."
    ]
    if cluster:
        lines.append(
            f"drkit, Spark cluster: a local standalone cluster of {cluster['workers']} worker(s) x "
            f"{cluster['worker_cores']} core(s), executors of {cluster['executor_memory']}, on the same machine."
        )
    lines += method_lines(results, copiers)
    if s["backlog"]:
        lines += backlog_table(results, copiers, labels)
    lines += steady_table(results, copiers, labels)
    if s.get("spark_workers_memory_mb"):
        lines += [
            "",
            f"drkit, Spark cluster: the tree above is the driver's; the Spark workers' trees (worker JVMs, "
            f"executors, their Python workers) peaked at {s['spark_workers_memory_mb']:,.0f} MB together.",
        ]
    return "\n".join(lines) + "\n"


def backlog_table(results: dict[str, Any], copiers: list[str], labels: list[str]) -> list[str]:
    s = results["summary"]
    ratio_names = list(next(iter(s["backlog"].values()))["ratios"])
    lines = [
        "",
        row_line(["backlog copy (12 partitions)", *labels, *ratio_names]),
        "|---|" + "---|" * (len(copiers) + len(ratio_names)),
    ]
    blank = [""] * len(ratio_names)
    for size, row in s["backlog"].items():
        cells = [
            f"{row[c]['records_per_s']:,.0f} rec/s, {row[c]['mb_per_s']} MB/s (load {row[c]['load']})"
            if row[c]["records_per_s"]
            else "failed"
            for c in copiers
        ]
        ratios = [f"{v:.2f}x" if v else "-" for v in row["ratios"].values()]
        n = results["records"][str(size)]
        lines.append(row_line([f"{size_label(int(size))} x {n:,}", *cells, *ratios]))
    ref = s["backlog"].get("1000") or next(iter(s["backlog"].values()), None)
    if ref is not None:
        startup = [f"{ref[c]['startup_seconds']} s" for c in copiers]
        stop = [f"{ref[c]['stop_seconds']} s" for c in copiers]
        lines.append(row_line(["start-up to first record (backlog)", *startup, *blank]))
        lines.append(row_line(["stop (SIGINT; MM2 SIGTERM)", *stop, *blank]))
    return lines


def steady_table(results: dict[str, Any], copiers: list[str], labels: list[str]) -> list[str]:
    """Latency p50 / p99 per (size, rate), a column per copier and one per p99 ratio of two copiers that ran."""
    s = results["summary"]
    steady = s["steady"]
    memory = [f"{s['memory_mb'][c]:,.0f} MB" if s["memory_mb"][c] else "-" for c in copiers]
    if not steady:  # --no-steady: the memory only
        header = row_line(["peak RSS of the process tree", *labels])
        return ["", header, "|---|" + "---|" * len(copiers), row_line(["backlog copies", *memory])]
    sizes = steady_sizes(results)
    pairs = [(n, d) for n, d in RATIOS if n in steady and d in steady]
    ratio_names = [f"p99 {n}/{d}" for n, d in pairs]
    blank = [""] * len(pairs)
    title = f"steady state, {size_label(sizes[0])} records" if len(sizes) == 1 else "steady state"
    lines = ["", row_line([title, *labels, *ratio_names]), "|---|" + "---|" * (len(copiers) + len(pairs))]
    startup = [f"{steady.get(c, {}).get('startup_to_first_record_seconds')} s" for c in copiers]
    lines.append(row_line(["start-up to first record (idle)", *startup, *blank]))
    for size in sizes:
        prefix = "" if len(sizes) == 1 else f"{size_label(size)}, "
        ratios = s.get("steady_ratios", {}).get(str(size), {})
        for rate in results["rates"]:
            cells = []
            for c in copiers:
                step = steady.get(c, {}).get("sizes", {}).get(str(size), {}).get("steps", {}).get(rate)
                cells.append(
                    "-" if step is None else f"{step[0]} / {step[1]} ms{'' if step[2] else ' (not sustained)'}"
                )
            values = [ratios.get(rate, {}).get(f"p99_{n}/{d}") for n, d in pairs]
            shown = [f"{v:.2f}x" if v else "-" for v in values]
            lines.append(row_line([f"{prefix}{rate:,}/s: latency p50 / p99", *cells, *shown]))
    for size in sizes:
        suffix = "" if len(sizes) == 1 else f", {size_label(size)}"
        highest = [
            f"{steady.get(c, {}).get('sizes', {}).get(str(size), {}).get('highest_sustained_rate') or 0:,}/s"
            for c in copiers
        ]
        lines.append(row_line([f"highest sustained rate (p99 < 2 s){suffix}", *highest, *blank]))
    lines.append(row_line(["peak RSS of the process tree", *memory, *blank]))
    return lines
