"""A drill on a schedule (``Drkit.drill_repeat``, ``drkit drill run --every``): runs repeat until stopped,
between runs; the first run's error ends it, a later one does not; each run's row of the ``drills`` table
sets the ``drkit_drill_*`` metrics, and a restarted schedule shows the last drills at once."""

from __future__ import annotations

import math
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from support.drill_reports import drill_report as drill
from support.fakes import two_cluster_config

from drkit.cli.app import main
from drkit.core.drill import DrillReport
from drkit.drill.repeat import repeat
from drkit.errors import ClusterError, RefusedError
from drkit.service import Drkit
from drkit.store.drills import DrillLog


def value(metric: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, labels)


class Runs:
    """A drill function: each call lands the next report in the ``drills`` table (or raises the next error)."""

    def __init__(self, drkit: Drkit, outcomes: list[DrillReport | Exception]) -> None:
        self.log, self.outcomes, self.calls = DrillLog(drkit.layout), list(outcomes), 0

    def __call__(self) -> DrillReport:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        self.log.append(outcome)
        return outcome


@pytest.fixture
def drkit(tmp_path: Path) -> Drkit:
    return Drkit(two_cluster_config(tmp_path))


def test_each_run_lands_and_sets_the_metrics(drkit: Drkit) -> None:
    name = "sched-a"
    runs = Runs(drkit, [drill("a1", name, 1_700_000_000_000), drill("a2", name, 1_700_000_600_000, lost=True)])
    seen: list[DrillReport] = []
    last = drkit.drill_repeat(runs, every=0, on_report=seen.append, max_runs=2)
    assert last is not None and last.id == "a2" and [r.id for r in seen] == ["a1", "a2"]
    assert [r.id for r in drkit.drill_history().drills] == ["a2", "a1"]
    assert value("drkit_drill_runs_total", name=name, flow="A->B", verdict="pass") == 1
    assert value("drkit_drill_runs_total", name=name, flow="A->B", verdict="fail") == 1
    assert value("drkit_drill_verdict", name=name, flow="A->B", verdict="fail") == 1
    assert value("drkit_drill_verdict", name=name, flow="A->B", verdict="pass") == 0
    assert value("drkit_drill_rpo_records", name=name, flow="A->B") == 1
    assert value("drkit_drill_rpo_seconds", name=name, flow="A->B") == 1.0  # acknowledged 1 s before the disaster
    assert value("drkit_drill_rto_seconds", name=name, flow="A->B") == 1.5
    assert value("drkit_drill_last_timestamp_seconds", name=name, flow="A->B") == 1_700_000_600


def test_a_drill_that_never_read_on_the_target_has_an_unknown_rto_not_zero(drkit: Drkit) -> None:
    drkit.drill_repeat(Runs(drkit, [drill("n1", "sched-n", 1_700_000_000_000, rto_ms=None)]), every=0, max_runs=1)
    assert math.isnan(value("drkit_drill_rto_seconds", name="sched-n", flow="A->B") or 0.0)


def test_a_restarted_schedule_shows_the_last_drills_before_its_first_run(drkit: Drkit) -> None:
    log = DrillLog(drkit.layout)
    log.append(drill("r1", "sched-r", 1_700_000_000_000))
    log.append(drill("r2", "sched-r", 1_700_000_900_000, lost=True))
    stop = threading.Event()
    stop.set()  # stopped before any run: only what was in the table
    assert drkit.drill_repeat(Runs(drkit, []), every=60, stop=stop) is None
    assert value("drkit_drill_last_timestamp_seconds", name="sched-r", flow="A->B") == 1_700_000_900
    assert value("drkit_drill_verdict", name="sched-r", flow="A->B", verdict="fail") == 1
    assert value("drkit_drill_runs_total", name="sched-r", flow="A->B", verdict="fail") is None  # not run here


def test_the_first_run_s_error_ends_it_and_a_later_one_does_not(drkit: Drkit) -> None:
    with pytest.raises(RefusedError, match="no checkpoints"):
        drkit.drill_repeat(Runs(drkit, [RefusedError("no checkpoints")]), every=0, max_runs=3)
    errors: list[Exception] = []
    runs = Runs(drkit, [drill("e1", "sched-e", 1_700_000_000_000), ClusterError("B gone"), drill("e3", "sched-e", 2)])
    last = drkit.drill_repeat(runs, every=0, on_error=errors.append, max_runs=3)
    assert runs.calls == 3 and last is not None and last.id == "e3"
    assert [str(e) for e in errors] == ["B gone"]


def test_a_signal_during_a_run_ends_the_schedule_after_that_run(drkit: Drkit) -> None:
    landed: list[str] = []

    def run() -> str:
        signal.raise_signal(signal.SIGTERM)  # as `kill` would, mid-run
        landed.append("done")  # the run goes on to its end
        return "report"

    assert repeat(run, every=3600, max_runs=5) == "report"
    assert landed == ["done"]  # one run, then stopped between runs (no hour-long wait)


def test_runs_start_every_seconds_apart(drkit: Drkit) -> None:
    ticks = iter([0.0, 40.0, 60.0, 200.0, 200.0, 210.0])
    waits: list[float] = []

    class Stop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            return False

    repeat(lambda: None, every=60, stop=Stop(), max_runs=3, clock=lambda: next(ticks))
    assert waits == [20.0, 0.0]  # a run of 40 s waits 20 s; one of 140 s is followed at once


def _cli(args: list[str], capsys: pytest.CaptureFixture[str], factory: Any = None) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_:
        main(args) if factory is None else main(args, facade_factory=factory)
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out + err


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--every", "5"], "no duration"),
        (["--every", "2s"], "from 10 s to 7 days"),
        (["--metrics-port", "9470"], "only with --every"),
    ],
)
def test_bad_every_is_a_usage_error_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    code, text = _cli(["drill", "run", str(tmp_path / "spec.toml"), "-c", str(tmp_path / "none.toml"), *extra], capsys)
    assert code == 2 and says in text


def test_the_cli_repeats_through_the_facade(monkeypatch: pytest.MonkeyPatch, drkit: Drkit, capsys: Any) -> None:
    reports = iter([drill("c1", "sched-c", 1_700_000_000_000), drill("c2", "sched-c", 1_700_000_100_000)])
    calls: list[Any] = []

    def drill_run(self: Drkit, spec: str, on_phase: Any = None) -> DrillReport:
        return next(reports)

    def drill_repeat(self: Drkit, run: Any, every: float, port: Any, show: Any, failed: Any) -> None:
        calls.append((every, port))
        for _ in range(2):
            show(run())

    monkeypatch.setattr(Drkit, "drill_run", drill_run)
    monkeypatch.setattr(Drkit, "drill_repeat", drill_repeat)
    args = ["drill", "run", "spec.toml", "--every", "30m", "--metrics-port", "9471", "-o", "json"]
    code, text = _cli(args, capsys, lambda path: drkit)
    assert code == 0 and calls == [(1800.0, 9471)]
    assert text.count('"id": "c1"') == 1 and text.count('"id": "c2"') == 1
