"""Status verdicts, lag figures and a group's offsets, with in-memory clusters and stores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.fakes import NOW_MS, World, two_cluster_config, world

from drkit.core.mirror_lease import Instance, LeaseAct, LeaseEntry
from drkit.core.offsets import SyncRange
from drkit.core.status import Verdict
from drkit.layout import JobKind
from drkit.operate.status import group_offsets, status
from drkit.store.runs import RunFiles, TranslatorRun


def ran_translator(w: World, flow: str, seconds_ago: float) -> None:
    RunFiles(w.context.layout).write_last_run(flow, TranslatorRun(int(NOW_MS - seconds_ago * 1000), 0.25, 1, 2, 0))


@pytest.fixture
def w(tmp_path: Path) -> World:
    """One flow A->B; orders/0 and orders/1 mirrored up to 100 and 50, the source at the same ends."""
    w = world(tmp_path, two_cluster_config(tmp_path, flows=[{"source": "A", "target": "B"}]))
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.syncs.add("A->B", "orders", "A.orders", 1, SyncRange(0, 49, 0, 49))
    w.a.ends.update({("orders", 0): 100, ("orders", 1): 50})
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40, at_ms=NOW_MS - 3_000)
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 1, 20, at_ms=NOW_MS - 7_000)
    ran_translator(w, "A->B", 2.0)
    return w


def test_healthy(w: World) -> None:
    report = status(w.context, w.config.flows)
    assert report.verdict is Verdict.HEALTHY and report.verdict.exit_code == 0
    [flow] = report.flows
    assert flow.lag_records == 0 and flow.source_reachable
    assert [(p.partition, p.mirrored_up_to, p.source_end, p.lag_records, p.lag_seconds) for p in flow.partitions] == [
        (0, 100, 100, 0, 0.0),
        (1, 50, 50, 0, 0.0),
    ]
    assert [(g.group, g.checkpoint_age_seconds) for g in flow.groups] == [("billing", 7.0)]
    assert flow.checkpoint_last_run_age_seconds == 2.0 and flow.checkpoint_last_run_seconds == 0.25
    assert flow.heartbeat_latency_seconds is None


def test_lagging_with_the_age_of_the_oldest_unmirrored_record(w: World) -> None:
    w.a.ends[("orders", 1)] = 57
    w.a.timestamps[("orders", 1)] = NOW_MS - 12_500
    report = status(w.context, [w.config.flow("A->B")])
    assert report.verdict is Verdict.LAGGING and report.verdict.exit_code == 20
    lagging = report.flows[0].partitions[1]
    assert (lagging.lag_records, lagging.lag_seconds) == (7, 12.5)
    assert report.flows[0].lag_records == 7


def test_lag_seconds_unknown_when_the_oldest_record_cannot_be_read(w: World) -> None:
    w.a.ends[("orders", 1)] = 57
    assert status(w.context, w.config.flows).flows[0].partitions[1].lag_seconds is None


@pytest.mark.parametrize("case", ["never ran", "ran too long ago", "nothing mirrored"])
def test_stale(w: World, case: str) -> None:
    if case == "never ran":
        Path(w.context.layout.translator_last_run("A->B")).unlink()
    elif case == "ran too long ago":
        ran_translator(w, "A->B", 301)
    else:
        w.syncs.ranges_by_flow.clear()
    report = status(w.context, w.config.flows)
    assert report.verdict is Verdict.STALE and report.verdict.exit_code == 21


def test_source_unreachable_says_so_and_claims_no_lag(w: World) -> None:
    w.a.reachable = False
    report = status(w.context, w.config.flows)
    assert report.verdict is Verdict.SOURCE_UNREACHABLE and report.verdict.exit_code == 22
    flow = report.flows[0]
    assert flow.lag_records is None and not flow.source_reachable
    assert all(p.source_end is None and p.lag_records is None and p.lag_seconds is None for p in flow.partitions)


@pytest.mark.parametrize("case", ["checkpoint stale", "nothing mirrored", "source also unreachable"])
def test_target_unreachable_has_its_own_verdict_not_stale(w: World, case: str) -> None:
    """With the target broker gone the translator cannot run, so the checkpoints go stale too: the verdict
    names the cause (the target), not the symptom, even when nothing was mirrored yet."""
    w.b.reachable = False
    if case == "checkpoint stale":
        ran_translator(w, "A->B", 301)
    elif case == "nothing mirrored":
        w.syncs.ranges_by_flow.clear()
    else:
        w.a.reachable = False
    report = status(w.context, w.config.flows)
    assert report.verdict is Verdict.TARGET_UNREACHABLE and report.verdict.exit_code == 25
    [flow] = report.flows
    assert not flow.target_reachable and flow.target_divergences == ()
    assert flow.source_reachable is (case != "source also unreachable")


def test_target_unreachable_is_worse_than_an_unreachable_source_in_the_overall_verdict() -> None:
    from drkit.core.status import overall_verdict

    assert overall_verdict([Verdict.SOURCE_UNREACHABLE, Verdict.TARGET_UNREACHABLE]) is Verdict.TARGET_UNREACHABLE
    assert overall_verdict([Verdict.TARGET_UNREACHABLE, Verdict.TARGET_DIVERGED]) is Verdict.TARGET_DIVERGED
    assert len({v.exit_code for v in Verdict}) == len(Verdict)


def test_overall_verdict_is_the_worst_flow(tmp_path: Path) -> None:
    w = world(tmp_path)  # flows A->B and B->A
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 9, 0, 9))
    w.a.ends[("orders", 0)] = 12
    ran_translator(w, "A->B", 1)
    report = status(w.context, w.config.flows)
    assert [f.verdict for f in report.flows] == [Verdict.LAGGING, Verdict.STALE]
    assert report.verdict is Verdict.STALE


def test_running_jobs_are_seen_from_their_pid_files(w: World) -> None:
    layout = w.context.layout
    pid = layout.pid_file(JobKind.MIRROR, "A->B")
    pid.parent.mkdir(parents=True)
    pid.write_text(f"{os.getpid()}\n")
    flow = status(w.context, w.config.flows).flows[0]
    assert flow.mirror_running and not flow.checkpoint_running


def test_status_as_dict_is_plain_json_data(w: World) -> None:
    d = status(w.context, w.config.flows).as_dict()
    assert d["verdict"] == "healthy" and d["flows"][0]["verdict"] == "healthy"
    assert d["flows"][0]["partitions"][0]["mirrored_up_to"] == 100


def test_group_offsets_live_checkpointed_translated_and_on_target(w: World) -> None:
    w.a.offsets["billing"] = {("orders", 0): 45, ("orders", 1): 20}
    w.b.offsets["billing"] = {("A.orders", 0): 40}
    rows = group_offsets(w.context, w.config.flow("A->B"), "billing").partitions
    assert [
        (r.partition, r.source_committed, r.checkpointed_offset, r.translated_now, r.target_group_offset) for r in rows
    ] == [(0, 45, 40, 40, 40), (1, 20, 20, 20, None)]
    assert [r.checkpoint_age_seconds for r in rows] == [3.0, 7.0]


def test_group_offsets_with_the_source_gone(w: World) -> None:
    w.a.reachable = False
    rows = group_offsets(w.context, w.config.flow("A->B"), "billing").partitions
    assert [r.source_committed for r in rows] == [None, None]
    assert [r.translated_now for r in rows] == [40, 20]


def test_an_idle_groups_checkpoint_is_as_fresh_as_the_last_translator_run_that_read_it(w: World) -> None:
    # The rows are 400 s old (nothing changed), but the translator read the group's offsets 2 s ago.
    w.checkpoints.rows = []
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40, at_ms=NOW_MS - 400_000)
    w.checkpoints.add("A->B", "idle-gone", "orders", "A.orders", 0, 10, at_ms=NOW_MS - 400_000)
    RunFiles(w.context.layout).write_last_run(
        "A->B", TranslatorRun(NOW_MS - 2_000, 0.2, 1, 1, 0, confirmed_groups=("billing",))
    )
    ages = {g.group: g.checkpoint_age_seconds for g in status(w.context, w.config.flows).flows[0].groups}
    assert ages == {"billing": 2.0, "idle-gone": 400.0}
    assert [
        r.checkpoint_age_seconds for r in group_offsets(w.context, w.config.flow("A->B"), "billing").partitions
    ] == [2.0]


def test_heartbeat_latency_and_age_are_read_on_the_target_even_with_the_source_gone(w: World) -> None:
    from drkit.core.heartbeat import HeartbeatCopy

    w.b.heartbeats[("A.drkit-heartbeats", b"A->B")] = HeartbeatCopy(NOW_MS - 9_000, NOW_MS - 8_980)
    w.a.reachable = False
    [flow] = status(w.context, [w.config.flow("A->B")]).flows
    assert flow.verdict is Verdict.SOURCE_UNREACHABLE
    assert (flow.heartbeat_latency_seconds, flow.heartbeat_age_seconds) == (0.02, 9.0)
    as_json = status(w.context, [w.config.flow("A->B")]).as_dict()["flows"][0]
    assert (as_json["heartbeat_latency_seconds"], as_json["heartbeat_age_seconds"]) == (0.02, 9.0)


def test_the_heartbeat_topic_s_lag_does_not_make_a_flow_lagging(w: World) -> None:
    w.syncs.add("A->B", "drkit-heartbeats", "A.drkit-heartbeats", 0, SyncRange(0, 9, 0, 9))
    w.a.ends[("drkit-heartbeats", 0)] = 11  # one heartbeat not copied yet: normal, a second's worth
    [flow] = status(w.context, [w.config.flow("A->B")]).flows
    assert flow.verdict is Verdict.HEALTHY
    assert [(p.topic, p.lag_records) for p in flow.partitions if p.lag_records] == [("drkit-heartbeats", 1)]


def test_heartbeats_are_not_counted_in_the_lag_total_nor_the_rpo(w: World) -> None:
    from drkit.core.ports import SyncProgress
    from drkit.core.status import EndsObservation, rpo_report

    w.syncs.add("A->B", "drkit-heartbeats", "A.drkit-heartbeats", 0, SyncRange(0, 9, 0, 9))
    w.a.ends[("drkit-heartbeats", 0)] = 15
    assert status(w.context, [w.config.flow("A->B")]).flows[0].lag_records == 0
    progress = {("orders", 0): SyncProgress(99, 99, None), ("drkit-heartbeats", 0): SyncProgress(9, 9, None)}
    seen = EndsObservation(NOW_MS - 1_000, {("orders", 0): 103, ("drkit-heartbeats", 0): 40})
    report = rpo_report(progress, None, seen, None, NOW_MS)
    assert report.unmirrored_offsets == 3 and [p.topic for p in report.partitions] == ["orders"]
    # Records copied past the synced end (the continuous copy syncs them at the next batch) are not lost.
    ahead = rpo_report(progress, None, seen, None, NOW_MS, {("orders", 0): 102})
    assert ahead.unmirrored_offsets == 1 and ahead.partitions[0].mirrored_up_to == 102
    live = rpo_report(progress, {("orders", 0): 103}, None, None, NOW_MS, {("orders", 0): 103})
    assert live.unmirrored_offsets == 0


def test_the_mirror_lease_names_the_active_process_and_the_standbys_and_an_ended_lease_says_so(w: World) -> None:
    active, standby = Instance("i-1", "host-a", 11), Instance("i-2", "host-b", 22)
    w.b.lease["A->B"] = [
        LeaseEntry(0, NOW_MS - 9_000, LeaseAct.CLAIM, active, 5_000),
        LeaseEntry(1, NOW_MS - 8_000, LeaseAct.RENEW, active, 5_000, claim=0, epoch=3),
        LeaseEntry(2, NOW_MS - 1_000, LeaseAct.STANDBY, standby, 5_000),
    ]
    lease = status(w.context, w.config.flows).flows[0].mirror_lease
    assert lease is not None and lease.active is not None
    assert (lease.active.host, lease.active.pid, lease.active.epoch, lease.active.since_ms) == (
        "host-a",
        11,
        3,
        NOW_MS - 9_000,
    )
    # Its last renewal was 8 s ago with a 5 s lease: ended 3 s ago, whatever the broker's latest time said.
    assert not lease.active.running and lease.active.ends_in_seconds == -3.0
    assert [(s.host, s.seen_seconds_ago) for s in lease.standbys] == [("host-b", 1.0)]
    assert status(w.context, w.config.flows).as_dict()["flows"][0]["mirror_lease"]["active"]["epoch"] == 3


def test_no_lease_topic_is_unknown_not_nobody(w: World) -> None:
    assert status(w.context, w.config.flows).flows[0].mirror_lease is None
