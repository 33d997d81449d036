"""The drkit CLI in a process of its own, with a fault plan (drkit.mirror.faults) injected into the mirror.

Tests start it with :func:`command` where they would start ``python -m drkit.cli.app``; the plan reaches
the mirror through its context (a facade whose ``mirror_context`` carries it), never through the
environment: drkit itself has no switch that makes a mirror fail.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from drkit.config import DrkitConfig, load_config
from drkit.mirror.faults import FaultPlan, KillAt, KillPoint
from drkit.service import Drkit

if TYPE_CHECKING:
    from drkit.mirror.context import MirrorContext

#: The folder holding the ``support`` package, for the launched interpreter's import path.
TESTS = str(Path(__file__).resolve().parent.parent)


def command(*drkit_args: str, kill_at: KillAt | None = None, fail_copy_task_once: Path | str = "") -> list[str]:
    """The command running ``drkit <drkit_args>`` with these faults (as ``python -m drkit.cli.app`` would)."""
    options = [f"--kill-at={kill_at.point}:{kill_at.batch}"] if kill_at is not None else []
    options += [f"--fail-copy-task-once={fail_copy_task_once}"] if fail_copy_task_once else []
    launch = f"import sys; sys.path.insert(0, {TESTS!r}); from support.faulty_mirror import main; main(sys.argv[1:])"
    return [sys.executable, "-c", launch, *options, "--", *drkit_args]


class FaultyDrkit(Drkit):
    """The facade, whose mirror runs with ``plan``."""

    def __init__(self, config: DrkitConfig, plan: FaultPlan) -> None:
        super().__init__(config)
        self.plan = plan

    def mirror_context(self) -> MirrorContext:
        return replace(super().mirror_context(), faults=self.plan)


def _kill_at(value: str) -> KillAt:
    point, _, batch = value.partition(":")
    return KillAt(KillPoint(point), int(batch or 0))


def plan_of(argv: list[str]) -> tuple[FaultPlan, list[str]]:
    """The plan the options before ``--`` describe, and the drkit arguments after it."""
    if "--" not in argv:
        raise SystemExit("faulty_mirror: give the drkit arguments after --")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="faulty_mirror")
    parser.add_argument("--kill-at", type=_kill_at, default=None, help="<point>:<batch id>")
    parser.add_argument("--fail-copy-task-once", default="", help="the marker file's path")
    args = parser.parse_args(argv[:split])
    return FaultPlan(args.kill_at, args.fail_copy_task_once), argv[split + 1 :]


def main(argv: list[str]) -> None:
    from drkit.cli.app import main as drkit

    plan, drkit_args = plan_of(argv)
    print(f"faulty_mirror: {plan}", file=sys.stderr, flush=True)
    sys.argv = ["drkit", *drkit_args]  # as the drkit command line: a process of its own
    drkit(facade_factory=lambda path: FaultyDrkit(load_config(str(path)), plan))
