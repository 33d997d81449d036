"""Mirror processes of one flow on several "hosts" (each its own host name and local folder) sharing a state
root in an S3-compatible store, under steady load, on real brokers, a real Spark and real Delta tables.

One holds the flow's lease on the target and copies; the others stand by. SIGKILL of the active: a standby
takes the lease once it ran out and copies (the time from the kill is printed). SIGSTOP of the next active
for longer than its lease, then SIGCONT: a third process took over meanwhile, and the frozen one stops in one
line and copies nothing more. Proven from the target, record by
record: every copy carries the epoch of the process that made it (``drkit.epoch``), so in each partition no copy
of an older epoch lies after a newer one's; every acknowledged record is there; the syncs describe every
record once; the duplicates are bounded by what each takeover had in flight.
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
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from support.kafka_io import create_topic, end_offsets, produce, read_all, unique
from support.mirror_checks import audit_syncs, copies_by_origin
from support.object_store import ACCESS_KEY_ID, BUCKET, SECRET_ACCESS_KEY, S3Server
from support.ports import STANDBY
from support.waiting import wait_until

from drkit.config import load_config
from drkit.core.mirror_lease import EPOCH_HEADER
from drkit.layout import StateLayout
from drkit.store.offset_syncs import SyncTable

PARTITIONS = 3
PER_TRIGGER = 2_000
#: The most records one read of the continuous copier takes (drkit.mirror.reader.CHUNK), as README states it.
COPIER_READ = 5_000
LEASE_SECONDS = 3.0
HOLDS = re.compile(r"holds the lease: epoch (\d+)")
STANDING_BY = "standing by: the active mirror is"
#: The standby must copy again within this of the kill (the lease, the claim, its query's start, a batch): a
#: bound for "it took over", far above what the test prints (about 9-15 s on this machine).
TAKEOVER_SECONDS = 60.0


class SteadyLoad:
    """Records produced at a steady pace until stopped; every acknowledged record is kept (partition, offset)."""

    def __init__(self, bootstrap: str, topic: str, per_second: int) -> None:
        self.bootstrap, self.topic, self.per_second = bootstrap, topic, per_second
        self.acknowledged: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        step = max(1, self.per_second // 10)
        while not self._stop.is_set():
            started = time.monotonic()
            batch = [
                {"partition": i % PARTITIONS, "key": b"k%d" % i, "value": b"v%d" % i * 8} for i in range(n, n + step)
            ]
            self.acknowledged.extend(produce(self.bootstrap, self.topic, batch))
            n += step
            self._stop.wait(max(0.0, 0.1 - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(60)


class Mirror:
    """``drkit mirror`` in a process of its own, as host ``host`` (its own local folder and metrics port)."""

    def __init__(self, config: Path, host: str, port: int, log: Path) -> None:
        self.host, self.log_path = host, log
        env = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
        env.update(
            {"TEST_S3_KEY_ID": ACCESS_KEY_ID, "TEST_S3_SECRET": SECRET_ACCESS_KEY, "DRKIT_HOST": host},
        )
        local = config.with_name(f"{host}.toml")
        local.write_text(config.read_text().replace('local_dir = "HOST"', f'local_dir = "{host}"'))
        with log.open("ab") as out:  # a file, not a pipe: a full pipe would block the job
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "drkit.cli.app",
                    "--verbose",
                    "mirror",
                    "-c",
                    str(local),
                    "--metrics-port",
                    str(port),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=config.parent,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def epoch(self) -> int | None:
        found = HOLDS.search(self.text())
        return None if found is None else int(found.group(1))

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            self.proc.wait(30)


def write_config(folder: Path, s3: S3Server, clusters: dict[str, str], topic: str, prefix: str, delivery: str) -> Path:
    config = folder / "drkit.toml"
    config.write_text(
        f'[state]\nroot = "s3a://{BUCKET}/{prefix}"\nlocal_dir = "HOST"\n\n'
        f'[state.storage]\nendpoint = "{s3.endpoint}"\npath_style = true\n'
        'access_key_id = "${env:TEST_S3_KEY_ID}"\nsecret_access_key = "${env:TEST_S3_SECRET}"\n\n'
        '[spark]\nmaster = "local[1]"\n[spark.conf]\n"spark.ui.enabled" = "false"\n\n'
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + f'[[flows]]\nsource = "A"\ntarget = "B"\ntopics = {{ include = [{json.dumps(topic)}] }}\n'
        f'[flows.mirror]\ndelivery = "{delivery}"\ntrigger_interval_seconds = 0.5\n'
        f"max_offsets_per_trigger = {PER_TRIGGER}\n"
        f"lease_seconds = {LEASE_SECONDS}\nlease_renew_seconds = 1.0\n"
        "[flows.heartbeats]\ninterval_seconds = 0\n"
    )
    return config


def status_json(config: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRKIT_LOG", "DRKIT_SPARK_LOG_LEVEL")}
    env.update({"TEST_S3_KEY_ID": ACCESS_KEY_ID, "TEST_S3_SECRET": SECRET_ACCESS_KEY})
    done = subprocess.run(
        [sys.executable, "-m", "drkit.cli.app", "status", "-c", str(config), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=config.parent,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def first_copy_of_epoch(bootstrap: str, topic: str, since: dict[int, int], epoch: int, timeout: float) -> float:
    """When (time.monotonic()) a copy made under ``epoch`` was first read on the target past ``since``."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("standby-watch"), "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in since.items()])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.1):
                if msg.error() is None and dict(msg.headers() or []).get(EPOCH_HEADER) == b"%d" % epoch:
                    return time.monotonic()
        raise AssertionError(f"no copy of epoch {epoch} on the target within {timeout:.0f} s")
    finally:
        consumer.close()


@pytest.fixture
def mirrors() -> Iterator[list[Mirror]]:
    made: list[Mirror] = []
    yield made
    for m in made:
        m.stop()


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_one_active_mirror_at_a_time_a_standby_takes_over_and_a_frozen_active_stops_copying(
    s3: S3Server,
    clusters: dict[str, str],
    tmp_path: Path,
    mirrors: list[Mirror],
    monkeypatch: pytest.MonkeyPatch,
    delivery: str,
) -> None:
    """At-least-once: the continuous copy, fenced by the lease's gates and the syncs' fence. Exactly-once: the
    copies per batch in transactions, also fenced by the broker (the new holder initialises the flow's
    transactional ids): a read_committed consumer of the target sees each record once."""
    exactly_once = delivery == "exactly_once"
    topic = unique("standby")
    create_topic(clusters["A"], topic, PARTITIONS)
    config = write_config(tmp_path, s3, clusters, topic, unique("standby-root"), delivery)
    target = f"A.{topic}"
    load = SteadyLoad(clusters["A"], topic, 1_000)
    load.thread.start()
    try:
        first = Mirror(config, "host-a", STANDBY.at(0), tmp_path / "a.log")
        mirrors.append(first)
        wait_until(lambda: first.epoch() is not None, 180, "the first mirror did not take the lease")
        second = Mirror(config, "host-b", STANDBY.at(1), tmp_path / "b.log")
        mirrors.append(second)
        wait_until(lambda: STANDING_BY in second.text(), 180, f"host-b does not stand by:\n{second.text()[-2000:]}")
        wait_until(lambda: sum(end_offsets(clusters["B"], target).values()) > 2_000, 120, "host-a copies nothing")
        # drkit status (from any host) names the active process and the standby, from the target's lease topic.
        shown = status_json(config.with_name("host-b.toml"))["flows"][0]["mirror_lease"]
        assert shown["active"]["host"] == "host-a" and shown["active"]["epoch"] == first.epoch(), shown
        assert shown["active"]["running"] and [s["host"] for s in shown["standbys"]] == ["host-b"], shown
        assert shown["active"]["pid"] == first.proc.pid

        # SIGKILL of the active: the standby copies within the takeover time.
        since = end_offsets(clusters["B"], target)
        first.signal(signal.SIGKILL)
        killed_at = time.monotonic()
        wait_until(lambda: second.epoch() is not None, 60, f"host-b did not take over:\n{second.text()[-2000:]}", 0.05)
        held = time.monotonic() - killed_at
        epoch_b = second.epoch()
        assert epoch_b == (first.epoch() or 0) + 1
        copied_at = first_copy_of_epoch(clusters["B"], target, since, epoch_b, 60)
        took = copied_at - killed_at
        print(f"SIGKILL of the active: the standby held the lease {held:.1f} s and copied {took:.1f} s later")
        # How soon is for a benchmark, not this shared machine (docs/design/lease.md, "Tuning"): here, that it did.
        assert took <= TAKEOVER_SECONDS, f"the standby copied {took:.1f} s after the kill"

        # SIGSTOP of the active for longer than its lease, a third process standing by: it takes over, and
        # the frozen one, woken, stops in one line.
        third = Mirror(config, "host-c", STANDBY.at(2), tmp_path / "c.log")
        mirrors.append(third)
        wait_until(lambda: STANDING_BY in third.text(), 180, f"host-c does not stand by:\n{third.text()[-2000:]}")
        time.sleep(2)
        second.signal(signal.SIGSTOP)
        wait_until(lambda: third.epoch() is not None, 60, f"host-c did not take over:\n{third.text()[-2000:]}")
        epoch_c = third.epoch()
        assert epoch_c == epoch_b + 1
        time.sleep(2)  # host-c copies while host-b is still frozen
        second.signal(signal.SIGCONT)
        second.proc.wait(120)
        text_b = second.text()
        errors = [line for line in text_b.splitlines() if line.startswith("error: ")]
        assert second.proc.returncode == 3 and len(errors) == 1, text_b[-3000:]
        # The operator's one line (Spark's own log of the stopped query is Spark's, not drkit's).
        assert f"epoch {epoch_b}" in errors[0] and "taken over by host-c" in errors[0], errors
        print(f"the frozen active stopped with: {errors[0]}")
        time.sleep(3)
    finally:
        load.stop()

    # The last active copies everything, then stops gracefully (its lease released).
    total = len(load.acknowledged)
    monkeypatch.setenv("TEST_S3_KEY_ID", ACCESS_KEY_ID)  # the test reads the state as the mirrors do
    monkeypatch.setenv("TEST_S3_SECRET", SECRET_ACCESS_KEY)
    loaded = load_config(config.with_name("host-c.toml"))
    syncs = SyncTable(StateLayout(loaded.state_root(), loaded.state_uri(), loaded.state.storage.settings()))
    wait_until(
        lambda: sum(r.record_count for rs in syncs.ranges("A->B", [topic]).values() for r in rs) >= total,
        180,
        "host-c did not catch up",
    )
    third.signal(signal.SIGINT)
    assert third.proc.wait(120) == 0, third.text()[-3000:]

    source, copies = read_all(clusters["A"], topic), read_all(clusters["B"], target)
    assert len(source) == total
    # No interleaving: in each partition, the epochs of the copies never go back.
    back: list[tuple[int, int, int, int]] = []
    for p in range(PARTITIONS):
        newest = 0
        for r in (c for c in copies if c.partition == p):
            epoch = r.epoch()
            assert epoch is not None, f"a copy without its epoch: {r}"
            if epoch < newest:
                back.append((p, r.offset, epoch, newest))
            newest = max(newest, epoch)
    assert back == [], f"copies of an older epoch after a newer one's (partition, offset, epoch, newest): {back[:5]}"
    epochs = Counter(r.epoch() for r in copies)
    assert set(epochs) <= {first.epoch(), epoch_b, epoch_c} and epochs[epoch_c] > 0, epochs
    # Every acknowledged record is on the target; the syncs describe each once; duplicates bounded.
    by_origin = copies_by_origin(source, copies)
    missing = [key for key, n in by_origin.items() if n == 0]
    assert missing == [], f"{len(missing)} acknowledged records missing on the target, e.g. {missing[:5]}"
    ranges = {p: rs for (t, p), rs in syncs.ranges("A->B", [topic]).items() if t == topic}
    audit = audit_syncs(ranges, source, copies, exact=exactly_once)
    assert audit.described == total
    duplicates = sum(n - 1 for n in by_origin.values() if n > 1)
    if exactly_once:  # read_committed: the frozen holder's open transaction was aborted by the new holder
        print(f"exactly-once: {total} records, 0 missing, {duplicates} duplicates, epochs {dict(epochs)}")
        assert duplicates == 0 and len(copies) == total
        return
    # Per takeover, what the old active had in flight: its uncommitted batch, and what its copier held past it.
    ceiling = 2 * (PER_TRIGGER + 2 * PER_TRIGGER + (PARTITIONS + 1) * COPIER_READ)
    print(f"{total} records, 0 missing, {duplicates} duplicates (ceiling {ceiling}), epochs {dict(epochs)}")
    assert duplicates == audit.duplicates and duplicates <= ceiling
