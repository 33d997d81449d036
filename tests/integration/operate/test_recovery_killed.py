"""The records a failover left on the source, recovered by the flow's exactly-once mirror through two SIGKILLs, on
real brokers, a real Spark and real Delta tables: ``drkit recover`` counts exactly what the target does not hold
after each kill (its copies read one by one), and once the mirror has run to the end every record of the source
is on the target once, the group moved by the failover reads each record it had not processed, and a second run
copies nothing."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import faulty_mirror
from support.flow_toml import flow_toml
from support.kafka_io import commit, consume_as_group, create_topic, produce, read_all, unique

from drkit.config import DrkitConfig
from drkit.core.recovery import GapEnd, RecoveryVerdict
from drkit.mirror.faults import KillAt, KillPoint
from drkit.service import Drkit

PARTITIONS, MIRRORED, LEFT_BEHIND, PROCESSED = 2, 1_000, 20_000, 100
#: Records per batch: the gap takes ten, so each kill lands inside the recovery.
PER_TRIGGER = 2_000


def _toml(path: Path, clusters: dict[str, str], config: DrkitConfig, topic: str) -> Path:
    """The same flow as ``config``, as a file for the mirror's own process."""
    mirror = {"delivery": "exactly_once", "max_offsets_per_trigger": PER_TRIGGER}
    return flow_toml(path, clusters, config.state_root(), topic, mirror, {"max_age_seconds": 3600})


def _killed(toml: Path, log: Path, point: KillPoint) -> None:
    """The mirror in a process of its own, dead by its own SIGKILL at ``point`` of its first batch."""
    at = log.stat().st_size if log.exists() else 0
    with log.open("ab") as out:
        proc = subprocess.Popen(
            faulty_mirror.command("--verbose", "mirror", "-c", str(toml), kill_at=KillAt(point)),
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        proc.wait(240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    text = log.read_bytes()[at:].decode(errors="replace")
    assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {text[-3000:]}"
    assert f"killed at {point}" in text, text[-3000:]


def test_a_recovery_killed_twice_leaves_each_record_left_behind_on_the_target_once(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    topic, group = unique("left-behind"), unique("g")
    copy = f"A.{topic}"
    create_topic(clusters["A"], topic, PARTITIONS)

    def feed(start: int, count: int) -> None:
        for base in range(start, start + count, 10_000):
            batch = range(base, min(base + 10_000, start + count))
            produce(
                clusters["A"],
                topic,
                [{"partition": i % PARTITIONS, "key": b"k%d" % i, "value": b"v%d" % i} for i in batch],
            )

    feed(0, MIRRORED)
    flow = {
        "source": "A",
        "target": "B",
        "topics": {"include": [topic]},
        "mirror": {"delivery": "exactly_once", "max_offsets_per_trigger": PER_TRIGGER},
        "checkpoint": {"max_age_seconds": 3600},
    }
    config = make_config([flow])
    service = Drkit(config, spark)
    service.mirror("A->B", once=True)
    commit(clusters["A"], group, {(topic, p): PROCESSED for p in range(PARTITIONS)})
    service.translate("A->B", once=True)
    feed(MIRRORED, LEFT_BEHIND)  # the mirror is not running: these are left behind at the failover

    moved = service.failover("A->B", [group], apply=True)
    assert moved.status == "applied", moved
    report = service.recovery("A->B")
    assert (report.verdict, report.end_from, report.unrecovered) == (
        RecoveryVerdict.PENDING,
        GapEnd.AT_FAILOVER,
        LEFT_BEHIND,
    )
    assert report.exit_code == 32

    toml, log = _toml(tmp_path / "mirror.toml", clusters, config, topic), tmp_path / "mirror.log"
    total = MIRRORED + LEFT_BEHIND
    # Killed with its first batch's copies in open transactions (aborted by the next run), then killed with a
    # batch's transactions committed and its syncs not written (the next run keeps those copies).
    for point in (KillPoint.ACKNOWLEDGED, KillPoint.COPIED):
        _killed(toml, log, point)
        on_target = read_all(clusters["B"], copy)  # read_committed: the copies that count
        assert Counter(r.content() for r in on_target).most_common(1)[0][1] == 1, "a record copied twice"
        left = service.recovery("A->B")
        assert left.verdict is RecoveryVerdict.PENDING
        assert left.unrecovered == total - len(on_target), (point, left.unrecovered, len(on_target))
    assert len(on_target) > MIRRORED, "the kill at 'copied' left no committed copy to keep"

    [rest] = service.mirror("A->B", once=True)
    assert rest.records > 0
    done = service.recovery("A->B")
    assert (done.verdict, done.unrecovered, done.exit_code) == (RecoveryVerdict.RECOVERED, 0, 0)
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], copy)
    copies = Counter(r.content() for r in target)
    missing = sum(1 for r in source if not copies[r.content()])
    duplicated = sum(n - 1 for n in copies.values())
    print(
        f"recovery through two SIGKILLs: {len(source)} on A, {len(target)} on B, {missing} missing, {duplicated} twice"
    )
    assert (len(source), missing, duplicated) == (total, 0, 0)
    # The group moved by the failover reads, on B, every record it had not processed on A: the mirrored ones and
    # the recovered ones, each once.
    got = consume_as_group(clusters["B"], group, copy, total, idle_polls=10)
    expected = Counter(r.content() for r in source if r.offset >= PROCESSED)
    assert Counter(r.content() for r in got) == expected
    # A second run finds nothing to copy, and the count holds.
    [again] = service.mirror("A->B", once=True)
    assert again.records == 0 and len(read_all(clusters["B"], copy)) == total
