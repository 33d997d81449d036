"""What delta-rs does when maintenance and a running mirror commit to ``offset_syncs`` at the same time.

The first test pins each outcome (docs/design/maintenance.md, "Concurrent commits"): a maintenance step
is made from a snapshot taken before a mirror's commit, and commits after it. The second runs maintenance
over and over while mirror streams append and coalesce, then checks every row one by one: no pair lost,
none doubled, every batch recorded. No JVM and no Kafka: real Delta tables on disk, written by drkit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError
from support.sync_writer import Writer, config_for

from drkit.core.offsets import SyncRange
from drkit.layout import StateLayout
from drkit.store import delta
from drkit.store.maintenance import maintain
from drkit.store.offset_syncs import SPEC, SyncTable, merge_rows, range_table

PARTS = [("orders", "A.orders", 0), ("orders", "A.orders", 1)]


def pairs_by_stream(layout: StateLayout) -> dict[str, list[tuple[str, int, int, int]]]:
    """Every (topic, partition, upstream, downstream) pair of every row, per stream, repeats kept."""
    out: dict[str, list[tuple[str, int, int, int]]] = {}
    for r in DeltaTable(str(layout.offset_syncs)).to_pyarrow_table().to_pylist():
        assert r["upstream_last"] - r["upstream_first"] == r["downstream_last"] - r["downstream_first"]
        assert r["record_count"] == r["upstream_last"] - r["upstream_first"] + 1
        for i in range(r["record_count"]):
            pair = (r["source_topic"], r["partition"], r["upstream_first"] + i, r["downstream_first"] + i)
            out.setdefault(r["stream_id"], []).append(pair)
    return out


def written(writer: Writer) -> list[tuple[str, int, int, int]]:
    """The pairs a writer's batches recorded (its batches have no gaps: upstream = downstream)."""
    return sorted((t, p, u, u) for (t, p), (u_next, _) in writer.next.items() for u in range(u_next))


@pytest.fixture
def now() -> datetime:
    return datetime.now(UTC)


def history(tmp_path: Path, now: datetime) -> tuple[StateLayout, SyncTable, Writer]:
    """Yesterday's batches 0-9 of stream s1 (to coalesce) and today's 10-11, as plain appends."""
    layout = StateLayout(config_for(tmp_path).state_root())
    store = SyncTable(layout, compact_every=0)
    writer = Writer(store, "A->B", "s1", now=now)
    for b in range(12):
        writer.batch(b, PARTS, today=b >= 10)
    return layout, store, writer


def rewrite_of_yesterday(layout: StateLayout, stale: DeltaTable, now: datetime) -> None:
    """Maintenance's rewrite of s1's old rows (batch ids up to 7, coalesced), made from ``stale``."""
    region = f"sync_date < '{now.date().isoformat()}' AND ((flow = 'A->B' AND stream_id = 's1' AND batch_id <= 7))"
    old = stale.to_pyarrow_table(filters=[("batch_id", "<=", 7), ("sync_date", "<", now.date())])
    if not delta.write(layout.offset_syncs, SPEC, merge_rows(old), replace=region, table=stale, done=lambda: True):
        raise CommitFailedError("refused")  # what maintenance reads as "start again from a fresh version"


def one_batch(writer: Writer) -> pa.Table:
    """The next batch of partition 0 of ``writer``'s stream, as the copier hands it over."""
    u, _ = writer.next[("orders", 0)]
    writer.next[("orders", 0)] = (u + 5, u + 5)
    return range_table([("orders", "A.orders", 0, SyncRange(u, u + 4, u, u + 4))])


def coalescing_write(layout: StateLayout, writer: Writer, at: datetime) -> None:
    """The mirror's commit that also replaces its stream's rows of the day, coalesced."""
    SyncTable(layout, compact_every=1).write("A->B", writer.stream_id, 12, one_batch(writer), at=at)


Commit = Callable[[StateLayout, Writer], None]
OUTCOMES: dict[str, tuple[Commit, str, bool]] = {
    # name: (the mirror's concurrent commit, maintenance's step made before it, does the step commit?)
    "append today / rewrite": (lambda _, w: w.batch(12, PARTS, today=True), "rewrite", True),
    "append yesterday, newer batch / rewrite": (lambda _, w: w.batch(12, PARTS), "rewrite", True),
    "append of a new stream / rewrite": (
        lambda _, w: Writer(w.store, "A->B", "s2", now=w.now).batch(0, PARTS),
        "rewrite",
        True,
    ),
    "coalescing write of yesterday / rewrite": (
        lambda layout, w: coalescing_write(layout, w, w.now - timedelta(days=1)),
        "rewrite",
        False,
    ),
    "append today / optimize": (lambda _, w: w.batch(12, PARTS, today=True), "optimize", True),
    "coalescing write of today / optimize": (lambda layout, w: coalescing_write(layout, w, w.now), "optimize", False),
    "append today / vacuum": (lambda _, w: w.batch(12, PARTS, today=True), "vacuum", True),
}


@pytest.mark.parametrize("case", list(OUTCOMES))
def test_which_maintenance_step_a_mirror_commit_refuses(tmp_path: Path, now: datetime, case: str) -> None:
    mirror_commit, step, commits = OUTCOMES[case]
    layout, store, writer = history(tmp_path, now)
    assert str(layout.offset_syncs) == str(store.path)
    stale = DeltaTable(str(layout.offset_syncs))  # maintenance's snapshot, taken before the mirror's commit
    mirror_commit(layout, writer)
    run: Callable[[], Any] = {
        "rewrite": lambda: rewrite_of_yesterday(layout, stale, now),
        "optimize": lambda: stale.optimize.compact(),
        "vacuum": lambda: stale.vacuum(retention_hours=168, dry_run=False, full=True),
    }[step]
    if commits:
        run()
    else:
        with pytest.raises(CommitFailedError):
            run()
    # whatever the outcome, the mirror's commit is whole and nothing is lost or doubled
    assert sorted(pairs_by_stream(layout)["s1"]) == written(writer), case  # each pair once
    if "new stream" in case:
        assert sorted(pairs_by_stream(layout)["s2"]) == [("orders", p, u, u) for p in (0, 1) for u in range(5)]
        assert store.batch_written("s2", 0)
    else:
        assert store.batch_written("s1", 12), case


def test_maintenance_beside_appending_and_coalescing_mirrors_loses_and_doubles_nothing(
    tmp_path: Path, now: datetime
) -> None:
    config = config_for(tmp_path)
    layout = StateLayout(config.state_root())
    plain = SyncTable(layout, compact_every=0)
    # s1: a day of history to coalesce, then today's batches, coalescing every 3 (the mirror's writes);
    # s2: another flow appending today; s3: a stream still writing yesterday's partition (a batch that
    # started before midnight), each batch newer than every cutoff.
    s1 = Writer(plain, "A->B", "s1", now=now)
    for b in range(40):
        s1.batch(b, PARTS, skip_upstream={("orders", 0): 1} if b == 20 else None)
    s1.store = SyncTable(layout, compact_every=3)
    s2 = Writer(SyncTable(layout, compact_every=0), "B->A", "s2", now=now)
    s3 = Writer(SyncTable(layout, compact_every=0), "A->B", "s3", now=now)
    for b in range(10):
        s3.batch(b, PARTS)
    errors: list[BaseException] = []
    reports: list[dict[str, Any]] = []
    runs = 3

    def maintenance() -> None:
        try:
            for _ in range(runs):
                reports.append(maintain(layout, config, keep_recent_batches=5, today=now.date()).as_dict())
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    thread = threading.Thread(target=maintenance)
    started = time.monotonic()
    thread.start()
    batches = 0
    while thread.is_alive() or batches < 5:
        s1.batch(40 + batches, PARTS, today=True)
        s2.batch(batches, [("orders", "B.orders", 0)], today=True)
        s3.batch(10 + batches, PARTS)
        batches += 1
        time.sleep(0.05)
    thread.join()
    seconds = time.monotonic() - started
    assert errors == []
    found = pairs_by_stream(layout)
    rows = DeltaTable(str(layout.offset_syncs)).to_pyarrow_table().num_rows
    for name, writer in (("s1", s1), ("s2", s2), ("s3", s3)):
        expected = written(writer) if name != "s1" else _with_gap(s1)
        assert sorted(found[name]) == expected, name  # each pair exactly once: none lost, none doubled
    for stream, last in (("s1", 40 + batches), ("s2", batches), ("s3", 10 + batches)):
        for b in range(last - batches, last):
            assert SyncTable(layout).batch_written(stream, b), (stream, b)
    merged = sum(r["offset_syncs"]["coalesce"]["ranges_merged"] for r in reports)
    attempts = [r["offset_syncs"]["coalesce"]["attempts"] for r in reports]
    assert merged > 0 and len(reports) == runs
    print(
        f"{runs} maintenance runs in {seconds:.2f} s beside {batches} batches of 3 streams "
        f"({sum(len(v) for v in found.values())} pairs in {rows} rows checked one by one); "
        f"rewrite attempts {attempts}"
    )


def _with_gap(writer: Writer) -> list[tuple[str, int, int, int]]:
    """s1's pairs: upstream 100 of partition 0 was skipped in batch 20 (so downstream runs one behind)."""
    out = []
    for (t, p), (u_next, d_next) in writer.next.items():
        if p == 0:
            out += [(t, p, u, u) for u in range(100)] + [(t, p, u, u - 1) for u in range(101, u_next)]
            assert d_next == u_next - 1
        else:
            out += [(t, p, u, u) for u in range(u_next)]
    return sorted(out)
