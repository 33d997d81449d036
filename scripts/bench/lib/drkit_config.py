"""The drkit.toml of a benchmark: one flow A -> B between the benchmark's clusters (see clusters.py)."""

from __future__ import annotations

import json
from typing import Any

from scripts.bench.lib.clusters import SOURCE, TARGET


def toml_value(value: Any) -> str:
    """A TOML value: a table as an inline table, anything else as JSON (a JSON string of text, a JSON number,
    boolean or array of those is valid TOML)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def flow_config(
    state_root: str, source: str, target: str, flow: dict[str, Any], spark: dict[str, Any] | None = None
) -> str:
    """The config text: the state root, ``[spark]`` (default: ``master = "local[2]"``), clusters A and B, and one
    flow A -> B whose settings are ``flow`` (keys as TOML keys, dotted ones included)."""
    lines = ["[state]", f"root = {toml_value(state_root)}", "", "[spark]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in (spark or {"master": "local[2]"}).items()]
    for alias, bootstrap in ((SOURCE, source), (TARGET, target)):
        lines += ["", f"[clusters.{alias}]", f"bootstrap_servers = {toml_value(bootstrap)}"]
    lines += ["", "[[flows]]", f'source = "{SOURCE}"', f'target = "{TARGET}"']
    lines += [f"{key} = {toml_value(value)}" for key, value in flow.items()]
    return "\n".join(lines) + "\n"
