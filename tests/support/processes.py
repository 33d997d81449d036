"""Subprocess helpers for tests that run drkit as an operator would."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def no_java_env() -> dict[str, str]:
    """An environment in which no JVM can start (no java on PATH, no JAVA_HOME or SPARK_HOME): a command
    that succeeds in it started no Spark session."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME", "PYSPARK_SUBMIT_ARGS")}
    env["PATH"] = str(Path(sys.executable).parent)
    return env
