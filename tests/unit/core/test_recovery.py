"""drkit.core.recovery: the gap a failover left on its source, and what of it the target holds now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.audit import Action, OperationRecord, OperationStatus
from drkit.core.ports import SyncProgress
from drkit.core.recovery import GapEnd, GapPartition, OpenGap, RecoveryVerdict, open_gap, recovery_report

AT = datetime(2026, 1, 1, tzinfo=UTC)


def op(
    action: Action = Action.FAILOVER,
    status: OperationStatus = OperationStatus.APPLIED,
    op_id: str = "f1",
    flow: str = "A->B",
    rpo: dict[str, Any] | None = None,
    dry_run: bool = False,
    minutes: int = 0,
) -> OperationRecord:
    at = AT + timedelta(minutes=minutes)
    result: dict[str, Any] = {"status": status.value} | ({} if rpo is None else {"rpo": rpo})
    return OperationRecord(op_id, action, flow, ("g",), None, dry_run, {}, result, "u", "h", "v", at, at)


def rpo(reachable: bool, *rows: tuple[str, int, int, int | None]) -> dict[str, Any]:
    parts = [{"topic": t, "partition": p, "mirrored_up_to": m, "source_end": e} for t, p, m, e in rows]
    return {"source_reachable": reachable, "partitions": parts}


def synced(next_upstream: int) -> SyncProgress:
    return SyncProgress(next_upstream - 1, 1000 + next_upstream, 1)


def gap_of(records: list[OperationRecord]) -> OperationRecord | None:
    gap = open_gap(records, "A->B")
    return None if gap is None else gap.failover


def test_the_open_gap_is_the_first_failover_that_moved_groups_after_the_last_failback() -> None:
    first, second = op(op_id="first", minutes=1), op(op_id="second", minutes=2)
    assert gap_of([]) is None
    assert gap_of([second, first]) is first  # producers moved at the first
    back = op(Action.FAILBACK, op_id="back", minutes=3)
    assert gap_of([back, second, first]) is None  # failed back: nothing left behind
    again = op(op_id="again", minutes=4)
    assert gap_of([again, back, second, first]) is again
    # Looked past: dry runs, refusals, failed applies, fence, dismissals, other flows.
    past = [
        op(status=OperationStatus.DRY_RUN, dry_run=True, op_id="dry"),
        op(status=OperationStatus.REFUSED, op_id="refused"),
        op(status=OperationStatus.FAILED, op_id="failed"),
        op(Action.FENCE, op_id="fence"),
        op(Action.DISMISS, op_id="dismiss-other", flow="B->A"),
        op(op_id="other", flow="B->A"),
        op(Action.FAILBACK, status=OperationStatus.FAILED, op_id="failed-back"),
    ]
    assert gap_of([*past, first]) is first
    assert gap_of(past) is None
    partial = op(status=OperationStatus.PARTIAL, op_id="partial")
    assert gap_of([partial]) is partial


def test_a_dismissal_made_after_the_open_failover_gives_its_gap_up() -> None:
    first = op(op_id="first", minutes=1)
    dismissed = op(Action.DISMISS, op_id="d", minutes=2)
    assert open_gap([dismissed, first], "A->B") == OpenGap(first, dismissed)
    again = op(op_id="again", minutes=3)  # a later failover of the same outage: still given up
    assert open_gap([again, dismissed, first], "A->B") == OpenGap(first, dismissed)
    # A dismissal before a failback, or a dry run of one, gives nothing up of a later failover.
    back, later = op(Action.FAILBACK, op_id="back", minutes=3), op(op_id="later", minutes=4)
    assert open_gap([later, back, dismissed, first], "A->B") == OpenGap(later)
    early = op(Action.DISMISS, op_id="early", minutes=3)  # after the failback, before the failover it would close
    assert open_gap([later, early, back], "A->B") == OpenGap(later)
    dry = op(Action.DISMISS, op_id="dry", dry_run=True, minutes=5)
    assert open_gap([dry, later, back], "A->B") == OpenGap(later)
    # The records stay on A; the gap is given up, still shown.
    failover_rpo = op(op_id="first", minutes=1, rpo=rpo(True, ("orders", 0, 40, 50)))
    report = recovery_report("A->B", OpenGap(failover_rpo, dismissed), {}, {}, {("orders", 0): 60})
    assert (report.verdict, report.unrecovered, report.exit_code) == (RecoveryVerdict.DISMISSED, 0, 0)
    assert report.partitions[0].unrecovered == 10 and report.dismissed_by == "u@h"


def test_a_failover_that_reached_the_source_fixes_the_gap_and_counts_what_came_after_apart() -> None:
    failover = op(rpo=rpo(True, ("orders", 0, 40, 50), ("orders", 1, 30, 30)))
    # The mirror copied 5 more of partition 0 since; the source took 7 more records on partition 0 after.
    report = recovery_report(
        "A->B", OpenGap(failover), {("orders", 0): synced(45)}, {}, {("orders", 0): 57, ("orders", 1): 30}
    )
    assert report.verdict is RecoveryVerdict.PENDING and report.end_from is GapEnd.AT_FAILOVER
    zero, one = report.partitions
    assert (zero.start, zero.end, zero.left_behind, zero.remaining, zero.produced_since) == (40, 50, 10, (45, 50), 7)
    assert (one.left_behind, one.remaining, one.unrecovered) == (0, None, 0)
    assert report.unrecovered == 5 and report.produced_since == 7
    # Copies ahead of their syncs count (origin headers on the target past the synced end).
    done = recovery_report("A->B", OpenGap(failover), {("orders", 0): synced(45)}, {("orders", 0): 50}, None)
    assert done.verdict is RecoveryVerdict.RECOVERED and done.unrecovered == 0
    assert done.produced_since is None  # the source does not answer now: not known, never 0


def test_a_failover_without_the_source_takes_the_end_when_it_answers_and_is_unknown_until_then() -> None:
    failover = op(rpo=rpo(False, ("orders", 0, 40, 44)))  # 44: an old observation, a lower bound
    down = recovery_report("A->B", OpenGap(failover), {}, {}, None)
    assert (down.verdict, down.end_from, down.unrecovered) == (RecoveryVerdict.UNKNOWN, GapEnd.UNKNOWN, None)
    assert down.partitions[0].end is None and down.partitions[0].left_behind is None
    back = recovery_report("A->B", OpenGap(failover), {("orders", 0): synced(40)}, {}, {("orders", 0): 52})
    assert (back.verdict, back.end_from, back.unrecovered) == (RecoveryVerdict.PENDING, GapEnd.ON_RETURN, 12)
    assert back.partitions[0].remaining == (40, 52) and back.produced_since is None
    # A partition the source no longer has (deleted topic): its end is not known, nor is the whole gap's.
    gone = recovery_report("A->B", OpenGap(failover), {}, {}, {("other", 0): 3})
    assert gone.verdict is RecoveryVerdict.UNKNOWN and gone.unrecovered is None


def test_nothing_to_recover_without_a_failover_and_no_guess_without_its_record() -> None:
    none = recovery_report("A->B", None, {}, {}, {("orders", 0): 9})
    assert (none.verdict, none.unrecovered, none.partitions) == (RecoveryVerdict.NO_FAILOVER, 0, ())
    old = recovery_report("A->B", OpenGap(op()), {}, {}, {("orders", 0): 9})  # an earlier drkit recorded no RPO
    assert (old.verdict, old.unrecovered, old.failover_id) == (RecoveryVerdict.NO_RECORD, None, "f1")
    given_up = recovery_report("A->B", OpenGap(op(), op(Action.DISMISS, op_id="d", minutes=1)), {}, {}, None)
    assert (given_up.verdict, given_up.unrecovered, given_up.dismissed_by) == (RecoveryVerdict.DISMISSED, 0, "u@h")
    as_dict = old.as_dict()
    assert as_dict["verdict"] == "no_record" and as_dict["unrecovered"] is None


@given(
    start=st.integers(0, 1000),
    length=st.integers(0, 1000),
    copied=st.integers(0, 3000),
)
def test_a_gap_never_reports_more_recovered_than_the_target_holds(start: int, length: int, copied: int) -> None:
    gap = GapPartition("t", 0, start, start + length, copied)
    remaining = gap.remaining
    held = max(0, min(copied, start + length) - start)  # offsets of the gap below copied_through
    assert gap.unrecovered == length - held
    if remaining is not None:
        assert remaining[0] == max(start, copied) and remaining[1] == start + length and remaining[0] < remaining[1]
