"""``drkit recover`` on fakes, after real failovers and failbacks of drkit.operate: the gap a failover left on its
source (exact when the source answered it, known once the source answers again when it did not), closed by the
mirror's copies (offset-syncs, or origin headers past the synced end), and none after a failback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fakes import World, world

from drkit.cli.app import main
from drkit.core.audit import Action
from drkit.core.offsets import SyncRange
from drkit.core.origin import TailRecord
from drkit.core.recovery import RECOVERY_PENDING_EXIT, RECOVERY_UNKNOWN_EXIT, GapEnd, RecoveryVerdict
from drkit.operate.failback import FailbackRequest, failback
from drkit.operate.failover import FailoverRequest, failover
from drkit.operate.recovery import recovery
from drkit.service import Drkit

FLOW = "A->B"


def mirrored(tmp_path: Path, source_end: int) -> World:
    """``orders/0`` mirrored 0..99 -> 0..99, the source at ``source_end``, ``billing`` checkpointed at 40."""
    w = world(tmp_path)
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.a.ends[("orders", 0)] = source_end
    w.b.ends[("A.orders", 0)] = 100
    w.checkpoints.add(FLOW, "billing", "orders", "A.orders", 0, 40)
    return w


def over(w: World) -> None:
    request = FailoverRequest(w.config.flow(FLOW), ["billing"], apply=True)
    failover(w.context, request, lambda plan: True)


def test_the_gap_at_a_failover_that_reached_the_source_closes_as_the_mirror_copies_it(tmp_path: Path) -> None:
    w = mirrored(tmp_path, source_end=120)
    assert recovery(w.context, w.config.flow(FLOW)).verdict is RecoveryVerdict.NO_FAILOVER
    over(w)
    report = recovery(w.context, w.config.flow(FLOW))
    assert (report.verdict, report.end_from, report.unrecovered) == (RecoveryVerdict.PENDING, GapEnd.AT_FAILOVER, 20)
    [gap] = report.partitions
    assert (gap.start, gap.end, gap.remaining, gap.produced_since) == (100, 120, (100, 120), 0)
    # The mirror copied 100..109 and synced them; 110..114 are on the target ahead of their syncs.
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(100, 109, 100, 109))
    w.b.ends[("A.orders", 0)] = 115
    w.b.records[("A.orders", 0)] = [TailRecord(d, d) for d in range(110, 115)]
    report = recovery(w.context, w.config.flow(FLOW))
    assert (report.unrecovered, report.partitions[0].remaining) == (5, (115, 120))
    # A producer still writing to A after the failover: counted apart, never part of the failover's loss.
    w.a.ends[("orders", 0)] = 123
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(110, 119, 110, 119))
    report = recovery(w.context, w.config.flow(FLOW))
    assert (report.verdict, report.unrecovered, report.produced_since) == (RecoveryVerdict.RECOVERED, 0, 3)
    # Failed back: the records are where the groups are; nothing is left behind any more.
    failback(w.context, FailbackRequest(w.config.flow(FLOW), ["billing"], apply=True), lambda plan: True)
    assert recovery(w.context, w.config.flow(FLOW)).verdict is RecoveryVerdict.NO_FAILOVER


def test_a_failover_without_the_source_leaves_a_gap_known_only_once_the_source_answers(tmp_path: Path) -> None:
    w = mirrored(tmp_path, source_end=130)
    w.a.reachable = False
    over(w)
    report = recovery(w.context, w.config.flow(FLOW))
    assert (report.verdict, report.end_from, report.unrecovered) == (RecoveryVerdict.UNKNOWN, GapEnd.UNKNOWN, None)
    assert report.exit_code == RECOVERY_UNKNOWN_EXIT
    w.a.reachable = True
    report = recovery(w.context, w.config.flow(FLOW))
    assert (report.verdict, report.end_from, report.unrecovered) == (RecoveryVerdict.PENDING, GapEnd.ON_RETURN, 30)
    assert report.exit_code == RECOVERY_PENDING_EXIT


def test_the_target_down_counts_only_what_the_syncs_say_never_more(tmp_path: Path) -> None:
    w = mirrored(tmp_path, source_end=120)
    over(w)
    w.b.ends[("A.orders", 0)] = 110
    w.b.records[("A.orders", 0)] = [TailRecord(d, d) for d in range(100, 110)]
    assert recovery(w.context, w.config.flow(FLOW)).unrecovered == 10
    w.b.reachable = False  # its copies past the syncs cannot be read: not counted as recovered
    assert recovery(w.context, w.config.flow(FLOW)).unrecovered == 20


def run_cli(w: World, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["recover", "--flow", FLOW, *args], facade_factory=lambda path: Drkit(w.config, context=w.context))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out + err


def test_the_command_shows_the_offsets_to_copy_and_exits_by_the_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    w = mirrored(tmp_path, source_end=120)
    code, out = run_cli(w, capsys)
    assert code == 0 and "no records were left behind" in out
    over(w)
    code, out = run_cli(w, capsys)
    assert code == RECOVERY_PENDING_EXIT
    assert "orders/0" in out and "100-119" in out and "20 offsets not on the target yet" in out
    code, out = run_cli(w, capsys, "-o", "json")
    got = json.loads(out)
    assert (code, got["verdict"], got["unrecovered"]) == (RECOVERY_PENDING_EXIT, "pending", 20)
    assert got["partitions"][0]["remaining"] == [100, 120]
    rows = len(w.operations.records)
    code, out = run_cli(w, capsys, "--flow", "A->C")  # no such flow: one line, nothing written
    assert code == 2 and len(out.strip().splitlines()) == 1 and "A->C" in out
    assert len(w.operations.records) == rows


def test_status_tells_what_is_left_behind_by_the_syncs_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from drkit.operate.status import flow_status

    w = mirrored(tmp_path, source_end=120)
    flow = w.config.flow(FLOW)
    assert (flow_status(w.context, flow).left_behind, flow_status(w.context, flow).left_behind_offsets) == (
        "no_failover",
        0,
    )
    over(w)
    w.b.ends[("A.orders", 0)] = 110
    w.b.records[("A.orders", 0)] = [TailRecord(d, d) for d in range(100, 110)]  # ahead of their syncs
    status = flow_status(w.context, flow)
    assert (status.left_behind, status.left_behind_offsets) == ("pending", 20)  # never fewer than recover says
    assert recovery(w.context, flow).unrecovered == 10
    with pytest.raises(SystemExit):
        main(["status"], facade_factory=lambda path: Drkit(w.config, context=w.context))
    out, _ = capsys.readouterr()
    assert "20 offsets the failover left on the source are not on the target (pending)" in " ".join(out.split())
    w.a.reachable = False
    status = flow_status(w.context, flow)
    assert (status.left_behind, status.left_behind_offsets) == ("pending", 20)  # the failover knew A's end


def test_a_dismissal_is_one_audit_row_that_status_then_stops_counting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from drkit.core.audit import Action
    from drkit.operate.status import flow_status

    w = mirrored(tmp_path, source_end=120)
    flow = w.config.flow(FLOW)
    # Nothing to dismiss before a failover: one line, exit 3, nothing written.
    code, out = run_cli(w, capsys, "--dismiss")
    assert code == 3 and "nothing to dismiss: no failover since the last failback" in out
    assert len(out.strip().splitlines()) == 1 and w.operations.records == []
    w.a.reachable = False
    over(w)
    w.a.reachable = True
    code, out = run_cli(w, capsys, "--dismiss", "-o", "json")
    got = json.loads(out)
    assert (code, got["verdict"], got["unrecovered"]) == (0, "dismissed", 0)
    assert got["partitions"][0]["unrecovered"] == 20 and got["dismissed_by"]
    [row] = [r for r in w.operations.records if r.action is Action.DISMISS]
    assert row.result["unrecovered"] == 20 and row.plan["partitions"][0]["remaining"] == [100, 120]
    assert row.groups == () and not row.dry_run
    status = flow_status(w.context, flow)
    assert (status.left_behind, status.left_behind_offsets) == ("dismissed", 0)
    with pytest.raises(SystemExit):
        main(["status"], facade_factory=lambda path: Drkit(w.config, context=w.context))
    shown, _ = capsys.readouterr()
    assert "left on the source" not in shown, "status still tells a dismissed gap"
    code, out = run_cli(w, capsys, "--dismiss")  # a second dismissal: nothing to dismiss, nothing written
    assert code == 3 and "was dismissed by" in out
    assert len([r for r in w.operations.records if r.action is Action.DISMISS]) == 1
    code, out = run_cli(w, capsys)
    assert code == 0 and "dismissed" in out and "20 offsets not on the target now" in " ".join(out.split())
    with pytest.raises(SystemExit) as exit_info:
        main(["history", "--flow", FLOW], facade_factory=lambda path: Drkit(w.config, context=w.context))
    out, _ = capsys.readouterr()
    assert exit_info.value.code in (0, None) and "dismiss" in out


def test_a_source_lost_for_good_may_have_its_unknown_gap_dismissed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from drkit.operate.status import flow_status

    w = mirrored(tmp_path, source_end=120)
    w.a.reachable = False
    over(w)
    assert flow_status(w.context, w.config.flow(FLOW)).left_behind_offsets is None  # unknown
    code, out = run_cli(w, capsys, "--dismiss", "-o", "json")
    got = json.loads(out)
    assert (code, got["verdict"], got["end_from"]) == (0, "dismissed", "unknown")
    assert got["partitions"][0]["unrecovered"] is None  # given up without ever being known
    status = flow_status(w.context, w.config.flow(FLOW))
    assert (status.left_behind, status.left_behind_offsets) == ("dismissed", 0)


def test_the_failback_plan_names_the_records_left_behind_that_the_groups_will_read_on_the_source(
    tmp_path: Path,
) -> None:
    w = mirrored(tmp_path, source_end=120)
    over(w)
    flow = w.config.flow(FLOW)
    failover_id = next(op.id for op in w.operations.records if op.action is Action.FAILOVER)
    dry = failback(w.context, FailbackRequest(flow, ["billing"]))
    [note] = [x for x in dry.plan.warnings if "left on A" in x]
    assert note == (
        f"20 offsets failover {failover_id} left on A are not on B (orders/0 100-119): the groups moved back read "
        "on A those of them they had not processed there"
    )
    assert note in dry.as_dict()["plan"]["warnings"]  # the audit row's plan and -o json carry it
    [move] = dry.plan.moves
    assert move.new is not None and move.new <= 100  # resumed before the gap on A: the note holds
    # Dismissed: still named (the records are on A), with who gave them up.
    recovery(w.context, flow, dismiss=True)
    [note] = [x for x in failback(w.context, FailbackRequest(flow, ["billing"])).plan.warnings if "left on A" in x]
    assert note.startswith(
        f"20 offsets failover {failover_id} left on A are not on B (orders/0 100-119): dismissed by "
    )
    # All copied since: nothing to name.
    w2 = mirrored(tmp_path / "copied", source_end=120)
    over(w2)
    w2.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(100, 119, 100, 119))
    plan = failback(w2.context, FailbackRequest(w2.config.flow(FLOW), ["billing"])).plan
    assert not [x for x in plan.warnings if "left on" in x]
