"""The target's broker SIGKILLed and restarted, and frozen (SIGSTOP), under load, with the default continuous
at-least-once copy: each source record is on the target exactly once, counted one by one by its origin header.

The copier keeps its idempotent producer through both faults: librdkafka retries the copies in flight with their
sequence numbers (the restarted broker knows them from its producer snapshot, the thawed one never lost them),
and the batches wait for those copies instead of copying the records a second time. A duplicate is allowed only
after a fatal producer error, which the log names. Clusters of their own (support.ports.TARGET_FAULTS): the
session's target is never killed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.kafka_io import create_topic, end_offsets, produce, read_all, unique
from support.mirror_checks import audit_syncs, copies_by_origin
from support.ports import TARGET_FAULTS

from drkit.layout import StateLayout
from drkit.localdev.clusters import LocalKafka
from drkit.store.offset_syncs import SyncTable

PARTITIONS = 3
#: Records produced to the source per second, throughout both faults.
RATE = 1_000
#: How long the target broker is frozen: longer than the copier's stall time (5 s), shorter than the
#: producer's request timeout (30 s), so what the test shows is the wait, not a timeout.
FROZEN_SECONDS = 15
#: How long the target broker stays dead before it is started again (its start adds tens of seconds).
KILLED_SECONDS = 5


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, dict[str, str]]]:
    kafka = LocalKafka(tmp_path_factory.mktemp("target-faults"), base_port=TARGET_FAULTS.base, heap="256m")
    try:
        clusters = {c.alias: c.bootstrap_servers for c in kafka.up(["A", "B"])}
        yield kafka, clusters
    finally:
        kafka.down()


class Feed:
    """Unique records to the source, ``RATE`` a second in one burst, in a thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.produced = 0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._closed.is_set():
            n = self.produced
            batch = [
                {"partition": (n + i) % PARTITIONS, "key": b"k%d" % (n + i), "value": b"v" * 100} for i in range(RATE)
            ]
            produce(self.bootstrap, self.topic, batch)
            self.produced += len(batch)
            self._closed.wait(1.0)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(60)


def synced(state: Path, topic: str) -> int:
    ranges = SyncTable(StateLayout(state)).ranges("A->B", [topic])
    return sum(r.upstream_last - r.upstream_first + 1 for rs in ranges.values() for r in rs)


def test_the_target_broker_killed_and_frozen_under_load_leaves_each_record_once(
    pair: tuple[LocalKafka, dict[str, str]], tmp_path: Path
) -> None:
    kafka, clusters = pair
    topic = unique("faults")
    create_topic(clusters["A"], topic, PARTITIONS)
    state = tmp_path / "state"
    toml = tmp_path / "drkit.toml"
    toml.write_text(
        f'[state]\nroot = {json.dumps(str(state))}\n\n[spark]\nmaster = "local[2]"\n'
        '[spark.conf]\n"spark.ui.enabled" = "false"\n\n'
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        "[flows.mirror]\ntrigger_interval_seconds = 0.5\n[flows.heartbeats]\ninterval_seconds = 0\n"
    )
    log_path = tmp_path / "mirror.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "drkit.cli.app", "mirror", "-c", str(toml)],
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "DRKIT_LOG": "info"},
        )
    feed = Feed(clusters["A"], topic)
    timeline: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 240
        while synced(state, topic) < 3 * RATE:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "the mirror did not start copying in time"
            time.sleep(0.5)

        frozen = time.monotonic()
        kafka.freeze("B")
        try:
            time.sleep(FROZEN_SECONDS)
        finally:
            kafka.thaw("B")
        timeline["frozen"] = round(time.monotonic() - frozen, 1)
        time.sleep(8)

        killed = time.monotonic()
        kafka.stop("B", kill=True)
        time.sleep(KILLED_SECONDS)
        kafka.start("B")
        timeline["killed"] = round(time.monotonic() - killed, 1)
        assert proc.poll() is None, f"the mirror exited after B was killed:\n{log_path.read_text()[-3000:]}"
        time.sleep(8)
        feed.close()

        recovering = time.monotonic()
        total = sum(end_offsets(clusters["A"], topic).values())
        while synced(state, topic) < total:
            assert proc.poll() is None, f"the mirror exited:\n{log_path.read_text()[-3000:]}"
            assert time.monotonic() - recovering < 240, f"not caught up in 240 s:\n{log_path.read_text()[-3000:]}"
            time.sleep(1)
        timeline["caught up"] = round(time.monotonic() - recovering, 1)
    finally:
        feed.close()
        kafka.thaw("B")
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)

    text = log_path.read_text()
    assert proc.returncode in (0, 130), text[-3000:]
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert len(source) == feed.produced
    copies = copies_by_origin(source, target, "A")
    missing = sum(1 for n in copies.values() if n == 0)
    duplicates = sum(n - 1 for n in copies.values() if n > 1)
    assert missing == 0, f"{missing} of {len(source)} acknowledged records never reached the target"
    ranges = {p: rs for (t, p), rs in SyncTable(StateLayout(state)).ranges("A->B", [topic]).items() if t == topic}
    audit = audit_syncs(ranges, source, target, exact=False, source_alias="A")
    assert audit.described == len(source) and audit.duplicates == duplicates, audit
    fatal = [ln for ln in text.splitlines() if "hit a fatal error" in ln]
    waited = [ln for ln in text.splitlines() if "has not acknowledged" in ln]
    dropped = [ln for ln in text.splitlines() if "copies its own records" in ln]
    print(
        f"target faults: {len(source)} records, {missing} missing, {duplicates} duplicates; timeline {timeline}; "
        f"waits logged {len(waited)}, copier drops {len(dropped)}, fatal producer errors {len(fatal)}"
    )
    assert waited, "the copier never waited on the target: the faults did not land under load"
    # Each fatal error's line names how many copies it may leave without a sync (the copies held then): the
    # duplicates never pass their sum, and there are none without such a line.
    ceiling = sum(int(m) for ln in fatal for m in re.findall(r"up to (\d+) copies", ln))
    assert duplicates <= ceiling, f"{duplicates} duplicates, {ceiling} allowed by the fatal errors:\n" + "\n".join(
        dropped + fatal
    )
    assert "Traceback" not in text, text[-5000:]
