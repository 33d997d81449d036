"""The operator benchmark's progress lines (stderr)."""

from scripts.bench.lib.output import logger

log = logger("bench_operator")
