"""Two ``drkit mirror --once`` of one flow started at once: one copies, the other is refused (issue 15, item 1).

Before the flow lock both copied, and 2,000 source records became 4,000 on the target. Real brokers;
each mirror is the CLI in its own process (its own Spark), as two operators would start them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from support.kafka_io import Rec, create_topic, end_offsets, produce, read_all, unique

from drkit.layout import StateLayout
from drkit.store.offset_syncs import SyncTable

RECORDS, PARTITIONS = 2000, 3
REFUSAL = re.compile(
    r"flow A->B already has a running mirror \(pid (\d+), since [\d-]+ [\d:]+ UTC\); stop it first or run another flow"
)


def identity(r: Rec) -> tuple[object, ...]:
    return (r.partition, r.key, r.value, r.timestamp)


@dataclass
class Run:
    """One ``drkit mirror --once`` process, its output in files (a pipe could fill and stall it)."""

    proc: subprocess.Popen[bytes]
    out: Path
    seconds: float | None = None  # from the start of both to this one's end

    @staticmethod
    def start(config: Path, name: str) -> Run:
        out = config.parent / f"{name}.out"
        with out.open("wb") as sink:
            proc = subprocess.Popen(
                [sys.executable, "-m", "drkit.cli.app", "mirror", "-c", str(config), "--once"],
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        return Run(proc, out)

    @property
    def output(self) -> str:
        return self.out.read_text()


def test_two_mirrors_of_one_flow_copy_each_record_once(clusters: dict[str, str], tmp_path: Path) -> None:
    topic = unique("single")
    create_topic(clusters["A"], topic, PARTITIONS)
    produce(clusters["A"], topic, [{"partition": i % PARTITIONS, "value": f"rec-{i}".encode()} for i in range(RECORDS)])
    state = tmp_path / "state"
    config = tmp_path / "drkit.toml"
    config.write_text(
        f'[state]\nroot = {json.dumps(str(state))}\n\n[spark]\nmaster = "local[2]"\n\n'
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
    )

    started = time.monotonic()
    runs = [Run.start(config, "first"), Run.start(config, "second")]
    while any(r.seconds is None for r in runs):
        assert time.monotonic() - started < 600, "the mirrors did not end in 10 minutes"
        for r in runs:
            if r.seconds is None and r.proc.poll() is not None:
                r.seconds = time.monotonic() - started
        time.sleep(0.1)

    codes = sorted(r.proc.returncode for r in runs)
    assert codes == [0, 3], [(r.proc.returncode, r.output[-3000:]) for r in runs]
    [winner] = [r for r in runs if r.proc.returncode == 0]
    [refused] = [r for r in runs if r.proc.returncode == 3]
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1, lines
    match = REFUSAL.search(lines[0])
    assert match is not None and int(match[1]) == winner.proc.pid, lines[0]
    # Refused at the lock, before its own Spark: long before the winner's Spark session has copied anything.
    assert refused.seconds is not None and winner.seconds is not None and refused.seconds < winner.seconds
    print(f"refused in {refused.seconds:.1f}s; the mirror copied in {winner.seconds:.1f}s")

    # The target, record by record: each source record exactly once, nothing else.
    target_topic = f"A.{topic}"
    assert sum(end_offsets(clusters["B"], target_topic).values()) == RECORDS
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], target_topic)
    assert len(target) == RECORDS
    values = Counter(r.value for r in target)
    assert values == Counter(f"rec-{i}".encode() for i in range(RECORDS)), [v for v, n in values.items() if n > 1][:5]
    # Partition by partition in order; headers the mirror adds to its copies are not this test's subject.
    assert [identity(r) for r in target] == [identity(r) for r in source]
    ranges = SyncTable(StateLayout(state)).ranges("A->B", [topic])
    values_at = {(r.partition, r.offset): r.value for r in target}
    pairs = [(p, u, d) for (t, p), rs in ranges.items() if t == topic for rng in rs for u, d in rng.pairs()]
    assert len(pairs) == len({(p, d) for p, _, d in pairs}) == RECORDS, "each copy described by exactly one sync"
    source_at = {(r.partition, r.offset): r.value for r in source}
    assert all(source_at[(p, u)] == values_at[(p, d)] for p, u, d in pairs)
