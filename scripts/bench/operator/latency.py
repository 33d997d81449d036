"""Phases ``without_maintain`` and ``after_maintain``: each command as a cold CLI process, ``--repeats`` times,
the commands alternating within a repeat so that the machine's noise spreads over all of them."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from scripts.bench.operator.cli import measured_run
from scripts.bench.operator.commands import COMMANDS
from scripts.bench.operator.fixture import group_name
from scripts.bench.operator.progress import log


def measure_phase(args: argparse.Namespace, cfg: Path, phase: str, commands: list[str]) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in commands}
    group = group_name(0)
    for rep in range(args.repeats):
        for name in commands:  # commands alternate within a repeat: the machine's noise spreads over all
            argv_template, expected = COMMANDS[name]
            argv = [a.replace("{group}", group) for a in argv_template]
            r = measured_run(cfg, name, argv, args.timeout, rep + 1, sorted(expected), expected)
            ok = r["ok"]
            runs[name].append(r)
            log(
                f"{phase} {name:24s} #{rep + 1}: {r['seconds']:7.2f} s exit {r['exit_code']}"
                f"{'' if ok else ' (UNEXPECTED)'} load {r['load1']} tree {r['tree_peak_rss_mb']} MB"
            )
    out: dict[str, Any] = {}
    for name in commands:
        rs = runs[name]
        out[name] = {
            "command": "drkit " + " ".join(COMMANDS[name][0]).replace("{group}", group),
            "median_seconds": round(statistics.median(r["seconds"] for r in rs), 2),
            "seconds": [r["seconds"] for r in rs],
            "all_ok": all(r["ok"] for r in rs),
            "exit_codes": [r["exit_code"] for r in rs],
            "load1": [r["load1"] for r in rs],
            "peak_tree_rss_mb": max(r["tree_peak_rss_mb"] for r in rs),
            "runs": rs,
        }
    return out
