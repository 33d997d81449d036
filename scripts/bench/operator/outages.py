"""Phase ``clusters_down`` (issue 26): the operator commands while clusters are gone, stopped (``down``) or
SIGSTOPped (``frozen``), each run checked against the exit code drkit must give; the clusters come back (and
are ready) before the next outage."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from scripts.bench.operator.cli import measured_run
from scripts.bench.operator.commands import OUTAGE_COMMANDS, OUTAGE_EXPECTED, OUTAGES
from scripts.bench.operator.fixture import group_name
from scripts.bench.operator.progress import log


def take_away(kafka: Any, aliases: tuple[str, ...], how: str) -> None:
    for alias in aliases:
        if how == "down":
            kafka.stop(alias)  # SIGTERM, waited for: nothing listens on its port afterwards
        else:
            kafka.freeze(alias)


def give_back(kafka: Any, aliases: tuple[str, ...], how: str) -> float:
    from drkit.errors import DrkitError

    started = time.monotonic()
    for alias in aliases:
        if how == "frozen":
            if kafka.thaw(alias):
                kafka.wait_ready(alias, time.monotonic() + 120)
            continue
        for attempt in (1, 2, 3):  # on a loaded machine a restarted broker has been seen to exit at once
            try:
                kafka.start(alias)
                break
            except DrkitError as exc:
                log(f"restarting {alias} failed (attempt {attempt}): {str(exc).splitlines()[0]}")
                if attempt == 3:
                    raise
                time.sleep(5)
    return round(time.monotonic() - started, 1)


def measure_outages(args: argparse.Namespace, cfg: Path, kafka: Any) -> dict[str, Any]:
    """Each outage of ``--outages`` in turn: the clusters taken away, every command of ``--outage-commands``
    ``--repeats`` times (commands alternating), the clusters given back (and ready) before the next."""
    group = group_name(0)
    commands = [c.strip() for c in args.outage_commands.split(",") if c.strip()]
    unknown = set(commands) - set(OUTAGE_COMMANDS)
    if unknown:
        raise SystemExit(f"unknown outage commands: {sorted(unknown)}; choose from {list(OUTAGE_COMMANDS)}")
    out: dict[str, Any] = {}
    for outage in [o.strip() for o in args.outages.split(",") if o.strip()]:
        aliases, how = OUTAGES[outage]
        expected = OUTAGE_EXPECTED["target" if "B" in aliases else "source"]
        load_before = [round(x, 2) for x in os.getloadavg()]
        log(f"clusters_down {outage}: {how} {', '.join(aliases)}")
        take_away(kafka, aliases, how)
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in commands}
        try:
            for rep in range(args.repeats):
                for name in commands:
                    argv = [a.replace("{group}", group) for a in OUTAGE_COMMANDS[name]]
                    r = measured_run(cfg, name, argv, args.timeout, rep + 1, expected[name], {expected[name]})
                    ok = r["ok"]
                    runs[name].append(r)
                    log(
                        f"{outage} {name:24s} #{rep + 1}: {r['seconds']:7.2f} s exit {r['exit_code']}"
                        f"{'' if ok else ' (UNEXPECTED)'} load {r['load1']}"
                    )
        finally:
            restored = give_back(kafka, aliases, how)
        out[outage] = {
            "clusters": list(aliases),
            "how": how,
            "load_average_before": load_before,
            "restore_seconds": restored,
            "commands": {
                name: {
                    "command": "drkit " + " ".join(OUTAGE_COMMANDS[name]).replace("{group}", group),
                    "median_seconds": round(statistics.median(r["seconds"] for r in rs), 2),
                    "max_seconds": max(r["seconds"] for r in rs),
                    "seconds": [r["seconds"] for r in rs],
                    "expected_exit": expected[name],
                    "exit_codes": [r["exit_code"] for r in rs],
                    "all_ok": all(r["ok"] for r in rs),
                    "load1": [r["load1"] for r in rs],
                    "output": rs[-1]["output"],
                    "runs": rs,
                }
                for name, rs in runs.items()
            },
        }
    return out
