"""A cluster gone for 5 minutes, longer than any client timeout, under a running mirror: it waits and
resumes by itself, and every record arrives (0 missing, duplicates only as re-copies of a batch Spark had
not committed).

Three clusters of their own, X, Y and Z, and one ``drkit mirror`` process running two flows, X->Y and
Z->X: an outage of X is a source outage for X->Y and a target outage for Z->X at once, so one 5-minute
outage proves both. X is reached only through a TCP proxy on loopback (it advertises the proxy's port,
so every client's metadata points there): for 5 minutes the proxy forwards nothing and closes nothing,
a dead network (tests/support/blackhole.py). Then X is frozen (SIGSTOP: the broker answers nothing),
and then killed (SIGKILL) and restarted: a refused port rather than a silent one. Records are produced
to Z throughout, and to X between the outages."""

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

import pytest
from support.blackhole import BlackholeProxy
from support.kafka_io import create_topic, end_offsets, produce, read_all, unique
from support.mirror_checks import audit_syncs, copies_by_origin
from support.ports import LONG_OUTAGE

from drkit.layout import StateLayout
from drkit.localdev.clusters import LocalKafka
from drkit.store.offset_syncs import SyncTable

#: Longer than every client timeout on the way: the producer's message.timeout.ms (120 s), Spark's and the
#: driver's consumer default.api.timeout.ms (60 s), the admin clients' (60 s).
OUTAGE_SECONDS = int(os.environ.get("DRKIT_TEST_OUTAGE_SECONDS", "300"))  # shorter only to try it out
#: A broker frozen (shorter than the clients' timeouts: the freeze is waited out without a failure or with one).
FROZEN_SECONDS = 30
#: A broker killed and started again (its start takes tens of seconds on its own).
KILLED_SECONDS = 20
#: Each flow's max_offsets_per_trigger: the most one batch plans.
PER_TRIGGER = 3000
#: The proxy in front of X (its block's last port: support.ports.LONG_OUTAGE).
PROXY_PORT = LONG_OUTAGE.at(40)
PARTITIONS = 3
#: The most records one read of the continuous copier takes (drkit.mirror.reader.CHUNK), as README's "Known
#: limits" states it: written here, not imported, so that the ceilings hold the documented bound.
COPIER_READ = 5_000
#: The most the continuous copier holds when it drops its copies (orphans, README "Known limits"): it stops
#: reading at twice max_offsets_per_trigger, but checks that limit before each read: the read that crosses
#: it, and one more per partition a waiting batch still reads.
COPIER_HOLDS = 2 * PER_TRIGGER + (PARTITIONS + 1) * COPIER_READ


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, BlackholeProxy, dict[str, str]]]:
    """X behind its proxy (X's broker advertises the proxy's port), Y and Z as they are."""
    proxy = BlackholeProxy(PROXY_PORT, LONG_OUTAGE.base)
    x = LocalKafka(
        tmp_path_factory.mktemp("outage-x"),
        base_port=LONG_OUTAGE.base,
        heap="256m",
        extra_properties={"advertised.listeners": f"PLAINTEXT://{proxy.address}"},
    )
    yz = LocalKafka(tmp_path_factory.mktemp("outage-yz"), base_port=LONG_OUTAGE.at(10), heap="256m")
    try:
        x.up(["X"])
        clusters = {"X": proxy.address, **{c.alias: c.bootstrap_servers for c in yz.up(["Y", "Z"])}}
        yield x, proxy, clusters
    finally:
        x.down()
        yz.down()
        proxy.close()


class Feed:
    """Produces unique records to one topic in a thread, while allowed (``paused`` clears it)."""

    def __init__(self, bootstrap: str, topic: str, name: str, per_second: int) -> None:
        self.bootstrap, self.topic, self.name, self.per_second = bootstrap, topic, name, per_second
        self.produced = 0
        self.running = threading.Event()
        self.running.set()
        self._closed = threading.Event()
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._closed.is_set():
            if not self.running.wait(0.2):
                continue
            n = self.produced
            batch = [
                {"partition": (n + i) % PARTITIONS, "key": f"{self.name}{n + i}".encode(), "value": b"v" * 100}
                for i in range(self.per_second)
            ]
            try:
                produce(self.bootstrap, self.topic, batch, **{"message.timeout.ms": 30_000})
                self.produced += len(batch)
            except Exception as exc:  # a record not acknowledged may still be on the source: counted from it
                self.errors.append(str(exc)[:200])
            self._closed.wait(1.0)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(60)


def _toml(path: Path, clusters: dict[str, str], topics: dict[str, str]) -> Path:
    flows = "".join(
        f'[[flows]]\nsource = "{s}"\ntarget = "{t}"\ntopics = {{ include = [{json.dumps(topics[s])}] }}\n'
        f"[flows.mirror]\ntrigger_interval_seconds = 0.5\nmax_offsets_per_trigger = {PER_TRIGGER}\n"
        "[flows.heartbeats]\ninterval_seconds = 0\n\n"
        for s, t in (("X", "Y"), ("Z", "X"))
    )
    path.write_text(
        f'[state]\nroot = {json.dumps(str(path.parent / "state"))}\n\n[spark]\nmaster = "local[2]"\n'
        '[spark.conf]\n"spark.ui.enabled" = "false"\n\n'
        + "".join(f'[clusters.{a}]\nbootstrap_servers = "{bs}"\n\n' for a, bs in clusters.items())
        + flows
    )
    return path


def _copied(bootstrap: str, topic: str) -> int:
    try:
        return sum(end_offsets(bootstrap, topic).values())
    except Exception:
        return 0


def _caught_up(clusters: dict[str, str], topics: dict[str, str], seen: dict[str, int], state: Path) -> bool:
    """Every record of both sources is on its target and synced: the syncs reach the source ends (the target's
    ends alone would count the re-copies of failed batches, orphans, as progress)."""
    syncs = SyncTable(StateLayout(state))
    for source, target in (("X", "Y"), ("Z", "X")):
        ends = end_offsets(clusters[source], topics[source])
        synced = {
            p: max(r.upstream_last for r in rs) + 1
            for (t, p), rs in syncs.ranges(f"{source}->{target}", [topics[source]]).items()
            if rs
        }
        if any(synced.get(p, 0) < end for p, end in ends.items()):
            return False
        seen[source] = sum(ends.values())
    return True


def _ceiling(log: str, flow: str) -> tuple[int, Counter[str]]:
    """The most duplicates the mirror's log allows on ``flow``'s target, and the events it counts: every copy
    made more than once comes from an attempt that failed or was stopped, and each says so in one line.
    A copier that drops its copies orphans what it holds; a failed attempt of a batch copied on its own, the
    batch (at most max_offsets_per_trigger); a batch stopped half way, both."""
    kinds = {
        "dropped": (rf"flow {re.escape(flow)}: batch \d+ copies its own records", COPIER_HOLDS),
        "failed": (rf"flow {re.escape(flow)}: batch \d+ (failed .*: copying it again|is copied again)", PER_TRIGGER),
        "stopped": (
            rf"flow {re.escape(flow)}: (stopped during a batch|the query did not stop within)",
            PER_TRIGGER + COPIER_HOLDS,
        ),
    }
    events = Counter({kind: len(re.findall(pattern, log)) for kind, (pattern, _) in kinds.items()})
    return sum(events[kind] * most for kind, (_, most) in kinds.items()), events


def _account(
    state: Path, clusters: dict[str, str], topics: dict[str, str], log: str
) -> dict[str, tuple[int, int, int, Counter[str]]]:
    """Record by record, per flow: (source records, duplicates on the target, their ceiling, the events the
    ceiling counts); fails on any missing one and on more duplicates than the mirror's failures explain."""
    syncs = SyncTable(StateLayout(state))
    out = {}
    for source, target in (("X", "Y"), ("Z", "X")):
        topic = topics[source]
        src = read_all(clusters[source], topic)
        tgt = read_all(clusters[target], f"{source}.{topic}")
        ranges = {p: rs for (t, p), rs in syncs.ranges(f"{source}->{target}", [topic]).items() if t == topic}
        audit = audit_syncs(ranges, src, tgt, exact=False, source_alias=source)
        # Every source record has exactly one sync (0 missing); every other copy is a re-copy of a record of
        # a batch that failed before Spark committed it (an orphan: no sync describes it).
        assert audit.described == len(src), f"{source}->{target}: {len(src) - audit.described} records missing"
        assert audit.orphans == audit.duplicates == len(tgt) - len(src), (source, audit)
        copies = copies_by_origin(src, tgt, source)
        assert [key for key, n in copies.items() if n == 0] == [], f"{source}->{target}: records missing"
        duplicates = sum(n - 1 for n in copies.values() if n > 1)
        assert duplicates == audit.duplicates, (source, duplicates, audit)
        flow = f"{source}->{target}"
        ceiling, events = _ceiling(log, flow)
        assert duplicates <= ceiling, f"{flow}: {duplicates} duplicates, more than its failures explain: {events}"
        out[flow] = (len(src), duplicates, ceiling, events)
    return out


def test_a_cluster_gone_for_five_minutes_as_source_and_as_target_loses_nothing(
    three: tuple[LocalKafka, BlackholeProxy, dict[str, str]], tmp_path: Path
) -> None:
    kafka, proxy, clusters = three
    topics = {"X": unique("outx"), "Z": unique("outz")}
    for alias, topic in topics.items():
        create_topic(clusters[alias], topic, PARTITIONS)
    for alias, topic in topics.items():  # a backlog: the freeze comes in the middle of copying it
        produce(
            clusters[alias],
            topic,
            [{"partition": i % PARTITIONS, "key": f"{alias}b{i}".encode(), "value": b"b" * 100} for i in range(30_000)],
        )
    toml = _toml(tmp_path / "drkit.toml", clusters, topics)
    log_path = tmp_path / "mirror.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "drkit.cli.app", "mirror", "-c", str(toml)],
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            # drkit's progress lines too: each failed attempt's "copied again" line is one the ceiling counts.
            env={**os.environ, "DRKIT_LOG": "info"},
        )
    feeds = {a: Feed(clusters[a], t, f"{a}f", 100) for a, t in topics.items()}
    timeline: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 300
        while min(_copied(clusters["Y"], f"X.{topics['X']}"), _copied(clusters["X"], f"Z.{topics['Z']}")) < 3000:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "the mirror did not start copying in time"
            time.sleep(0.5)

        # Nothing reaches X for 5 minutes: the source of X->Y and the target of Z->X.
        feeds["X"].running.clear()
        started = time.monotonic()
        proxy.blackhole()
        try:
            while time.monotonic() - started < OUTAGE_SECONDS:
                assert proc.poll() is None, f"the mirror exited during the outage:\n{log_path.read_text()[-3000:]}"
                time.sleep(2)
        finally:
            proxy.heal()
        timeline["blackholed"] = time.monotonic() - started
        feeds["X"].running.set()
        time.sleep(5)

        # X frozen: the broker itself answers nothing.
        feeds["X"].running.clear()
        frozen = time.monotonic()
        kafka.freeze("X")
        try:
            time.sleep(FROZEN_SECONDS)
        finally:
            kafka.thaw("X")
        timeline["frozen"] = time.monotonic() - frozen
        feeds["X"].running.set()
        time.sleep(5)

        # X killed and started again: a refused port instead of a silent one.
        feeds["X"].running.clear()
        killed = time.monotonic()
        kafka.stop("X", kill=True)
        # What monitoring sees meanwhile: X->Y's source and Z->X's target are gone (the worst is the target).
        status = subprocess.run(
            [sys.executable, "-m", "drkit.cli.app", "status", "-c", str(toml), "-o", "json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        time.sleep(max(0.0, KILLED_SECONDS - (time.monotonic() - killed)))
        kafka.start("X")
        timeline["killed"] = time.monotonic() - killed
        assert proc.poll() is None, f"the mirror exited after X was killed:\n{log_path.read_text()[-3000:]}"
        feeds["X"].running.set()
        time.sleep(5)
        for feed in feeds.values():
            feed.close()

        recovering = time.monotonic()
        seen: dict[str, int] = {}
        while not _caught_up(clusters, topics, seen, toml.parent / "state"):
            assert proc.poll() is None, f"the mirror exited:\n{log_path.read_text()[-3000:]}"
            assert time.monotonic() - recovering < 300, (
                f"not caught up in 300 s: {seen}\n{log_path.read_text()[-3000:]}"
            )
            time.sleep(2)
        timeline["caught up"] = time.monotonic() - recovering
    finally:
        for feed in feeds.values():
            feed.close()
        kafka.thaw("X")
        proxy.heal()
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)

    text = log_path.read_text()
    assert proc.returncode in (0, 130), text[-3000:]
    assert status.returncode == 25, status.stdout[-2000:] + status.stderr[-2000:]
    verdicts = {f["flow"]: f["verdict"] for f in json.loads(status.stdout)["flows"]}
    assert verdicts == {"X->Y": "source unreachable", "Z->X": "target unreachable"}, verdicts
    counted = _account(toml.parent / "state", clusters, topics, text)
    # The outage is told, once per change, not per retry: a line when X stops answering and one when it is
    # back, per flow and per episode (the blackhole, the freeze, the kill; a loaded machine may add one).
    gone = [ln for ln in text.splitlines() if "unreachable since" in ln]
    back = [ln for ln in text.splitlines() if "reachable again after" in ln]
    assert any("flow X->Y: source X unreachable since" in ln for ln in gone), text[-5000:]
    assert any("flow Z->X: target X unreachable since" in ln for ln in gone), text[-5000:]
    assert 2 <= len(gone) <= 10 and len(back) >= 2, "\n".join(gone + back)
    assert "Traceback" not in text, text[-5000:]
    print(
        f"long outage: {timeline}; per flow (source records, duplicates, ceiling, events): {counted}; "
        f"log lines: {gone + back}"
    )
