"""Failover and failback decisions through the operations, with in-memory clusters and stores.

Every refusal and every plan path, in milliseconds. The wiring against real brokers, Spark and
Delta is proven by tests/integration/operate.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from support.fakes import NOW, NOW_MS, World, two_cluster_config, world

from drkit.core.audit import OperationStatus
from drkit.core.groups import Member
from drkit.core.offsets import SyncRange
from drkit.core.origin import TailRecord
from drkit.core.plan import Plan
from drkit.core.refusals import RefusalReason
from drkit.core.status import EndsObservation, EndsSource
from drkit.core.translate import Position
from drkit.errors import ClusterError, RefusedError
from drkit.layout import JobKind
from drkit.operate.failback import FailbackRequest, failback
from drkit.operate.failover import FailoverRequest, failover
from drkit.store.runs import RunFiles, TranslatorRun


@pytest.fixture
def w(tmp_path: Path) -> World:
    """orders/0 mirrored 0..99 -> 0..99; orders/1 mirrored 0..49 -> 10..59 (a downstream gap first)."""
    w = world(tmp_path)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.syncs.add("A->B", "orders", "A.orders", 1, SyncRange(0, 49, 10, 59))
    w.a.ends.update({("orders", 0): 100, ("orders", 1): 50})
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40)
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 1, 20)
    return w


def request(w: World, **kw: object) -> FailoverRequest:
    return FailoverRequest(**{"flow": w.config.flow("A->B"), "groups": ["billing"], **kw})  # type: ignore[arg-type]


def test_dry_run_plans_exact_offsets_and_changes_nothing(w: World) -> None:
    result = failover(w.context, request(w))
    assert result.status is OperationStatus.DRY_RUN
    assert result.plan.commits() == {"billing": {("A.orders", 0): 40, ("A.orders", 1): 30}}
    assert [m.position for m in result.plan.moves] == [Position.MIRRORED, Position.MIRRORED]
    assert w.b.commits == []
    [record] = w.operations.records
    assert (record.action, record.dry_run, record.status) == ("failover", True, "dry_run")
    assert record.id == result.operation_id


def test_apply_commits_reads_back_and_audits(w: World) -> None:
    result = failover(w.context, request(w, apply=True))
    assert result.status is OperationStatus.APPLIED
    assert w.b.commits == [("billing", {("A.orders", 0): 40, ("A.orders", 1): 30})]
    assert result.verified == {"billing": {"A.orders/0": 40, "A.orders/1": 30}}
    intent, outcome = w.operations.records
    assert (intent.id, intent.status, intent.finished_at) == (outcome.id, "applying", None)
    assert intent.result["commits"] == {"billing": {"A.orders/0": 40, "A.orders/1": 30}}
    assert outcome.status == "applied" and outcome.result["committed"] == result.verified


def test_all_groups_means_every_group_with_checkpoints(w: World) -> None:
    w.checkpoints.add("A->B", "audit", "orders", "A.orders", 0, 7)
    result = failover(w.context, request(w, groups=None, apply=True))
    assert result.plan.commits() == {
        "billing": {("A.orders", 0): 40, ("A.orders", 1): 30},
        "audit": {("A.orders", 0): 7},
    }


def test_no_checkpoints_at_all_is_refused_before_anything(tmp_path: Path) -> None:
    w = world(tmp_path)
    with pytest.raises(
        RefusedError, match=r"has no checkpoints \(none under the state root .*\): run `drkit checkpoint`"
    ):
        failover(w.context, request(w, groups=None))
    assert w.operations.records == []


def test_a_named_group_with_no_checkpoints_in_the_flow_at_all_says_so(tmp_path: Path) -> None:
    """A deleted or misplaced state folder is not a misnamed group: the answer names the state root."""
    w = world(tmp_path)
    with pytest.raises(RefusedError, match=r"has no checkpoints .* or check \[state\] root if it ran before"):
        failover(w.context, request(w, groups=["billing"], apply=True))
    assert w.operations.records == [] and w.b.commits == []


def test_a_group_checkpointed_only_after_as_of_is_refused_as_too_early(w: World) -> None:
    from datetime import UTC, datetime

    result = failover(w.context, request(w, groups=["billing", "nobody"], as_of=datetime(2000, 1, 1, tzinfo=UTC)))
    assert result.status is OperationStatus.REFUSED
    assert sorted((r.reason, r.group) for r in result.plan.refusals) == [
        (RefusalReason.BEFORE_CHECKPOINTS, "billing"),
        (RefusalReason.UNKNOWN_GROUP, "nobody"),
    ]


def test_unknown_group_is_refused(w: World) -> None:
    result = failover(w.context, request(w, groups=["billing", "nobody"], apply=True))
    assert result.status is OperationStatus.REFUSED
    assert [(r.reason, r.group) for r in result.plan.refusals] == [(RefusalReason.UNKNOWN_GROUP, "nobody")]
    assert w.b.commits == [] and w.operations.records[0].status == "refused"


def test_active_group_on_the_target_is_refused_naming_its_members(w: World) -> None:
    w.b.members["billing"] = (Member("m1", "billing-consumer", "/10.0.0.7"),)
    result = failover(w.context, request(w, apply=True))
    assert result.status is OperationStatus.REFUSED
    [refusal] = result.plan.refusals
    assert refusal.reason is RefusalReason.ACTIVE_GROUP and "billing-consumer@/10.0.0.7" in refusal.detail
    assert w.b.commits == []


def test_stale_checkpoint_is_refused_unless_allowed(tmp_path: Path, w: World) -> None:
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40, at_ms=NOW_MS - 400_000)
    w.checkpoints.rows = [
        r for r in w.checkpoints.rows if r.checkpointed_at_ms == NOW_MS - 400_000 or r.checkpoint.partition == 1
    ]
    refused = failover(w.context, request(w, apply=True))
    assert refused.status is OperationStatus.REFUSED
    assert [r.reason for r in refused.plan.refusals] == [RefusalReason.STALE]
    assert "checkpoint is 400s old (limit 300s)" in refused.plan.refusals[0].detail
    assert w.b.commits == []
    allowed = failover(w.context, request(w, apply=True, allow_stale=True))
    assert allowed.status is OperationStatus.APPLIED
    assert any("allowed by --allow-stale" in warning for warning in allowed.plan.warnings)


def test_partition_with_nothing_mirrored_is_refused(w: World) -> None:
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 2, 5)
    result = failover(w.context, request(w, apply=True))
    assert [(r.reason, r.detail) for r in result.plan.refusals] == [
        (
            RefusalReason.UNTRANSLATABLE,
            "orders/2: committed offset 5 cannot be translated (nothing of the partition was mirrored)",
        )
    ]
    assert next(m for m in result.plan.moves if m.partition == 2).position is Position.UNMIRRORED
    assert w.b.commits == []


def test_declined_confirmation_changes_nothing(w: World) -> None:
    asked: list[Plan] = []

    def decline(plan: Plan) -> bool:
        asked.append(plan)
        return False

    result = failover(w.context, request(w, apply=True), confirm=decline)
    assert result.status is OperationStatus.DECLINED and len(asked) == 1
    assert w.b.commits == [] and w.operations.records[0].status == "declined"


def test_refused_plan_never_asks_for_confirmation(w: World) -> None:
    w.b.members["billing"] = (Member("m1", "c", "h"),)
    result = failover(w.context, request(w, apply=True), confirm=lambda plan: pytest.fail("asked"))
    assert result.status is OperationStatus.REFUSED


def test_as_of_uses_the_checkpoints_of_that_moment(w: World) -> None:
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 90, at_ms=NOW_MS)
    now = failover(w.context, request(w))
    before = failover(w.context, request(w, as_of=NOW - timedelta(milliseconds=500)))
    assert now.plan.commits()["billing"][("A.orders", 0)] == 90
    assert before.plan.commits()["billing"][("A.orders", 0)] == 40
    assert w.operations.records[-1].as_of == (NOW - timedelta(milliseconds=500)).isoformat()


def test_moving_a_group_backwards_warns(w: World) -> None:
    w.b.offsets["billing"] = {("A.orders", 0): 60}
    result = failover(w.context, request(w))
    assert result.plan.ok
    assert result.plan.warnings == (
        "group billing A.orders/0: moves back from 60 to 40 (records will be read again on the target)",
    )


def test_past_the_mirror_is_provisional_at_the_end_of_what_was_copied(w: World) -> None:
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 1, 70, at_ms=NOW_MS)
    move = next(m for m in failover(w.context, request(w)).plan.moves if m.partition == 1)
    assert (move.new, move.position) == (60, Position.PAST_END)


def test_a_commit_that_does_not_read_back_is_partial_and_audited(w: World) -> None:
    w.b.tamper[("A.orders", 1)] = 29
    result = failover(w.context, request(w, apply=True))
    assert result.status is OperationStatus.PARTIAL and result.verified == {}
    outcome = w.operations.records[-1]
    assert outcome.status == "partial"
    assert outcome.result["committed"] == {"billing": {"A.orders/0": 40}}
    assert outcome.result["not_committed"] == {"billing": {"A.orders/1": {"planned": 30, "held": 29}}}


def test_rpo_is_live_when_the_source_answers(w: World) -> None:
    w.a.ends[("orders", 0)] = 130
    rpo = failover(w.context, request(w)).rpo
    assert rpo is not None
    assert (rpo.source_reachable, rpo.source_ends_from, rpo.unmirrored_offsets) == (True, EndsSource.LIVE, 30)
    assert w.clusters.probes == ["A"]  # the source is only ever probed (short timeout)


def test_failover_works_with_the_source_gone_and_reports_the_last_observation(w: World) -> None:
    w.a.reachable = False
    RunFiles(w.context.layout).observe_source_ends(
        JobKind.TRANSLATOR, "A->B", EndsObservation(NOW_MS - 1_000, {("orders", 0): 104, ("orders", 1): 50})
    )
    result = failover(w.context, request(w, apply=True))
    assert result.status is OperationStatus.APPLIED
    rpo = result.rpo
    assert rpo is not None
    assert (rpo.source_reachable, rpo.source_ends_from, rpo.unmirrored_offsets, rpo.lower_bound) == (
        False,
        EndsSource.LAST_OBSERVATION,
        4,
        True,
    )
    assert rpo.observation_age_seconds == 1.0
    assert rpo.estimated_since_observation is None  # one observation: no rate to extrapolate


def test_a_damaged_record_of_the_source_ends_is_not_needed_while_the_source_answers(w: World) -> None:
    path = Path(w.context.layout.source_ends(JobKind.MIRROR, "A->B"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"at_ms": 1, "ends": {"orders0": 5}}')
    w.a.ends.update({("orders", 0): 120})
    rpo = failover(w.context, request(w)).rpo
    assert rpo is not None
    assert (rpo.source_ends_from, rpo.unmirrored_offsets) == (EndsSource.LIVE, 20)


def test_rpo_estimate_extrapolates_the_rate_between_the_last_two_observations(w: World) -> None:
    w.a.reachable = False
    runs = RunFiles(w.context.layout)
    runs.observe_source_ends(JobKind.MIRROR, "A->B", EndsObservation(NOW_MS - 3_000, {("orders", 0): 100}))
    runs.observe_source_ends(JobKind.MIRROR, "A->B", EndsObservation(NOW_MS - 1_000, {("orders", 0): 140}))
    rpo = failover(w.context, request(w)).rpo
    assert rpo is not None
    assert (rpo.unmirrored_offsets, rpo.produce_rate_per_second, rpo.estimated_since_observation) == (40, 20.0, 20)


def test_the_freshest_observation_wins(w: World) -> None:
    w.a.reachable = False
    runs = RunFiles(w.context.layout)
    runs.observe_source_ends(JobKind.TRANSLATOR, "A->B", EndsObservation(NOW_MS - 1_500, {("orders", 0): 110}))
    runs.observe_source_ends(JobKind.MIRROR, "A->B", EndsObservation(NOW_MS - 1_000, {("orders", 0): 125}))
    rpo = failover(w.context, request(w)).rpo
    assert rpo is not None and rpo.unmirrored_offsets == 25


def test_rpo_is_never_zero_from_an_observation_older_than_the_last_sync(w: World) -> None:
    # The mirror synced 2 s ago; the last observation is 10 s old: it cannot bound what was lost.
    w.a.reachable = False
    RunFiles(w.context.layout).observe_source_ends(
        JobKind.TRANSLATOR, "A->B", EndsObservation(NOW_MS - 10_000, {("orders", 0): 100, ("orders", 1): 50})
    )
    rpo = failover(w.context, request(w)).rpo
    assert rpo is not None
    assert rpo.unmirrored_offsets is None and rpo.unmirrored_at_observation == 0 and rpo.lower_bound


def test_rpo_is_unknown_without_source_or_observation(w: World) -> None:
    w.a.reachable = False
    rpo = failover(w.context, request(w)).rpo
    assert rpo is not None and rpo.unmirrored_offsets is None and rpo.source_ends_from is EndsSource.UNKNOWN


# -- failback ----------------------------------------------------------------------------------


@pytest.fixture
def back(w: World) -> World:
    """The group runs on B: on A.orders (a copy of A's orders) and on B's own orders, mirrored B->A."""
    w.b.offsets["billing"] = {("A.orders", 0): 55, ("A.orders", 1): 30, ("orders", 0): 8}
    w.b.ends[("orders", 0)] = 12
    w.syncs.add("B->A", "orders", "B.orders", 0, SyncRange(0, 11, 100, 111))
    return w


def back_request(w: World, **kw: object) -> FailbackRequest:
    return FailbackRequest(**{"flow": w.config.flow("A->B"), "groups": ["billing"], **kw})  # type: ignore[arg-type]


def test_failback_routes_copies_through_the_inverse_and_local_topics_through_the_reverse_flow(back: World) -> None:
    result = failback(back.context, back_request(back, apply=True))
    assert result.status is OperationStatus.APPLIED
    assert back.a.commits == [("billing", {("orders", 0): 55, ("orders", 1): 20, ("B.orders", 0): 108})]
    assert {(m.from_topic, m.to_topic, m.via) for m in result.plan.moves} == {
        ("A.orders", "orders", "A->B"),
        ("orders", "B.orders", "B->A"),
    }
    assert result.rpo is None


def test_failback_refuses_while_the_reverse_flow_lags(back: World) -> None:
    back.b.ends[("orders", 0)] = 15
    result = failback(back.context, back_request(back, apply=True))
    assert [(r.reason, r.detail) for r in result.plan.refusals] == [
        (
            RefusalReason.LAGGING,
            "orders/0: reverse flow B->A has mirrored up to 12 of 15; run the reverse mirror until it catches up",
        )
    ]
    assert back.a.commits == []


def test_failback_refuses_a_group_active_on_the_origin(back: World) -> None:
    back.a.members["billing"] = (Member("m", "old-consumer", "h"),)
    result = failback(back.context, back_request(back, apply=True))
    assert [r.reason for r in result.plan.refusals] == [RefusalReason.ACTIVE_GROUP]
    assert back.a.commits == []


def test_failback_of_a_copied_partition_without_syncs_is_refused(back: World) -> None:
    back.b.offsets["billing"][("A.orders", 2)] = 3
    result = failback(back.context, back_request(back))
    assert [r.reason for r in result.plan.refusals] == [RefusalReason.UNTRANSLATABLE]


def test_failback_leaves_uncovered_topics_alone_with_a_warning(back: World) -> None:
    back.b.offsets["billing"][("__internal_thing", 0)] = 3
    result = failback(back.context, back_request(back))
    assert result.plan.ok
    assert "offsets on __internal_thing are not covered by the flows; left alone" in result.plan.warnings[0]


def test_failback_without_a_reverse_flow_refuses_a_group_on_the_targets_own_topics(tmp_path: Path) -> None:
    """Applying would drop billing's position on B's orders: refused like a lagging reverse flow, nothing committed."""
    config = two_cluster_config(tmp_path, flows=[{"source": "A", "target": "B"}])
    w = world(tmp_path, config)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.b.offsets["billing"] = {("A.orders", 0): 55, ("orders", 0): 8}
    result = failback(w.context, back_request(w, apply=True))
    assert result.status is OperationStatus.REFUSED
    assert [(r.reason, r.detail) for r in result.plan.refusals] == [
        (
            RefusalReason.NO_REVERSE_FLOW,
            "group 'billing' has offsets on orders on B and no reverse flow B->A is configured to bring that "
            "position back; configure flow B->A and run its mirror until it catches up, or delete the group's "
            "offsets on those topics on B if it need not resume there",
        )
    ]
    assert w.a.commits == []


def test_failback_without_a_reverse_flow_moves_a_group_only_on_the_copies(tmp_path: Path) -> None:
    config = two_cluster_config(tmp_path, flows=[{"source": "A", "target": "B"}])
    w = world(tmp_path, config)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.b.offsets["billing"] = {("A.orders", 0): 55}
    result = failback(w.context, back_request(w, apply=True))
    assert result.status is OperationStatus.APPLIED and result.plan.warnings == ()
    assert w.a.commits == [("billing", {("orders", 0): 55})]


def test_failback_of_all_groups_selects_the_flows_groups_on_the_cluster_being_left(back: World) -> None:
    back.b.offsets["_drkit-status"] = {("A.orders", 0): 1}  # drkit's own group is never moved
    back.b.offsets["reports"] = {("A.orders", 0): 10}
    result = failback(back.context, back_request(back, groups=None))
    assert sorted(result.plan.commits()) == ["billing", "reports"]


def test_failback_of_an_unknown_group_is_refused(back: World) -> None:
    result = failback(back.context, back_request(back, groups=["nobody"]))
    assert [r.reason for r in result.plan.refusals] == [RefusalReason.UNKNOWN_GROUP]


def test_a_confirmed_idle_checkpoint_is_not_stale(w: World) -> None:
    w.checkpoints.rows = []
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40, at_ms=NOW_MS - 400_000)
    runs = RunFiles(w.context.layout)
    runs.write_last_run("A->B", TranslatorRun(NOW_MS - 3_000, 0.2, 1, 1, 0, confirmed_groups=("billing",)))
    assert failover(w.context, request(w)).status is OperationStatus.DRY_RUN
    # Back in time the confirmation (made later) does not count: only the row tells its age.
    as_of = failover(w.context, request(w, as_of=NOW - timedelta(seconds=50)))
    assert as_of.plan.moves[0].age_seconds == 350.0
    # A run that did not read the group (deleted on the source, or not selected) confirms nothing.
    runs.write_last_run("A->B", TranslatorRun(NOW_MS - 3_000, 0.2, 1, 1, 0, confirmed_groups=("other",)))
    assert [r.reason for r in failover(w.context, request(w)).plan.refusals] == [RefusalReason.STALE]


def test_the_rate_comes_from_the_two_newest_observations_whichever_job_made_them(w: World) -> None:
    w.a.reachable = False
    runs = RunFiles(w.context.layout)
    runs.observe_source_ends(JobKind.TRANSLATOR, "A->B", EndsObservation(NOW_MS - 3_000, {("orders", 0): 100}))
    runs.observe_source_ends(JobKind.MIRROR, "A->B", EndsObservation(NOW_MS - 1_000, {("orders", 0): 150}))
    rpo = failover(w.context, request(w)).rpo
    assert rpo is not None
    assert (rpo.unmirrored_offsets, rpo.produce_rate_per_second, rpo.estimated_since_observation) == (50, 25.0, 25)


def test_a_checkpoint_past_the_synced_end_resumes_on_the_unsynced_copies_by_their_origin(w: World) -> None:
    # A batch delivered orders/0 100..135 to A.orders 100..135, then failed: no sync for them.
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 130)
    w.b.ends.update({("A.orders", 0): 136, ("A.orders", 1): 60})
    w.b.records[("A.orders", 0)] = [TailRecord(100 + i, 100 + i) for i in range(36)]
    result = failover(w.context, request(w, apply=True))
    assert result.status is OperationStatus.APPLIED
    assert w.b.commits == [("billing", {("A.orders", 0): 130, ("A.orders", 1): 30})]
    assert [m.position for m in result.plan.moves] == [Position.UNSYNCED, Position.MIRRORED]
    # Only that partition's tail: where the checkpoint is past the synced end (the translation) and where the
    # target holds records past it (the RPO counts them as mirrored).
    assert set(w.b.tail_reads) == {("A.orders", 0, 100, 136)}
    assert result.rpo is not None and result.rpo.partitions[0].mirrored_up_to == 136


def test_no_unsynced_records_reads_no_tail_and_keeps_the_synced_end(w: World) -> None:
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 130)
    w.b.ends.update({("A.orders", 0): 100, ("A.orders", 1): 60})
    result = failover(w.context, request(w))
    assert result.plan.commits()["billing"][("A.orders", 0)] == 100
    assert result.plan.moves[0].position is Position.PAST_END
    assert w.b.tail_reads == []


def _exactly_once(tmp_path: Path, w: World) -> World:
    """``w``'s clusters and tables with flow A->B mirrored exactly-once through 3 transactional ids."""
    flows = [
        {"source": "A", "target": "B", "mirror": {"delivery": "exactly_once", "transaction_slots": 3}},
        {"source": "B", "target": "A"},
    ]
    w.config = two_cluster_config(tmp_path, flows=flows)
    return w


def test_an_applied_failover_fences_the_exactly_once_mirrors_transactional_ids_first(tmp_path: Path, w: World) -> None:
    w = _exactly_once(tmp_path, w)
    failover(w.context, request(w))
    assert w.b.fenced == []  # a dry run changes nothing
    result = failover(w.context, request(w, apply=True))
    assert result.status is OperationStatus.APPLIED
    ids = ["drkit-mirror.A->B.0", "drkit-mirror.A->B.1", "drkit-mirror.A->B.2"]
    assert w.b.fenced == ids and w.a.fenced == []
    assert w.operations.records[-1].result["fenced"] == ids


def test_an_at_least_once_mirror_has_nothing_to_fence(w: World) -> None:
    failover(w.context, request(w, apply=True))
    assert w.b.fenced == [] and "fenced" not in w.operations.records[-1].result


def test_a_fence_the_target_refuses_is_recorded_and_the_groups_move_anyway(
    tmp_path: Path, w: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = _exactly_once(tmp_path, w)

    def refuse(ids: object) -> None:
        raise ClusterError(
            "cluster B: cannot fence transactional id drkit-mirror.A->B.0: TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
        )

    monkeypatch.setattr(w.b, "fence_transactions", refuse)
    result = failover(w.context, request(w, apply=True))
    assert result.status is OperationStatus.APPLIED
    assert w.b.commits == [("billing", {("A.orders", 0): 40, ("A.orders", 1): 30})]
    outcome = w.operations.records[-1].result
    assert outcome["fenced"] == [] and "AUTHORIZATION" in outcome["fence_error"]
