"""One operator command as a cold CLI process (``python -m drkit.cli.app ... -o json``): wall clock from spawn to
exit, exit code, the load average when it started, peak memory of its process tree, and a digest of its JSON
output. Processes run in their own session, so a stopped benchmark kills them and whatever they started."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from scripts.bench.lib.memory import TreeMemory

#: Process groups of the CLI processes and translators running now (killed if the benchmark is stopped).
CHILDREN: set[int] = set()


def kill_children() -> None:
    for pid in list(CHILDREN):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        CHILDREN.discard(pid)


#: Set from --drkit-path: the checkout the CLI processes import drkit from (None: this one).
DRKIT_PATH: Path | None = None


def use_drkit_path(path: Path | None) -> None:
    """The CLI processes import drkit from ``path`` (another checkout), or from this one (None)."""
    global DRKIT_PATH
    DRKIT_PATH = path


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if DRKIT_PATH is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(DRKIT_PATH), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_cli(cfg: Path, argv: list[str], timeout: float, prefix: list[str] | None = None) -> dict[str, Any]:
    """One cold CLI process: wall clock from spawn to exit, exit code, peak memory, its JSON output."""
    cmd = [sys.executable, *(prefix or []), "-m", "drkit.cli.app", *argv[:1], "-c", str(cfg), *argv[1:], "-o", "json"]
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=cli_env(),
            cwd=cfg.parent,
            start_new_session=True,
        )
        memory = TreeMemory(proc.pid, 0.2).start()
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.daemon = True
        timer.start()
        try:
            _, wait_status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # stopped (SIGTERM, Ctrl-C): the CLI and its JVM go too
            timer.cancel()
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        seconds = time.perf_counter() - started
        CHILDREN.discard(proc.pid)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(wait_status)
        memory.stop()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return {
        "seconds": round(seconds, 3),
        "exit_code": proc.returncode,
        "load1": round(load, 2),
        "python_maxrss_mb": round(usage.ru_maxrss / 1024, 1),
        "tree_peak_rss_mb": memory.peak_rss_mb(),
        # an operator command starts no JVM: any java process in its tree is a finding
        "jvm_peak_rss_mb": memory.hwm_mb_of("java"),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "stdout": stdout,
        "stderr_tail": stderr[-1500:],
    }


def measured_run(
    cfg: Path, name: str, argv: list[str], timeout: float, rep: int, expected_exit: Any, ok_codes: Collection[int]
) -> dict[str, Any]:
    """Repetition ``rep`` of command ``name``: the figures of ``run_cli``, ``ok`` when its exit code is one of
    ``ok_codes`` (``expected_exit`` is what the report says was expected), and the digest of its output; the
    stderr tail only of a run that was not ok."""
    r = run_cli(cfg, argv, timeout)
    facts = digest(name, r.pop("stdout"))
    ok = r["exit_code"] in ok_codes
    record = {"rep": rep, **r, "expected_exit": expected_exit, "ok": ok, "output": facts}
    if ok:
        record.pop("stderr_tail")
    return record


def digest(name: str, stdout: str) -> dict[str, Any]:
    """A few facts of the command's JSON output (enough to see it did the work)."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return {"json": False, "stdout_head": stdout[:300]}
    if isinstance(data, dict) and "error" in data:
        return {"json": True, "error": data["error"]}
    if name == "status":
        flows = data.get("flows", [])
        return {
            "json": True,
            "verdict": data.get("verdict"),
            "partitions": sum(len(f.get("partitions", [])) for f in flows),
            "groups": sum(len(f.get("groups", [])) for f in flows),
            "unreachable": sorted({line for f in flows for line in f.get("unreachable", [])}),
        }
    if name.startswith(("failover", "failback")):
        plan = data.get("plan", {})
        return {
            "json": True,
            "status": data.get("status"),
            "moves": len(plan.get("moves", [])),
            "refusals": len(plan.get("refusals", [])),
            "rpo_source_ends_from": (data.get("rpo") or {}).get("source_ends_from"),
            "verified_groups": len(data.get("verified", {})),
            "first_refusal": (plan.get("refusals") or [{}])[0].get("detail"),
        }
    if name == "offsets_group":
        return {"json": True, "partitions": sum(len(g.get("partitions", [])) for g in data)}
    if name == "history":
        return {"json": True, "operations": len(data)}
    return {"json": True}
