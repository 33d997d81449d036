"""Exactly-once mirroring on real brokers, a real Spark and real Delta tables, counted record by record with
a read_committed consumer of the target: SIGKILLs at random points of a large copy, on both per-batch copy
paths, and of the continuous copy (transactions committed as records flow) while records are produced, leave
0 missing and 0 duplicated records, syncs that describe exactly the committed copies, and exact
translations; a second mirror of the flow on another state root is refused by the flow's lease in one line,
and the target holds each record once."""

from __future__ import annotations

import bisect
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import faulty_mirror
from support.flow_toml import flow_toml
from support.kafka_io import Rec, create_topic, produce, read_all, unique
from support.mirror_checks import audit_syncs, partition_syncs

from drkit.config import DrkitConfig
from drkit.core.translate import SyncIndex
from drkit.mirror.faults import KillAt, KillPoint
from drkit.service import Drkit

COPIED_LINE = re.compile(r"batch (\d+) mirrored [1-9]\d* records")
KEPT_LINE = "past the last sync: kept, not copied again"
FENCED_LINE = "fenced this one"
#: Large batches, so that a random kill often lands inside one's copy (its transaction open).
PER_TRIGGER = 8_000
#: The random kills' seed (an integer) to replay; a fresh one otherwise, printed.
SEED_ENV = "DRKIT_TEST_EOS_SEED"


def _toml(
    path: Path, clusters: dict[str, str], state: Path, topic: str, driver_max: int | None, continuous: bool = False
) -> Path:
    mirror: dict[str, object] = {
        "delivery": "exactly_once",
        "trigger_interval_seconds": 0.5,
        "max_offsets_per_trigger": PER_TRIGGER,
        "continuous_copy": continuous,
    }
    if driver_max is not None:
        mirror["driver_copy_max_records"] = driver_max
    return flow_toml(path, clusters, state, topic, mirror)


def _mirror(toml: Path, log_path: Path, kill_at: KillAt | None = None, debug: bool = True) -> subprocess.Popen[bytes]:
    """The mirror in a process of its own; ``debug``: an unexpected error shows its traceback (but a drkit error
    is raised too, instead of its one ``error:`` line)."""
    flags = ["--verbose", "--debug"] if debug else ["--verbose"]
    with log_path.open("ab") as log:  # a file, not a pipe: a full pipe would block the job
        return subprocess.Popen(
            faulty_mirror.command(*flags, "mirror", "-c", str(toml), kill_at=kill_at),
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _wait_for(log_path: Path, seen: int, what: re.Pattern[str], proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait until the log holds more than ``seen`` matches of ``what`` (or the process ended); the count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        found = len(what.findall(log_path.read_text(errors="replace")))
        if found > seen:
            return found
        time.sleep(0.05)
    return len(what.findall(log_path.read_text(errors="replace")))


def _since(log_path: Path, at: int) -> str:
    """What the log holds from byte ``at`` on (one run's lines)."""
    with log_path.open("rb") as log:
        log.seek(at)
        return log.read().decode(errors="replace")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _counted(source: list[Rec], target: list[Rec]) -> tuple[int, int]:
    """(missing, duplicated): source records with no copy, and copies beyond one per source record."""
    copies = Counter(r.content() for r in target)
    missing = sum(1 for r in source if not copies[r.content()])
    return missing, sum(n - 1 for n in copies.values() if n > 1)


def _translations_exact(syncs: dict[int, list[Any]], source: list[Rec], target: list[Rec]) -> int:
    """For committed offsets C across each source partition: a group placed at translate(C) on the target reads
    exactly the source's records from C on, each once (nothing missed, nothing re-read)."""
    checked = 0
    for partition, ranges in syncs.items():
        index = SyncIndex(ranges)
        src = [r for r in source if r.partition == partition]
        tgt = [r for r in target if r.partition == partition]
        src_offsets, tgt_offsets = [r.offset for r in src], [r.offset for r in tgt]
        src_contents, tgt_contents = [r.content() for r in src], [r.content() for r in tgt]
        for i in range(0, len(src) + 1, max(1, len(src) // 50)):
            committed = src_offsets[i] if i < len(src) else src_offsets[-1] + 1
            at = index.translate(committed).offset
            assert at is not None
            got = tgt_contents[bisect.bisect_left(tgt_offsets, at) :]
            expected = src_contents[bisect.bisect_left(src_offsets, committed) :]
            assert got == expected, f"{partition}: a group at {committed} reads {len(got)}, not {len(expected)}"
            checked += 1
    return checked


def _killed_runs(
    runs: int,
    toml_of: Callable[[int], tuple[str, Path]],
    hooks: dict[int, KillAt],
    log_path: Path,
    rng: random.Random,
    max_delay: float,
    seed: int,
) -> list[str]:
    """Start the mirror ``runs`` times and SIGKILL each run: a run with a hook dies by its own SIGKILL at the
    hook's point of a batch; the others after they mirrored a batch, a random delay later (the kill lands while
    copies are in progress; the target's ends are no measure: a batch replayed after a kill may keep every copy,
    writing none). ``toml_of(run)``: a label and the config that run starts with. What each kill was."""
    kills: list[str] = []
    for run in range(runs):
        label, toml = toml_of(run)
        hook = hooks.get(run)
        seen = len(COPIED_LINE.findall(log_path.read_text(errors="replace"))) if log_path.exists() else 0
        at = log_path.stat().st_size if log_path.exists() else 0  # this run's log starts here
        proc = _mirror(toml, log_path, hook)
        try:
            if hook is None:
                copied = _wait_for(log_path, seen, COPIED_LINE, proc, 120)
                assert copied > seen, f"seed {seed}, run {run}: no copy before the kill: {_since(log_path, at)[-3000:]}"
                delay = rng.uniform(0.0, max_delay)
                time.sleep(delay)
                kills.append(f"{label}+{delay:.2f}s")
            else:
                try:
                    proc.wait(120)
                except subprocess.TimeoutExpired:
                    raise AssertionError(
                        f"run {run}: not killed at {hook.point} in 120 s: {_since(log_path, at)[-3000:]}"
                    ) from None
                # It died by its own SIGKILL, at the intended point of a batch: the progress of this run.
                killed = re.search(rf"killed at {hook.point} of batch \d+", _since(log_path, at))
                assert killed, f"run {run}: no kill at {hook.point}: {_since(log_path, at)[-3000:]}"
                kills.append(f"{label}at {hook.point}")
        finally:
            _kill(proc)
        # Died by SIGKILL (not of an error of its own, nor done).
        assert proc.returncode == -signal.SIGKILL, f"seed {seed}, run {run}: {_since(log_path, at)[-3000:]}"
    return kills


def test_sigkills_at_random_points_on_both_copy_paths_leave_each_record_once(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    topic, partitions, total = unique("eos-kills"), 3, 300_000
    create_topic(clusters["A"], topic, partitions)
    for base in range(0, total, 60_000):  # the producer's queue holds 100,000
        produce(
            clusters["A"],
            topic,
            [{"partition": i % partitions, "key": b"k%d" % i, "value": b"v%d" % i} for i in range(base, base + 60_000)],
        )
    config = make_config(
        [
            {
                "source": "A",
                "target": "B",
                "topics": {"include": [topic]},
                "mirror": {"delivery": "exactly_once", "max_offsets_per_trigger": PER_TRIGGER},
            }
        ]
    )
    state = config.state_root()
    paths = {
        "driver": _toml(tmp_path / "driver.toml", clusters, state, topic, None),
        "executors": _toml(tmp_path / "executors.toml", clusters, state, topic, 0),
    }
    # The random kills' seed, printed first: set SEED_ENV to replay a run's kills.
    seed = int(os.environ.get(SEED_ENV) or int.from_bytes(os.urandom(4), "big"))
    print(f"random kills: seed {seed} (replay with {SEED_ENV}={seed})")
    rng = random.Random(seed)
    log_path = tmp_path / "mirror.log"
    # Six runs, killed with SIGKILL: the copy path alternates (even runs the driver, odd ones the executors); one
    # run on each path dies right after a batch's transactions committed and before its syncs (the read-back case),
    # one with its copies acknowledged and its transactions open (the abort case), the others (both paths) at a
    # random time after a copied batch.
    hooks = {2: KillAt(KillPoint.ACKNOWLEDGED), 3: KillAt(KillPoint.COPIED), 4: KillAt(KillPoint.COPIED)}

    def toml_of(run: int) -> tuple[str, Path]:
        path = "driver" if run % 2 == 0 else "executors"
        return f"{path} ", paths[path]

    kills = _killed_runs(6, toml_of, hooks, log_path, rng, 1.0, seed)
    text = log_path.read_text(errors="replace")
    assert "delivery exactly_once" in text and re.search(r"copied by \d+ task", text), text[-2000:]
    assert KEPT_LINE in text, "no restart found copies committed before their syncs"

    [rest] = Drkit(config, spark).mirror(None, once=True)
    # Records were left for after the last kill: every kill landed before the copy was done.
    assert rest.records > 0, f"seed {seed}: the copy was done before the last kill ({kills})"
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert len(source) == total
    missing, duplicated = _counted(source, target)
    syncs = partition_syncs(spark, config, topic)
    audit = audit_syncs(syncs, source, target, exact=True)  # the syncs describe exactly the committed copies
    checked = _translations_exact(syncs, source, target)
    print(
        f"seed {seed}, kills: {kills}; {rest.records} copied after them; {missing} missing, {duplicated} duplicated, "
        f"{checked} translations exact"
    )
    assert (missing, duplicated) == (0, 0)
    assert audit.described == total == len(target)
    # What a read_uncommitted reader sees besides: the copies of the transactions the kills left open, aborted.
    aborted = len(read_all(clusters["B"], f"A.{topic}", "read_uncommitted")) - total
    print(f"aborted copies on the target, invisible to read_committed: {aborted}")
    assert aborted > 0


class Feed:
    """Unique records to the source in a thread, ``per_second`` a second in bursts of a tenth."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, base: int, per_second: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.next, self.per_second = base, per_second
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._closed.is_set():
            n, step = self.next, self.per_second // 10
            batch = [
                {"partition": i % self.partitions, "key": b"k%d" % i, "value": b"v%d" % i} for i in range(n, n + step)
            ]
            produce(self.bootstrap, self.topic, batch)
            self.next += step
            self._closed.wait(0.1)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(60)


def test_sigkills_at_random_points_of_the_continuous_exactly_once_copy_leave_each_record_once(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    """The driver's continuous copier writes the slots' transactions as records arrive, committed every few tens of
    milliseconds; each batch takes the committed copies of its ranges. SIGKILLs while records are produced: at
    random times, after a batch's copies were taken and before its syncs (the restart reads the committed copies
    back and keeps them), and after its syncs before Spark's commit (the restart settles the batch)."""
    topic, partitions, backlog = unique("eos-continuous"), 3, 40_000
    create_topic(clusters["A"], topic, partitions)
    produce(
        clusters["A"],
        topic,
        [{"partition": i % partitions, "key": b"k%d" % i, "value": b"v%d" % i} for i in range(backlog)],
    )
    config = make_config(
        [
            {
                "source": "A",
                "target": "B",
                "topics": {"include": [topic]},
                "mirror": {"delivery": "exactly_once", "max_offsets_per_trigger": PER_TRIGGER},
            }
        ]
    )
    toml = _toml(tmp_path / "continuous.toml", clusters, config.state_root(), topic, None, continuous=True)
    seed = int(os.environ.get(SEED_ENV) or int.from_bytes(os.urandom(4), "big"))
    print(f"random kills: seed {seed} (replay with {SEED_ENV}={seed})")
    rng = random.Random(seed)
    log_path = tmp_path / "mirror.log"
    # Three runs die by their own SIGKILL at a chosen point: after a batch took its copies and before its syncs
    # (the restart reads them back and keeps them), after its syncs and before Spark's commit (the restart settles
    # it), and with a transaction's copies acknowledged and not committed (its copies are aborted). The others die
    # at a random time after a copied batch.
    hooks = {1: KillAt(KillPoint.COPIED), 3: KillAt(KillPoint.SYNCED), 4: KillAt(KillPoint.ACKNOWLEDGED, 20)}
    feed = Feed(clusters["A"], topic, partitions, backlog, 2_000)
    try:
        kills = _killed_runs(6, lambda run: ("", toml), hooks, log_path, rng, 1.5, seed)
    finally:
        feed.close()
    text = log_path.read_text(errors="replace")
    assert "copy mode continuous, delivery exactly_once" in text, text[-2000:]
    assert "copied by the driver as the records arrived" in text, text[-2000:]

    [rest] = Drkit(config, spark).mirror(None, once=True)
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    assert len(source) == feed.next
    missing, duplicated = _counted(source, target)
    syncs = partition_syncs(spark, config, topic)
    audit = audit_syncs(syncs, source, target, exact=True)
    checked = _translations_exact(syncs, source, target)
    aborted = len(read_all(clusters["B"], f"A.{topic}", "read_uncommitted")) - len(target)
    print(
        f"continuous exactly-once, seed {seed}, kills: {kills}; {len(source)} records, {rest.records} copied after "
        f"them; {missing} missing, {duplicated} duplicated, {checked} translations exact; aborted copies {aborted}"
    )
    assert (missing, duplicated) == (0, 0)
    assert audit.described == len(source) == len(target)
    assert KEPT_LINE in text, "no restart found copies committed before their syncs"
    assert aborted > 0  # the kill with a transaction open: its copies were aborted, invisible to read_committed


def test_a_second_mirror_of_the_flow_on_another_state_root_is_refused_and_the_first_holds_each_record_once(
    clusters: dict[str, str], spark: Any, make_config: Callable[..., DrkitConfig], tmp_path: Path
) -> None:
    """Two state roots are two fences (each its own offset_syncs): the flow's lease on the target refuses the
    second in one line naming the difference, before it touches a transactional id; the first goes on. (A
    fenced holder of the same state root is tests/integration/mirror/test_standby.py.)"""
    topic, partitions, half = unique("eos-two"), 3, 30_000
    create_topic(clusters["A"], topic, partitions)

    def records(base: int) -> list[dict[str, object]]:
        return [{"partition": i % partitions, "key": b"k%d" % i, "value": b"v%d" % i} for i in range(base, base + half)]

    produce(clusters["A"], topic, records(0))
    first_config = make_config(
        [
            {
                "source": "A",
                "target": "B",
                "topics": {"include": [topic]},
                "mirror": {"delivery": "exactly_once", "max_offsets_per_trigger": PER_TRIGGER},
            }
        ]
    )
    first = _toml(tmp_path / "first.toml", clusters, first_config.state_root(), topic, None)
    second = _toml(tmp_path / "second.toml", clusters, tmp_path / "state-second", topic, None)
    log1, log2 = tmp_path / "first.log", tmp_path / "second.log"
    one = _mirror(first, log1, debug=False)
    try:
        assert _wait_for(log1, 1, COPIED_LINE, one, 120) > 1, log1.read_text(errors="replace")[-2000:]
        two = _mirror(second, log2, debug=False)  # the operator's one line is what this test reads
        two.wait(180)
        text2 = log2.read_text(errors="replace")
        assert two.returncode == 3, text2[-3000:]
        error = [line for line in text2.splitlines() if line.startswith("error: ")][-1]
        assert "settings differ from the active mirror's" in error and "state: " in error, error
        assert "Traceback" not in error and "older writers are fenced" not in text2, text2[-3000:]
        print(f"the second mirror was refused with: {error}")
        produce(clusters["A"], topic, records(half))
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and one.poll() is None:
            described = sum(r.record_count for rs in partition_syncs(spark, first_config, topic).values() for r in rs)
            if described >= 2 * half:
                break
            time.sleep(0.5)
        assert one.poll() is None, log1.read_text(errors="replace")[-3000:]
    finally:
        if one.poll() is None:
            os.killpg(one.pid, signal.SIGINT)
            try:
                one.wait(60)
            except subprocess.TimeoutExpired:
                _kill(one)
    source, target = read_all(clusters["A"], topic), read_all(clusters["B"], f"A.{topic}")
    missing, duplicated = _counted(source, target)
    audit = audit_syncs(partition_syncs(spark, first_config, topic), source, target, exact=True)
    print(f"one mirror, one refused: {missing} missing, {duplicated} duplicated, {audit.described} described")
    assert (missing, duplicated) == (0, 0)
    assert len(target) == 2 * half == audit.described
