"""The operator benchmark's report: its Markdown tables (only measured figures; a baseline's medians read from
that run's JSON report) and the targets met or not."""

from __future__ import annotations

from typing import Any

from scripts.bench.operator.commands import (
    COMMANDS,
    FRESHNESS_TARGET_P99,
    OUTAGE_COMMANDS,
    OUTAGE_TARGET_SECONDS,
    PHASES,
    TARGETS,
)
from scripts.bench.operator.fixture import FLOW


def baseline_medians(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The commands a report measured without ``maintain``: what a later run is compared with."""
    phase = report.get("phases", {}).get("without_maintain", {})
    return dict(phase.get("commands", {}))


def markdown(report: dict[str, Any], baseline: dict[str, dict[str, Any]] | None = None) -> str:
    """The report as Markdown tables: only measured figures, the baseline's read from its JSON report."""
    phases = [p for p in PHASES if p in report["phases"]]
    head = ["command", *(["baseline (its without maintain)"] if baseline is not None else [])]
    head += [p.replace("_", " ") for p in phases]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in COMMANDS:
        cells = [] if baseline is None else [_cell(baseline.get(name))]
        present = False
        for p in phases:
            m = report["phases"][p]["commands"].get(name)
            present = present or m is not None
            cells.append(_cell(m))
        if present:
            lines.append(f"| `{COMMANDS[name][0][0]} {' '.join(COMMANDS[name][0][1:])}` | " + " | ".join(cells) + " |")
    lines[2:] = [line.replace(f" --flow {FLOW}", "").replace("{group}", "G") for line in lines[2:]]
    imports = report.get("imports", {})
    if imports:
        lines.append(
            "\nimports (seconds of top-level imports, `-X importtime`): "
            + ", ".join(f"{name} {m['top_level_imports_seconds']}" for name, m in imports.items())
        )
    for f in report.get("freshness", []):
        if "p50_seconds" in f:
            lines.append(
                f"\nfreshness (interval {f['interval']}): p50 {f['p50_seconds']} s, p99 {f['p99_seconds']} s, "
                f"max {f['max_seconds']} s over {f['seen']} commits"
            )
    down = report.get("clusters_down", {})
    if down:
        outages = list(down)
        lines.append(
            "\n| command (clusters down: median, max; exit) | "
            + " | ".join(o.replace("_", " ") for o in outages)
            + " |"
        )
        lines.append("|" + " --- |" * (len(outages) + 1))
        for name, argv in OUTAGE_COMMANDS.items():
            cells = []
            for o in outages:
                m = down[o]["commands"].get(name)
                if m is None:
                    cells.append("")
                    continue
                flag = "" if m["all_ok"] else f" UNEXPECTED {m['exit_codes']}"
                cells.append(f"{m['median_seconds']} s, {m['max_seconds']} s; {m['expected_exit']}{flag}")
            label = " ".join(argv).replace(f" --flow {FLOW}", "").replace("{group}", "G")
            lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
        loads = ", ".join(f"{o} {down[o]['load_average_before'][0]}" for o in outages)
        lines.append(f"\n1-minute load average as each outage began: {loads}")
    return "\n".join(lines)


def _cell(m: dict[str, Any] | None) -> str:
    if m is None:
        return ""
    flag = "" if m["all_ok"] else f" (exit {m['exit_codes']})"
    return f"{m['median_seconds']} s, {m['peak_tree_rss_mb']:.0f} MB{flag}"


def targets(report: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase, data in report["phases"].items():
        for name, limit in TARGETS.items():
            m = data["commands"].get(name)
            if m is None:
                continue
            out[f"{phase}.{name}"] = {
                "target_seconds": limit,
                "median_seconds": m["median_seconds"],
                "met": m["all_ok"] and m["median_seconds"] < limit,
                "load1": m["load1"],
            }
    for outage, data in report.get("clusters_down", {}).items():
        if data["how"] != "down":
            continue  # a frozen cluster costs its probe timeout by design: measured, not a target
        for name, m in data["commands"].items():
            out[f"clusters_down.{outage}.{name}"] = {
                "target_seconds": OUTAGE_TARGET_SECONDS,
                "max_seconds": m["max_seconds"],
                "met": m["all_ok"] and m["max_seconds"] < OUTAGE_TARGET_SECONDS,
                "load1": m["load1"],
            }
    for f in report.get("freshness", []):
        if f.get("interval") == "default" and f.get("p99_seconds") is not None:
            out["freshness_default.p99"] = {
                "target_seconds": FRESHNESS_TARGET_P99,
                "p99_seconds": f["p99_seconds"],
                "met": f["p99_seconds"] < FRESHNESS_TARGET_P99 and not f["never_seen_within_60s"],
            }
    return out
