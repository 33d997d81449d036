"""The fault seam (drkit.mirror.faults): a mirror has no faults unless a test injects a plan into its context,
and the plan the driver holds is the one its copy tasks get (they never look one up)."""

from __future__ import annotations

import pickle
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.fakes import held_job, mirror_context
from support.faulty_mirror import command, plan_of

from drkit.config import DrkitConfig, parse_config
from drkit.mirror.faults import NO_FAULTS, FaultPlan, KillAt, KillPoint


def config(tmp_path: Path) -> DrkitConfig:
    return parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "a:1"}, "B": {"bootstrap_servers": "b:1"}},
            "flows": [{"source": "A", "target": "B"}],
            "state": {"root": str(tmp_path / "state")},
        }
    )


def test_no_plan_kills_nowhere_and_fails_no_task(tmp_path: Path) -> None:
    assert not any(NO_FAULTS.kills_at(point, batch) for point in KillPoint for batch in (0, 1, 10**6))
    assert not NO_FAULTS.fails_copy_task("pid 1 attempt 0")
    assert str(NO_FAULTS) == "no faults"


def test_a_kill_plan_kills_at_its_point_of_the_first_batch_at_or_after_its_id() -> None:
    plan = FaultPlan(KillAt(KillPoint.SYNCED, 4))
    assert [b for b in range(8) if plan.kills_at(KillPoint.SYNCED, b)] == [4, 5, 6, 7]
    assert not any(plan.kills_at(p, 5) for p in (KillPoint.COPIED, KillPoint.ACKNOWLEDGED))
    assert FaultPlan(KillAt(KillPoint.COPIED)).kills_at(KillPoint.COPIED, 0)


def test_exactly_one_copy_task_fails_on_purpose_even_when_tasks_run_at_once(tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    plan = FaultPlan(fail_copy_task_once=str(marker))
    results: list[bool] = []
    threads = [threading.Thread(target=lambda i=i: results.append(plan.fails_copy_task(f"task {i}"))) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results) == [False] * 7 + [True]
    assert marker.read_text().startswith("task ")
    assert not plan.fails_copy_task("a retry")  # the marker exists: the retried attempt copies


def test_a_mirror_job_has_no_faults_unless_its_context_carries_a_plan(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    assert held_job(mirror_context(cfg), cfg.flows[0], once=True).faults is NO_FAULTS


def test_the_drivers_plan_travels_to_the_copy_tasks_inside_each_task(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    plan = FaultPlan(KillAt(KillPoint.COPIED, 2), str(tmp_path / "failed-once"))
    spark = SimpleNamespace(sparkContext=SimpleNamespace(master="local[2]"))  # a task asks only the master
    job = held_job(replace(mirror_context(cfg), spark=spark, faults=plan), cfg.flows[0], once=True)
    assert job.faults is plan
    task = job.path.executors.task({"bootstrap.servers": "b:1"}, {"t": "A.t"})
    assert task.faults == plan
    assert pickle.loads(pickle.dumps(task)).faults == plan  # what an executor gets


def test_the_launcher_passes_its_plan_and_the_drkit_arguments_unchanged(tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    argv = command(
        "--verbose", "mirror", "-c", "x.toml", kill_at=KillAt(KillPoint.SYNCED, 4), fail_copy_task_once=marker
    )
    assert argv[1] == "-c"  # python -c: the launched interpreter imports the launcher itself
    assert plan_of(argv[3:]) == (
        FaultPlan(KillAt(KillPoint.SYNCED, 4), str(marker)),
        ["--verbose", "mirror", "-c", "x.toml"],
    )
    assert plan_of(command("mirror")[3:]) == (NO_FAULTS, ["mirror"])
    with pytest.raises(SystemExit):
        plan_of(["--kill-at=nowhere:1", "--", "mirror"])
