"""Subprocess helpers for tests that run drkit as an operator would."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def no_java_env() -> dict[str, str]:
    """An environment in which no JVM can start (no java on PATH, no JAVA_HOME or SPARK_HOME): a command
    that succeeds in it started no Spark session."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME", "PYSPARK_SUBMIT_ARGS")}
    env["PATH"] = str(Path(sys.executable).parent)
    return env


def quietly(fn: Any, *args: Any) -> None:
    """Run a job whose source is about to die: its error is expected and not the test's subject."""
    try:
        fn(*args)
    except Exception as exc:
        print(f"job ended: {str(exc).splitlines()[0][:200]}")
