"""Readiness per group in status and its gauges, on fakes: what a failover now would do with the group (placed
exactly, skipping unmirrored records, refused as stale or untranslatable), the records it would re-read (its
commits on the source past the checkpoint failover would use, the follower's live one included) and the records
at risk (unread, not mirrored), "unknown", never 0, when the source does not answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from support.fakes import NOW_MS, World, two_cluster_config, world

from drkit import metrics
from drkit.cli.app import main
from drkit.core.checkpoints import Checkpoint, CommittedOffset, RecordedCheckpoint
from drkit.core.live_checkpoints import LiveCheckpoint, encode_value
from drkit.core.offsets import SyncRange
from drkit.core.readiness import GroupReadiness, Readiness, group_rereads
from drkit.core.translate import Position
from drkit.errors import AccessDenied, ClusterError, DrkitError
from drkit.operate.status import status
from drkit.service import Drkit

FLOW = "A->B"


def fresh(tmp_path: Path, follow: bool = False) -> World:
    flow = {"source": "A", "target": "B", "checkpoint": {"follow_commits": follow}}
    w = world(tmp_path, two_cluster_config(tmp_path, flows=[flow]))
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.a.ends.update({("orders", 0): 100, ("orders", 1): 10})
    w.checkpoints.add(FLOW, "billing", "orders", "A.orders", 0, 40, at_ms=NOW_MS - 3_000)
    w.checkpoints.add(FLOW, "ledger", "orders", "A.orders", 0, 70, at_ms=NOW_MS - 3_000)
    w.a.offsets["billing"] = {("orders", 0): 55}  # 15 committed since its checkpoint
    w.a.offsets["ledger"] = {("orders", 0): 70}
    return w


def groups(w: World) -> dict[str, GroupReadiness]:
    [flow] = status(w.context, w.config.flows).flows
    return {g.group: g for g in flow.groups}


def test_a_failover_now_would_re_read_what_a_group_committed_since_its_checkpoint(tmp_path: Path) -> None:
    w = fresh(tmp_path)
    g = groups(w)
    assert (g["billing"].reread_records, g["ledger"].reread_records) == (15, 0)
    metrics.record_status(status(w.context, w.config.flows), [], NOW_MS / 1000)
    sample = REGISTRY.get_sample_value
    assert sample("drkit_status_group_reread_records", {"flow": FLOW, "group": "billing"}) == 15
    assert sample("drkit_status_group_reread_records", {"flow": FLOW, "group": "ledger"}) == 0


def test_the_followers_newer_checkpoint_is_the_one_a_failover_would_use(tmp_path: Path) -> None:
    w = fresh(tmp_path, follow=True)
    live = LiveCheckpoint(Checkpoint(FLOW, "billing", "orders", "A.orders", 0, 55, 55, Position.MIRRORED), NOW_MS)
    w.b.live[FLOW] = {"billing": encode_value([live])}
    assert groups(w)["billing"].reread_records == 0


@pytest.mark.parametrize(
    "refusal, why",
    [
        (AccessDenied("cluster B: principal lacks READ on topic _drkit.checkpoints"), "grant READ and DESCRIBE"),
        (ClusterError("cluster B: _drkit.checkpoints was not read to 5 in 30s"), "not read to 5"),
    ],
    ids=["denied", "timed-out"],
)
def test_live_checkpoints_status_could_not_read_are_said_never_dropped_silently(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, refusal: DrkitError, why: str
) -> None:
    """The rows alone then: the group looks older than a failover may find it, and the status says why."""
    w = fresh(tmp_path, follow=True)
    live = LiveCheckpoint(Checkpoint(FLOW, "billing", "orders", "A.orders", 0, 55, 55, Position.MIRRORED), NOW_MS)
    w.b.live[FLOW] = {"billing": encode_value([live])}
    read = w.b.live_checkpoint_values

    def refuse(flow: str) -> dict[str, bytes] | None:
        raise refusal

    w.b.live_checkpoint_values = refuse  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        main(["status", "--flow", FLOW], facade_factory=lambda path: Drkit(w.config, context=w.context))
    out = capsys.readouterr().out
    assert "A->B: the live checkpoints were not read" in " ".join(out.split()), out
    [flow] = status(w.context, w.config.flows).flows
    assert {g.group: g.reread_records for g in flow.groups}["billing"] == 15  # the row's 40, not the live 55
    assert "the live checkpoints were not read" in flow.live_checkpoints_unread
    assert why in flow.live_checkpoints_unread and "cluster B" in flow.live_checkpoints_unread
    assert flow.as_dict()["live_checkpoints_unread"] == flow.live_checkpoints_unread
    w.b.live_checkpoint_values = read  # type: ignore[method-assign]
    [flow] = status(w.context, w.config.flows).flows
    assert flow.live_checkpoints_unread == ""
    assert {g.group: g.reread_records for g in flow.groups}["billing"] == 0


def test_with_the_source_gone_how_many_is_unknown_never_zero(tmp_path: Path) -> None:
    w = fresh(tmp_path)
    w.a.reachable = False
    assert groups(w)["billing"].reread_records is None
    [flow] = status(w.context, w.config.flows).flows
    assert flow.as_dict()["groups"][0]["reread_records"] is None
    metrics.record_status(status(w.context, w.config.flows), [], NOW_MS / 1000)
    value = REGISTRY.get_sample_value("drkit_status_group_reread_records", {"flow": FLOW, "group": "billing"})
    assert value is not None and value != value  # NaN


def test_a_reset_below_the_checkpoint_and_a_partition_not_committed_add_nothing() -> None:
    def row(partition: int, upstream: int) -> RecordedCheckpoint:
        return RecordedCheckpoint(
            Checkpoint(FLOW, "g", "orders", "A.orders", partition, upstream, upstream, Position.MIRRORED), 0
        )

    committed = {"g": [CommittedOffset("g", "orders", 0, 3), CommittedOffset("g", "orders", 2, 12)]}
    rows = [row(0, 5), row(1, 5), row(2, 10)]
    assert group_rereads(rows, committed) == {"g": 2}
    assert group_rereads(rows, None) == {"g": None}


def test_a_group_on_mirrored_offsets_is_placed_exactly_and_what_it_has_not_read_past_the_mirror_is_at_risk(
    tmp_path: Path,
) -> None:
    w = fresh(tmp_path)
    w.a.ends[("orders", 0)] = 130  # 30 records past the mirror (it copied 0..99)
    g = groups(w)
    assert (g["billing"].readiness, g["ledger"].readiness) == (Readiness.EXACT, Readiness.EXACT)
    assert (g["billing"].at_risk_records, g["ledger"].at_risk_records) == (30, 30)
    w.a.offsets["ledger"] = {("orders", 0): 120}  # read past the mirror on the source: only 10 unread
    assert groups(w)["ledger"].at_risk_records == 10
    metrics.record_status(status(w.context, w.config.flows), [], NOW_MS / 1000)
    sample = REGISTRY.get_sample_value
    assert sample("drkit_status_group_at_risk_records", {"flow": FLOW, "group": "ledger"}) == 10
    labels = {"flow": FLOW, "group": "billing"}
    assert sample("drkit_status_group_readiness", {**labels, "readiness": "exact"}) == 1
    assert sample("drkit_status_group_readiness", {**labels, "readiness": "untranslatable"}) == 0


def test_a_partition_with_nothing_mirrored_makes_its_group_untranslatable(tmp_path: Path) -> None:
    w = fresh(tmp_path)
    w.checkpoints.add(FLOW, "billing", "orders", "A.orders", 1, 4, at_ms=NOW_MS - 3_000)
    g = groups(w)
    assert (g["billing"].readiness, g["ledger"].readiness) == (Readiness.UNTRANSLATABLE, Readiness.EXACT)
    assert g["billing"].at_risk_records == 0 + 6  # partition 0: 100 - max(55, 100); partition 1: 10 - max(4, 0)
    [flow] = status(w.context, w.config.flows).flows
    assert flow.as_dict()["groups"][0]["readiness"] == "untranslatable"


def test_the_syncs_now_win_over_the_rows_translation(tmp_path: Path) -> None:
    """The row says unmirrored; the mirror has copied the partition since: a failover now translates it."""
    w = fresh(tmp_path)
    w.checkpoints.add(FLOW, "billing", "orders", "A.orders", 1, 4, at_ms=NOW_MS - 3_000)
    w.syncs.add(FLOW, "orders", "A.orders", 1, SyncRange(0, 9, 0, 9))
    assert groups(w)["billing"].readiness is Readiness.EXACT


def test_a_committed_offset_before_the_first_mirrored_record_skips_the_ones_never_mirrored(tmp_path: Path) -> None:
    w = fresh(tmp_path)
    w.syncs.add(FLOW, "orders", "A.orders", 1, SyncRange(6, 9, 0, 3))
    w.checkpoints.add(FLOW, "ledger", "orders", "A.orders", 1, 2, at_ms=NOW_MS - 3_000)
    assert groups(w)["ledger"].readiness is Readiness.SKIPS


def test_a_checkpoint_older_than_the_flows_bound_is_stale_as_the_failover_would_refuse_it(tmp_path: Path) -> None:
    w = fresh(tmp_path)
    bound = w.config.flow(FLOW).checkpoint.max_age_seconds
    w.checkpoints.add(FLOW, "old", "orders", "A.orders", 0, 10, at_ms=NOW_MS - int(bound * 1000) - 5_000)
    g = groups(w)
    assert g["old"].readiness is Readiness.STALE
    assert g["old"].checkpoint_age_seconds > bound


def test_with_the_source_gone_the_records_at_risk_are_unknown_and_placement_still_told(tmp_path: Path) -> None:
    w = fresh(tmp_path)
    w.a.reachable = False
    g = groups(w)
    assert (g["billing"].at_risk_records, g["billing"].readiness) == (None, Readiness.EXACT)
    metrics.record_status(status(w.context, w.config.flows), [], NOW_MS / 1000)
    value = REGISTRY.get_sample_value("drkit_status_group_at_risk_records", {"flow": FLOW, "group": "billing"})
    assert value is not None and value != value  # NaN
