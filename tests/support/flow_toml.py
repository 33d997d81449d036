"""One flow A->B as a TOML file, for a drkit process of a test's own (a mirror killed by SIGKILL, the CLI)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


def _table(name: str, values: Mapping[str, object]) -> str:
    # JSON's strings, numbers and booleans are TOML's too.
    return f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())


def flow_toml(
    path: Path,
    clusters: Mapping[str, str],
    state: Path,
    topic: str,
    mirror: Mapping[str, object],
    checkpoint: Mapping[str, object] | None = None,
    master: str = "local[2]",
) -> Path:
    """Write the flow A->B of ``topic`` (its ``[flows.mirror]`` and ``[flows.checkpoint]`` settings as given,
    heartbeats off, the Spark UI off) over ``clusters`` (alias -> bootstrap servers) with its state under
    ``state``; the path."""
    path.write_text(
        f"[state]\nroot = {json.dumps(str(state))}\n\n[spark]\nmaster = {json.dumps(master)}\n"
        '[spark.conf]\n"spark.ui.enabled" = "false"\n\n'
        + "".join(f"[clusters.{a}]\nbootstrap_servers = {json.dumps(bs)}\n\n" for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        + _table("flows.mirror", mirror)
        + (_table("flows.checkpoint", checkpoint) if checkpoint else "")
        + "[flows.heartbeats]\ninterval_seconds = 0\n"
    )
    return path
