"""The translator job's run over fake clusters, a fake sync log and a fake checkpoint log.

Everything a run decides and writes, in milliseconds: the checkpoints appended (only changes), the
run file and the source ends it records, the target groups it commits to (forward only, never an
active one), and the runner going on past an unreachable source. The wiring against real brokers
and Delta tables is proven by tests/integration/translator.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from support.fakes import NOW, NOW_MS, World, two_cluster_config, world

from drkit.core.groups import Member
from drkit.core.live_checkpoints import LiveCheckpoint, newest
from drkit.core.offsets import SyncRange
from drkit.core.translate import Position
from drkit.layout import JobKind, StateLayout
from drkit.store.runs import RunFiles, TranslatorRun
from drkit.translator.context import TranslatorContext
from drkit.translator.job import TranslatorJob, TranslatorRunner
from drkit.wiring import translator_context

FLOW = "A->B"


def context(w: World) -> TranslatorContext:
    """The facade's wiring over the fakes: the run files and sync indexes are the real ones, under tmp_path."""
    return translator_context(
        w.config, StateLayout(w.config.state_root()), lambda: NOW, w.clusters, w.syncs, w.checkpoints
    )


def run_files(w: World) -> RunFiles:
    return RunFiles(StateLayout(w.config.state_root()))


def mirrored(tmp_path: Path, sync_offsets: bool = False) -> World:
    """Topic t (2 partitions) on A: 100 records each, partition 0 mirrored to A.t, group g at 40 and 7."""
    extra = {"flows": [{"source": "A", "target": "B", "checkpoint": {"sync_group_offsets": sync_offsets}}]}
    w = world(tmp_path, two_cluster_config(tmp_path, **extra))
    w.a.ends.update({("t", 0): 100, ("t", 1): 100})
    w.a.offsets["g"] = {("t", 0): 40, ("t", 1): 7}
    w.syncs.add(FLOW, "t", "A.t", 0, SyncRange(0, 99, 1000, 1099))
    return w


def test_a_run_appends_the_translated_checkpoints_and_records_the_run(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    flow = w.config.flows[0]
    run = TranslatorJob(context(w), flow).run_once()

    assert (run.flow, run.groups, run.checkpoints, run.appended, run.finished_at_ms) == (FLOW, 1, 2, 2, NOW_MS)
    by_partition = {r.checkpoint.partition: r.checkpoint for r in w.checkpoints.latest(FLOW)}
    assert by_partition[0].downstream_offset == 1040 and by_partition[0].target_topic == "A.t"
    assert by_partition[1].downstream_offset is None and by_partition[1].position is Position.UNMIRRORED
    runs = run_files(w)
    last = runs.last_run(FLOW)
    assert last is not None and last.finished_at_ms == NOW_MS and last.confirmed_groups == ("g",)
    observed, _ = runs.source_ends(JobKind.TRANSLATOR, FLOW)
    assert observed is not None and observed.at_ms == NOW_MS
    assert observed.ends == {("t", 0): 100, ("t", 1): 100}


def test_a_second_run_appends_only_what_changed_and_reloads_syncs_only_on_a_new_version(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    job = TranslatorJob(context(w), w.config.flows[0])
    job.run_once()
    reads = w.syncs.reads
    assert job.run_once().appended == 0 and w.syncs.reads == reads

    w.a.offsets["g"][("t", 0)] = 60
    w.syncs.add(FLOW, "t", "A.t", 1, SyncRange(0, 9, 500, 509))
    run = job.run_once()
    assert run.appended == 2 and w.syncs.reads == reads + 1
    latest = {r.checkpoint.partition: r.checkpoint.downstream_offset for r in w.checkpoints.latest(FLOW)}
    assert latest == {0: 1060, 1: 507}


def test_target_groups_are_committed_forward_only_and_never_while_active(tmp_path: Path) -> None:
    w = mirrored(tmp_path, sync_offsets=True)
    w.a.offsets["h"] = {("t", 0): 90}
    w.a.offsets["busy"] = {("t", 0): 50}
    w.b.offsets["h"] = {("A.t", 0): 1095}  # already past the translation: never moved back
    w.b.members["busy"] = (Member("m1", "c1", "host1"),)

    run = TranslatorJob(context(w), w.config.flows[0]).run_once()

    assert run.synced_groups == ("g",)
    assert w.b.commits == [("g", {("A.t", 0): 1040})]
    assert w.b.offsets["h"] == {("A.t", 0): 1095}


def test_without_sync_group_offsets_nothing_is_committed_to_the_target(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    assert TranslatorJob(context(w), w.config.flows[0]).run_once().synced_groups == ()
    assert w.b.commits == []


def test_the_runner_goes_on_past_an_unreachable_source_until_its_last_run(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    w.a.reachable = False
    runner = TranslatorRunner(context(w), [w.config.flows[0]])
    assert runner.run(once=False, interval=0.0, max_runs=2) == []
    w.a.reachable = True
    assert [r.appended for r in runner.run(once=False, interval=0.0, max_runs=1)] == [2]


def test_once_raises_the_source_error(tmp_path: Path) -> None:
    from drkit.errors import ClusterError

    w = mirrored(tmp_path)
    w.a.reachable = False
    with pytest.raises(ClusterError, match="cluster A is unreachable"):
        TranslatorRunner(context(w), [w.config.flows[0]]).run(once=True)


def test_checkpoints_and_their_confirmation_are_dated_by_the_read_not_the_write(tmp_path: Path) -> None:
    # Each look at the clock is a second later: the run reads the offsets, then writes, then records itself.
    ticks = iter(range(100))

    def clock() -> datetime:
        return NOW + timedelta(seconds=next(ticks))

    w = mirrored(tmp_path)
    ctx = translator_context(w.config, StateLayout(w.config.state_root()), clock, w.clusters, w.syncs, w.checkpoints)
    run = TranslatorJob(ctx, w.config.flows[0]).run_once()
    read_at = NOW_MS  # the first look: before the offsets were read
    assert run.read_at_ms == read_at < run.finished_at_ms
    assert {r.checkpointed_at_ms for r in w.checkpoints.latest(FLOW)} == {read_at}
    last = run_files(w).last_run(FLOW)
    assert last is not None and last.confirmed_at("g") == read_at and last.confirmed_at("other") is None
    # A commit the follower saw a moment after the read is newer than both: failover takes it.
    [row] = [r for r in w.checkpoints.latest(FLOW) if r.checkpoint.partition == 0]
    later = replace(row.checkpoint, upstream_offset=41, downstream_offset=1041)
    assert (
        newest(row, LiveCheckpoint(later, read_at + 1), last.confirmed_at("g"))
        == LiveCheckpoint(later, read_at + 1).recorded
    )


def test_a_run_file_written_before_the_read_time_was_kept_confirms_at_its_end(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    run_files(w).write_last_run(FLOW, TranslatorRun(NOW_MS, 0.2, 1, 2, 0, ("g",)))
    last = run_files(w).last_run(FLOW)
    assert last is not None and last.confirmed_at("g") == NOW_MS
