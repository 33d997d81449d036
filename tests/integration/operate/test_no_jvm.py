"""The operator commands run without a JVM (neither pyspark nor delta-spark is ever imported), and
without numpy and pandas.

Each command runs as an operator would (``python -m drkit.cli.app ...``) in an environment where no
JVM can start, against a flow that was mirrored and checkpointed; ``-X importtime`` lists every module
the process imported, so the check covers lazy imports inside the command too, not just the CLI's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.kafka_io import commit, create_topic, produce, unique
from support.processes import no_java_env

from drkit.config import DrkitConfig
from drkit.service import Drkit

#: Top-level packages an operator command must not import (the JVM bridge and Spark's Delta).
JVM_PACKAGES = {"pyspark", "py4j", "delta"}
#: Packages an operator command's process goes without (half a second of imports it never needs).
DATAFRAME_PACKAGES = ("numpy", "pandas")
#: The CLI as ``drkit`` runs it, reporting at exit which of DATAFRAME_PACKAGES were loaded (``-X importtime``
#: also lists imports that were attempted and failed, so it cannot tell).
CLI_REPORTING_MODULES = (
    "import atexit, sys\n"
    f"held = lambda: ' '.join(m for m in {DATAFRAME_PACKAGES!r} if m in sys.modules)\n"
    "atexit.register(lambda: sys.stderr.write('\\nloaded: ' + held() + '\\n'))\n"
    "from drkit.cli.app import main\n"
    "main()\n"
)


def loaded(stderr: str) -> list[str]:
    """The DATAFRAME_PACKAGES a process still held at exit."""
    line = next(line for line in stderr.splitlines() if line.startswith("loaded:"))
    return line.removeprefix("loaded:").split()


def imported(stderr: str) -> set[str]:
    """The top-level packages a process imported, from its ``-X importtime`` lines."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "imported package" not in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def test_operator_commands_import_neither_pyspark_nor_delta_spark(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    topic, group = unique("nojvm"), unique("nojvmg")
    create_topic(clusters["A"], topic, 2)
    produce(clusters["A"], topic, [{"partition": i % 2, "value": f"v{i}".encode()} for i in range(40)])
    commit(clusters["A"], group, {(topic, 0): 5, (topic, 1): 7})
    flow = {"source": "A", "target": "B", "topics": {"include": [topic]}, "groups": {"include": [group]}}
    config = make_config([flow])
    service = Drkit(config, spark)
    service.mirror(None, once=True)
    service.translate(None, once=True)
    toml = tmp_path / "operator.toml"
    toml.write_text(
        f"[state]\nroot = {json.dumps(str(config.state_root()))}\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        + f"groups = {{ include = [{json.dumps(group)}] }}\n[flows.heartbeats]\ninterval_seconds = 0\n"
    )
    commands: dict[str, tuple[list[str], set[int]]] = {
        "status": (["status"], {0}),
        "offsets": (["offsets", "--group", group], {0}),
        "failover": (["failover", "--flow", "A->B", "--group", group], {0}),
        "failback": (["failback", "--flow", "A->B", "--group", group], {0, 3}),
        "history": (["history"], {0}),
        "topics sync --dry-run": (["topics", "sync", "--dry-run"], {0}),
    }
    for name, (argv, codes) in commands.items():
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", CLI_REPORTING_MODULES, *argv, "-c", str(toml), "-o", "json"],
            capture_output=True,
            text=True,
            timeout=300,
            env=no_java_env(),
        )
        assert proc.returncode in codes, f"{name}: exit {proc.returncode}: {proc.stdout[-1000:]}"
        json.loads(proc.stdout)  # a whole answer, not a crash
        packages = imported(proc.stderr)
        assert ("drkit" in packages and "deltalake" in packages) or name == "topics sync --dry-run", name
        assert not packages & JVM_PACKAGES, f"{name} imported {sorted(packages & JVM_PACKAGES)}"
        assert loaded(proc.stderr) == [], f"{name} loaded {loaded(proc.stderr)}"
