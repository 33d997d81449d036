"""The status exporter's gauges (``drkit status --watch``): what each status report and the audit trail set.

Run through the facade on in-memory clusters and stores (``Drkit.watch_status`` with ``max_runs``), read
back from prometheus_client's registry, so a gauge that is not set, or set to a value that looks better
than the truth (0 where the figure is unknown), fails here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from support.fakes import NOW_MS, World, two_cluster_config, world

from drkit.core.offsets import SyncRange
from drkit.core.status import StatusReport, Verdict
from drkit.service import Drkit
from drkit.store.runs import RunFiles, TranslatorRun

FLOW = "A->B"


def value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


@pytest.fixture
def w(tmp_path: Path) -> World:
    """One flow A->B, mirrored and checkpointed, the translator ran 2 s ago: healthy."""
    w = world(tmp_path, two_cluster_config(tmp_path, flows=[{"source": "A", "target": "B"}]))
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.a.ends[("orders", 0)] = 100
    w.b.ends[("A.orders", 0)] = 100
    w.checkpoints.add(FLOW, "billing", "orders", "A.orders", 0, 40, at_ms=NOW_MS - 7_000)
    RunFiles(w.context.layout).write_last_run(FLOW, TranslatorRun(int(NOW_MS - 2_000), 0.25, 1, 1, 0))
    return w


def export(w: World, runs: int = 1) -> tuple[StatusReport | None, list[StatusReport]]:
    seen: list[StatusReport] = []
    last = Drkit(w.config, context=w.context).watch_status(FLOW, interval=0, max_runs=runs, on_report=seen.append)
    return last, seen


def test_a_healthy_flow(w: World) -> None:
    last, seen = export(w, runs=2)
    assert last is not None and last.verdict is Verdict.HEALTHY and len(seen) == 2
    assert value("drkit_status_verdict", flow=FLOW, verdict="healthy") == 1.0
    others = [value("drkit_status_verdict", flow=FLOW, verdict=v.value) for v in Verdict if v is not Verdict.HEALTHY]
    assert others == [0.0] * (len(Verdict) - 1)
    assert value("drkit_status_source_reachable", flow=FLOW) == 1.0
    assert value("drkit_status_target_reachable", flow=FLOW) == 1.0
    assert value("drkit_status_target_diverged_partitions", flow=FLOW) == 0.0
    assert value("drkit_status_lag_records", flow=FLOW) == 0.0
    assert value("drkit_status_left_behind_offsets", flow=FLOW) == 0.0  # no failover: nothing left behind
    assert value("drkit_status_checkpoint_age_seconds", flow=FLOW, group="billing") == 7.0
    assert value("drkit_status_translator_run_age_seconds", flow=FLOW) == 2.0
    assert value("drkit_status_job_running", flow=FLOW, job="mirror") == 0.0
    assert (value("drkit_status_last_run_timestamp_seconds") or 0) > 1.7e9


def test_source_unreachable_makes_the_lag_unknown_not_zero(w: World) -> None:
    w.a.ends[("orders", 0)] = 130
    export(w)
    assert value("drkit_status_lag_records", flow=FLOW) == 30.0
    assert value("drkit_status_verdict", flow=FLOW, verdict="lagging") == 1.0
    w.a.reachable = False
    export(w)
    assert value("drkit_status_verdict", flow=FLOW, verdict="source unreachable") == 1.0
    assert value("drkit_status_verdict", flow=FLOW, verdict="lagging") == 0.0
    assert value("drkit_status_source_reachable", flow=FLOW) == 0.0
    assert math.isnan(value("drkit_status_lag_records", flow=FLOW) or 0.0)
    assert math.isnan(value("drkit_status_heartbeat_age_seconds", flow=FLOW) or 0.0)  # no heartbeat: unknown


def test_a_diverged_target_and_an_unreachable_one(w: World) -> None:
    w.b.ends[("A.orders", 0)] = 0  # deleted and created again under syncs up to 99
    export(w)
    assert value("drkit_status_verdict", flow=FLOW, verdict="target diverged") == 1.0
    assert value("drkit_status_target_diverged_partitions", flow=FLOW) == 1.0
    w.b.reachable = False
    export(w)
    assert value("drkit_status_verdict", flow=FLOW, verdict="target unreachable") == 1.0
    assert value("drkit_status_target_reachable", flow=FLOW) == 0.0
    assert math.isnan(value("drkit_status_target_diverged_partitions", flow=FLOW) or 0.0)


def test_a_group_no_longer_checkpointed_leaves_no_stale_age(w: World) -> None:
    w.checkpoints.add(FLOW, "audit", "orders", "A.orders", 0, 10, at_ms=NOW_MS - 1_000)
    export(w)
    assert value("drkit_status_checkpoint_age_seconds", flow=FLOW, group="audit") == 1.0
    w.checkpoints.rows = [r for r in w.checkpoints.rows if r.checkpoint.group != "audit"]
    export(w)
    assert value("drkit_status_checkpoint_age_seconds", flow=FLOW, group="audit") is None
    assert value("drkit_status_checkpoint_age_seconds", flow=FLOW, group="billing") == 7.0


def test_the_newest_failover_of_each_outcome(w: World) -> None:
    drkit = Drkit(w.config, context=w.context)
    drkit.failover(FLOW, ["billing"])  # a dry run
    drkit.failover(FLOW, ["billing"], apply=True, confirm=lambda plan: True)
    export(w)
    applied = value("drkit_operation_last_timestamp_seconds", flow=FLOW, action="failover", status="applied")
    dry = value("drkit_operation_last_timestamp_seconds", flow=FLOW, action="failover", status="dry_run")
    assert applied is not None and dry is not None and applied >= dry > 1.7e9
    # The apply's intent row is folded into its outcome: no "applying" series.
    assert value("drkit_operation_last_timestamp_seconds", flow=FLOW, action="failover", status="applying") is None


def test_a_status_that_fails_is_counted_and_the_exporter_goes_on(w: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from drkit.errors import StoreError

    calls: list[Any] = []

    def broken(self: Drkit, flow: str | None = None) -> StatusReport:
        calls.append(flow)
        raise StoreError("offset_syncs unreadable")

    before = value("drkit_errors_total", flow=FLOW, process="status") or 0.0
    monkeypatch.setattr(Drkit, "status", broken)
    last, seen = export(w, runs=3)
    assert (last, seen, len(calls)) == (None, [], 3)
    assert value("drkit_errors_total", flow=FLOW, process="status") == before + 3


@pytest.mark.parametrize(
    "args, method",
    [
        (["checkpoint", "--once", "--metrics-port", "9999"], "translate"),
        (["mirror", "--once", "--metrics-port", "9999"], "mirror"),
    ],
)
def test_the_jobs_take_their_own_metrics_port(
    args: list[str], method: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mirror and a translator of one config on one host serve on two ports: each command's --metrics-port."""
    from drkit.cli.app import main

    seen: dict[str, Any] = {}

    def job(self: Drkit, flow: str | None = None, **kwargs: Any) -> list[Any]:
        seen.update(kwargs)
        return []

    monkeypatch.setattr(Drkit, method, job)
    example = str(Path(__file__).resolve().parents[2] / "examples" / "drkit.local.toml")
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "-c", example, "-o", "json"])
    capsys.readouterr()
    assert (exit_info.value.code or 0, seen["metrics_port"]) == (0, 9999)


def test_what_a_failover_left_on_the_source_until_the_target_holds_it(w: World) -> None:
    from drkit.operate.failover import FailoverRequest, failover

    w.a.reachable = False  # the source lost with 30 records not mirrored: the failover cannot know them
    w.a.ends[("orders", 0)] = 130
    failover(w.context, FailoverRequest(w.config.flow(FLOW), ["billing"], apply=True), lambda plan: True)
    export(w)
    assert math.isnan(value("drkit_status_left_behind_offsets", flow=FLOW) or 0.0)  # unknown, never 0
    w.a.reachable = True
    export(w)
    assert value("drkit_status_left_behind_offsets", flow=FLOW) == 30.0
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(100, 129, 100, 129))  # the mirror copied them
    export(w)
    assert value("drkit_status_left_behind_offsets", flow=FLOW) == 0.0
