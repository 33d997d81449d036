"""The machine record of a run: load averages (on a shared 2-core machine other work moves the timings, so runs
are compared only at similar load), the versions measured, and the git state of the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

#: The repository root (scripts/bench/lib/machine.py is three folders below it).
REPO = Path(__file__).resolve().parents[3]


def load1() -> float:
    """The 1-minute load average, rounded as the reports keep it."""
    return round(os.getloadavg()[0], 2)


def load_averages() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded."""
    return [round(x, 2) for x in os.getloadavg()]


def versions(local_brokers: bool) -> dict[str, str | None]:
    """drkit's version and those of what it runs on (the broker's only if the benchmark started it)."""
    import confluent_kafka

    import drkit
    from drkit import versions as jvm

    def dist(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "drkit": drkit.__version__,
        "spark": dist("pyspark"),
        "delta_spark": dist("delta-spark"),
        "confluent_kafka": dist("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka_broker": jvm.KAFKA_VERSION if local_brokers else None,
        "python": sys.version.split()[0],
    }


def git_facts(repo: Path | None = None) -> dict[str, Any]:
    """The checkout's commit and the drkit files changed in it but not committed."""

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], capture_output=True, text=True, cwd=repo or REPO, check=False).stdout

    return {
        "commit": git("rev-parse", "--short", "HEAD").strip(),
        "uncommitted_drkit_files": [line[3:] for line in git("status", "--short", "--", "drkit").splitlines()],
    }
