"""drkit's mirror as a benchmark runs it: the real CLI (``python -m drkit.cli.app`` would do the same) in a
child process, with additions that only observe. The mirror's INFO lines (per-batch timing) go to stderr, and a
few steps of the job are wrapped in timers that print ``DRKIT-BENCH-PHASE <step> <seconds>``: the Spark session
start, the offset-syncs table check, the recorded-batch check, the batch's planning, the syncs append and
(optionally) the query start. The parsers of those lines are here too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from scripts.bench.lib.stats import upper_median

PHASE_MARK = "DRKIT-BENCH-PHASE "
#: One timed step: "DRKIT-BENCH-PHASE plan_batch 0.012".
PHASE_LINE = re.compile(r"DRKIT-BENCH-PHASE (\S+) ([\d.]+)")

_HEAD = """\
import functools, logging, sys, time
logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                    format="%(asctime)s %(name)s %(levelname)s %(message)s")
logging.getLogger("drkit.mirror.job").setLevel(logging.INFO)
"""
_PROGRESS = 'logging.getLogger("drkit.mirror.progress").setLevel(logging.DEBUG)\n'
_TIMERS = """\
import drkit.runtime.spark
from drkit.mirror.job import MirrorJob
from drkit.store.offset_syncs import SyncTable

def timed(owner, name, phase):
    original = getattr(owner, name)
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            print(f"DRKIT-BENCH-PHASE {phase} {time.monotonic() - started:.3f}", file=sys.stderr, flush=True)
    setattr(owner, name, wrapper)

timed(drkit.runtime.spark, "build_session", "spark_session")
timed(SyncTable, "ensure", "syncs_table_ensure")
timed(SyncTable, "batch_written", "batch_recorded_check")
timed(MirrorJob, "_plan", "plan_batch")
timed(SyncTable, "write", "syncs_append")
"""
#: Knobs a benchmark turns without a drkit setting (its own experiments), from the environment the child inherits:
#: DRKIT_BENCH_SET = {"module:NAME": value} sets module constants, DRKIT_BENCH_SOURCE_CONSUMER = {"property": value}
#: is added to the driver's source consumer settings (drkit.mirror.context), DRKIT_BENCH_SWITCH_INTERVAL = seconds
#: is the driver's sys.setswitchinterval. Unset: nothing is changed.
_KNOBS = """\
import importlib, json, os
for where, value in json.loads(os.environ.get("DRKIT_BENCH_SET") or "{}").items():
    module, name = where.split(":")
    setattr(importlib.import_module(module), name, value)
if os.environ.get("DRKIT_BENCH_SWITCH_INTERVAL"):
    sys.setswitchinterval(float(os.environ["DRKIT_BENCH_SWITCH_INTERVAL"]))
_extra = json.loads(os.environ.get("DRKIT_BENCH_SOURCE_CONSUMER") or "{}")
if _extra:
    import drkit.mirror.context as _context
    _settings = _context.source_consumer_settings
    _context.source_consumer_settings = lambda: {**_settings(), **_extra}
"""
_QUERY_START = 'timed(MirrorJob, "start", "query_start")\n'
_MAIN = """\
from drkit.cli.app import main
main()
"""


def child_code(*, progress: bool, query_start: bool) -> str:
    """The child's Python code (for ``python -c``; the CLI's arguments follow). ``progress``: Spark's share of
    each batch logged too (drkit.mirror.progress at DEBUG); ``query_start``: the query start timed too."""
    return _HEAD + (_PROGRESS if progress else "") + _KNOBS + _TIMERS + (_QUERY_START if query_start else "") + _MAIN


def phase_sums(log_text: str) -> dict[str, float]:
    """Each timed step's seconds summed over the run."""
    phases: dict[str, float] = {}
    for m in PHASE_LINE.finditer(log_text):
        phases[m[1]] = round(phases.get(m[1], 0.0) + float(m[2]), 3)
    return phases


#: The mirror's batch log line: "batch 7 mirrored 2000 records in 12 ranges (0.31s, plan 0.01s, copy 0.2s, ...)".
_BATCH_LINE = re.compile(r"batch \d+ mirrored \d+ records in \d+ ranges \((\d+(?:\.\d+)?)s, (.*)\)$")
_BATCH_PHASE = re.compile(r"([a-z]+) (\d+(?:\.\d+)?)s")
#: Spark's share of a batch (drkit.mirror.progress): "batch 7 in Spark: 60 ms outside ... (latestOffset 25, ...)".
_SPARK_LINE = re.compile(r"batch \d+ in Spark: (\d+) ms outside drkit's callback \((.*) ms\)$")
_SPARK_PHASE = re.compile(r"([A-Za-z]+) (\d+)")


def drkit_phases(log: Path) -> dict[str, Any]:
    """The drkit child's timed steps: first occurrence of each, and the sum over the run."""
    first: dict[str, float] = {}
    total: dict[str, float] = {}
    batches: list[float] = []
    drkit_parts: dict[str, list[float]] = {}
    spark_parts: dict[str, list[float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if PHASE_MARK in line:
            phase, seconds = line.split(PHASE_MARK, 1)[1].split()
            first.setdefault(phase, float(seconds))
            total[phase] = round(total.get(phase, 0.0) + float(seconds), 3)
        elif match := _BATCH_LINE.search(line):
            batches.append(float(match.group(1)))
            for name, seconds in _BATCH_PHASE.findall(match.group(2)):
                drkit_parts.setdefault(name, []).append(float(seconds) * 1000)
        elif match := _SPARK_LINE.search(line):
            spark_parts.setdefault("outside_callback", []).append(float(match.group(1)))
            for name, ms in _SPARK_PHASE.findall(match.group(2)):
                spark_parts.setdefault(name, []).append(float(ms))
    return {
        "first": first,
        "total": total,
        "batches": len(batches),
        "batch_seconds_total": round(sum(batches), 3),
        "batch_seconds_p50": upper_median(batches),
        # Where a batch's time goes, medians over the run's batches (milliseconds): drkit's callback
        # (plan, copy, syncs) and Spark's own phases around it.
        "batch_ms_p50": {name: upper_median(values) for name, values in sorted(drkit_parts.items())},
        "spark_ms_p50": {name: upper_median(values) for name, values in sorted(spark_parts.items())},
    }
