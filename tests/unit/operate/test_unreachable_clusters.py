"""Operator commands with a cluster gone, through the operations on in-memory clusters (drkit.core.reach).

Each command probes every cluster it involves once, all at once, and asks nothing more of one that did
not answer: that is what makes it answer in seconds (no timeout per question, no cluster after another).
Which cluster stops which command, and with which verdict or exit code, is checked here; the wiring on
real brokers (stopped and frozen) by tests/integration/operate/test_outage_answers.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fakes import NOW_MS, World, world

from drkit.core.audit import OperationStatus
from drkit.core.offsets import SyncRange
from drkit.core.status import EndsObservation, EndsSource, Verdict
from drkit.errors import ClusterError
from drkit.layout import JobKind
from drkit.operate.failback import FailbackRequest, failback
from drkit.operate.failover import FailoverRequest, failover, plan_failover
from drkit.operate.status import group_offsets, status
from drkit.store.runs import RunFiles, TranslatorRun


@pytest.fixture
def w(tmp_path: Path) -> World:
    """Flows A->B and B->A; billing checkpointed on orders/0 and orders/1, mirrored; the translator ran."""
    w = world(tmp_path)
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.syncs.add("A->B", "orders", "A.orders", 1, SyncRange(0, 49, 0, 49))
    w.a.ends.update({("orders", 0): 100, ("orders", 1): 50})
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40, at_ms=NOW_MS - 3_000)
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 1, 20, at_ms=NOW_MS - 3_000)
    w.a.offsets["billing"] = {("orders", 0): 40, ("orders", 1): 20}
    runs = RunFiles(w.context.layout)
    runs.write_last_run("A->B", TranslatorRun(NOW_MS - 2_000, 0.25, 1, 2, 0))
    runs.observe_source_ends(JobKind.MIRROR, "A->B", EndsObservation(NOW_MS - 1_000, {("orders", 0): 100}))
    return w


def gone(w: World, *aliases: str) -> None:
    for alias in aliases:
        {"A": w.a, "B": w.b}[alias].reachable = False


@pytest.mark.parametrize(
    ("down", "verdicts", "overall"),
    [
        ((), (Verdict.HEALTHY, Verdict.STALE), Verdict.STALE),  # B->A has nothing mirrored: stale
        (("A",), (Verdict.SOURCE_UNREACHABLE, Verdict.TARGET_UNREACHABLE), Verdict.TARGET_UNREACHABLE),
        (("B",), (Verdict.TARGET_UNREACHABLE, Verdict.SOURCE_UNREACHABLE), Verdict.TARGET_UNREACHABLE),
        (("A", "B"), (Verdict.TARGET_UNREACHABLE, Verdict.TARGET_UNREACHABLE), Verdict.TARGET_UNREACHABLE),
    ],
)
def test_status_probes_each_cluster_once_and_asks_nothing_more_of_one_gone(
    w: World, down: tuple[str, ...], verdicts: tuple[Verdict, ...], overall: Verdict
) -> None:
    gone(w, *down)
    report = status(w.context, w.config.flows)
    assert tuple(f.verdict for f in report.flows) == verdicts and report.verdict is overall
    assert w.clusters.reaches == [["A", "B"]]  # one probe of each cluster for both flows, at once
    for alias in down:
        assert {"A": w.a, "B": w.b}[alias].asked == 0
    for f in report.flows:
        named = {line.split()[1] for line in f.unreachable}
        assert named == set(down)
        assert all("is unreachable: every bootstrap server refused" in line for line in f.unreachable)


def test_status_of_a_flow_with_its_source_gone_keeps_what_the_tables_and_the_target_tell(w: World) -> None:
    gone(w, "A")
    [flow] = status(w.context, [w.config.flow("A->B")]).flows
    assert flow.verdict is Verdict.SOURCE_UNREACHABLE and flow.verdict.exit_code == 22
    assert not flow.source_reachable and flow.target_reachable and flow.lag_records is None
    assert [g.group for g in flow.groups] == ["billing"] and flow.checkpoint_last_run_age_seconds == 2.0


def test_offsets_without_the_source_shows_its_column_unknown(w: World) -> None:
    gone(w, "A")
    report = group_offsets(w.context, w.config.flow("A->B"), "billing")
    assert [r.source_committed for r in report.partitions] == [None, None]
    assert [r.checkpointed_offset for r in report.partitions] == [40, 20]
    assert report.unreachable and report.unreachable[0].startswith("cluster A is unreachable")
    assert w.a.asked == 0


def test_offsets_without_the_target_stops_with_one_line_naming_it(w: World) -> None:
    gone(w, "B")
    with pytest.raises(ClusterError, match=r"^offsets A->B: cluster B is unreachable") as caught:
        group_offsets(w.context, w.config.flow("A->B"), "billing")
    assert caught.value.exit_code == 4 and w.b.asked == 0


def test_failover_without_the_source_applies_and_takes_the_rpo_from_the_last_observation(w: World) -> None:
    gone(w, "A")
    result = failover(w.context, FailoverRequest(w.config.flow("A->B"), ["billing"], apply=True))
    assert result.status is OperationStatus.APPLIED
    assert w.b.commits == [("billing", {("A.orders", 0): 40, ("A.orders", 1): 20})]
    assert result.rpo is not None and not result.rpo.source_reachable
    assert result.rpo.source_ends_from is EndsSource.LAST_OBSERVATION
    assert w.a.asked == 0  # the probe said it was gone: not asked again for the RPO


@pytest.mark.parametrize("down", [("B",), ("A", "B")])
def test_failover_without_the_target_stops_before_anything_is_asked_or_written(w: World, down: tuple[str, ...]) -> None:
    gone(w, *down)
    with pytest.raises(ClusterError, match=r"^failover A->B: cluster B is unreachable") as caught:
        failover(w.context, FailoverRequest(w.config.flow("A->B"), ["billing"], apply=True))
    assert caught.value.exit_code == 4
    assert "cluster A" not in str(caught.value)  # failover never needs the source
    assert w.b.asked == 0 and w.b.commits == [] and w.operations.records == []


def test_plan_failover_probes_the_target_only(w: World) -> None:
    plan = plan_failover(w.context, FailoverRequest(w.config.flow("A->B"), ["billing"]))
    assert plan.ok and w.clusters.reaches == [["B"]]


@pytest.mark.parametrize(("down", "named"), [(("A",), ["A"]), (("B",), ["B"]), (("A", "B"), ["A", "B"])])
def test_failback_needs_both_clusters_and_names_each_one_gone(
    w: World, down: tuple[str, ...], named: list[str]
) -> None:
    w.b.offsets["billing"] = {("A.orders", 0): 40, ("A.orders", 1): 20}
    gone(w, *down)
    with pytest.raises(ClusterError) as caught:
        failback(w.context, FailbackRequest(w.config.flow("A->B"), ["billing"], apply=True))
    message = str(caught.value)
    assert message.startswith("failback A->B: ") and caught.value.exit_code == 4
    assert [a for a in "AB" if f"cluster {a} is unreachable" in message] == named
    assert w.a.asked == 0 and w.b.asked == 0 and w.a.commits == [] and w.operations.records == []


@pytest.mark.parametrize(("gone", "names_failover"), [("A", True), ("B", False)])
def test_a_mirror_with_a_cluster_gone_does_not_start_spark(
    w: World, monkeypatch: pytest.MonkeyPatch, gone: str, names_failover: bool
) -> None:
    """The mirror probes its flow's clusters before Spark: Spark's own clients take minutes to say a
    cluster is gone (measured: 3.5 min for --once with the source stopped), the probe milliseconds."""
    from drkit.service import Drkit

    (w.a if gone == "A" else w.b).reachable = False

    def no_spark(self: Drkit) -> None:
        raise AssertionError("the mirror's context (Spark) was built with a cluster gone")

    monkeypatch.setattr(Drkit, "mirror_context", no_spark)
    with pytest.raises(ClusterError) as refused:
        Drkit(w.config, context=w.context).mirror("A->B", once=True)
    line = str(refused.value)
    assert line.startswith(f"mirror A->B: cluster {gone} is unreachable: every bootstrap server refused")
    assert "nothing was copied" in line
    assert ("drkit failover --flow 'A->B'" in line) is names_failover
    assert w.clusters.reaches == [["A", "B"]]
