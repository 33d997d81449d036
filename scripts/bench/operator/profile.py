"""Where a command's time goes: one CLI process under cProfile, and its top-level imports (``-X importtime``)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scripts.bench.operator.cli import cli_env, run_cli
from scripts.bench.operator.commands import COMMANDS
from scripts.bench.operator.fixture import group_name
from scripts.bench.operator.progress import log


def profile(cfg: Path, name: str, timeout: float) -> dict[str, Any]:
    """One delta-rs CLI process under cProfile and -X importtime: where its time goes."""
    import pstats

    argv = [a.replace("{group}", group_name(0)) for a in COMMANDS[name][0]]
    prof = cfg.parent / f"profile-{name}-{int(time.time())}.pstats"
    r = run_cli(cfg, argv, timeout, prefix=["-m", "cProfile", "-o", str(prof)])
    out: dict[str, Any] = {"command": name, "seconds_under_profiler": r["seconds"], "exit_code": r["exit_code"]}
    out["pstats_file"] = str(prof)
    if prof.exists():
        stats = pstats.Stats(str(prof))
        rows = []
        for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            rows.append((ct, tt, nc, f"{_short(file)}:{line}({func})"))
        out["total_seconds"] = round(stats.total_tt, 2)  # type: ignore[attr-defined]
        out["top_cumulative"] = [
            {"function": f, "cumulative_s": round(ct, 3), "own_s": round(tt, 3), "calls": nc}
            for ct, tt, nc, f in sorted(rows, reverse=True)[:30]
        ]
        out["top_own"] = [
            {"function": f, "own_s": round(tt, 3), "cumulative_s": round(ct, 3), "calls": nc}
            for ct, tt, nc, f in sorted(rows, key=lambda x: -x[1])[:15]
        ]
    return out


def importtime(cfg: Path, name: str, timeout: float) -> dict[str, Any]:
    """The slowest top-level imports of one CLI process (``-X importtime``)."""
    argv = [a.replace("{group}", group_name(0)) for a in COMMANDS[name][0]]
    cmd = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "drkit.cli.app",
        *argv[:1],
        "-c",
        str(cfg),
        *argv[1:],
        "-o",
        "json",
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=cli_env(), cwd=cfg.parent, timeout=timeout, check=False
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        _self_us, cumulative_us, package = line.split(":", 1)[1].split("|")
        if not package.startswith("  "):  # top level: one space after the bar, deeper ones indented
            rows.append((int(cumulative_us.strip()), package.strip()))
    total = sum(us for us, _ in rows)
    return {
        "command": name,
        "top_level_imports_seconds": round(total / 1e6, 2),
        "slowest_imports": [{"module": m, "seconds": round(us / 1e6, 3)} for us, m in sorted(rows, reverse=True)[:12]],
    }


def profiles(args: argparse.Namespace, cfg: Path, phase: str) -> list[dict[str, Any]]:
    out = []
    for name in [n.strip() for n in args.profile.split(",") if n.strip()]:
        log(f"{phase}: profiling {name}")
        out.append({**profile(cfg, name, args.timeout), **importtime(cfg, name, args.timeout)})
    return out


def _short(file: str) -> str:
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file
