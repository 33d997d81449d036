"""A flow A->B as the mirror would leave it, without Spark: a topic on A, its copy on B holding the same 10
records, the Delta offset-syncs 0..9 -> 0..9 that describe them, and the config file of the flow (the operator
commands' integration tests build on it, then add the checkpoints they need)."""

from __future__ import annotations

import json
from pathlib import Path

from drkit.layout import StateLayout
from support.kafka_io import create_topic, produce, unique
from support.sync_writer import sync, write_syncs

FLOW = "A->B"
#: Records in the topic and in its copy (offsets 0..RECORDS-1 on both sides).
RECORDS = 10


def synced_flow(clusters: dict[str, str], tmp_path: Path, prefix: str, flow_toml: str = "") -> tuple[Path, str]:
    """The config file (state under ``tmp_path``) and the new topic (named from ``prefix``); ``flow_toml`` is
    appended to the flow's table (its keys and sub-tables). Heartbeats are off: the tests count topics."""
    topic = unique(prefix)
    create_topic(clusters["A"], topic)
    create_topic(clusters["B"], f"A.{topic}")
    for bootstrap, name in ((clusters["A"], topic), (clusters["B"], f"A.{topic}")):
        produce(bootstrap, name, [{"partition": 0, "value": f"v{i}".encode()} for i in range(RECORDS)])
    toml = tmp_path / "drkit.toml"
    toml.write_text(
        f"[state]\nroot = {json.dumps(str(tmp_path / 'state'))}\n"
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        + flow_toml
        + "[flows.heartbeats]\ninterval_seconds = 0\n"
    )
    write_syncs(StateLayout(tmp_path / "state"), [sync(FLOW, topic, 0, (0, RECORDS - 1), (0, RECORDS - 1), 0)])
    return toml, topic
