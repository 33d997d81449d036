"""A drill's accounting and verdict: every acknowledged record in exactly one class."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.core.drill import Budget, DrillVerdict, FailReason, Sent, Timeline, account, judge, rpo


def sent(*keys: tuple[str, int], at: int = 1000) -> list[Sent]:
    return [Sent(k, s, at + i) for i, (k, s) in enumerate(keys)]


A = [("k0", 0), ("k0", 1), ("k0", 2), ("k1", 0), ("k1", 1)]


def test_a_clean_failover_passes() -> None:
    # k0:0-1 and k1:0 processed on the source; k0:2 mirrored and read on the target; k1:1 never mirrored.
    a = account(sent(*A), [("k0", 0), ("k0", 1), ("k1", 0)], A[:4], [("k0", 2)])
    assert (a.acked, a.processed_on_source, a.not_mirrored, a.read_on_target, a.lost, a.redelivered) == (
        5,
        3,
        1,
        1,
        0,
        0,
    )
    assert judge(a, Budget()).verdict is DrillVerdict.PASSED


def test_a_skipped_record_is_lost_and_a_re_read_one_is_redelivered() -> None:
    a = account(sent(*A), [("k0", 0), ("k0", 1)], A, [("k0", 1), ("k1", 1)])
    assert a.lost == 2 and a.lost_examples == (("k0", 2), ("k1", 0))
    assert a.redelivered == 1 and a.redelivered_examples == (("k0", 1),)
    reasons = dict(judge(a, Budget()).reasons)
    assert set(reasons) == {FailReason.LOST, FailReason.REDELIVERED}
    assert judge(a, Budget(redelivered=1, lost=2)).verdict is DrillVerdict.PASSED


def test_reordering_and_budgets_and_the_rpo_bound() -> None:
    a = account(sent(*A), [], A, [("k0", 1), ("k0", 0), ("k0", 2), ("k1", 0), ("k1", 1)])
    assert a.out_of_order_keys == 1 and a.redelivered == 0
    assert FailReason.OUT_OF_ORDER in dict(judge(a, Budget()).reasons)
    b = account(sent(*A), [], A[:2], A[:2])
    assert b.not_mirrored == 3
    assert FailReason.RPO_BUDGET in dict(judge(b, Budget(rpo_records=2)).reasons)
    assert FailReason.RPO_BOUND in dict(judge(b, Budget(), reported_unmirrored=4).reasons)
    assert judge(b, Budget(), reported_unmirrored=3).verdict is DrillVerdict.PASSED


def test_a_refused_failover_fails_with_drkits_reason() -> None:
    a = account(sent(*A), [("k0", 0)], A, [], resumed=False)
    assert (a.lost, a.not_resumed) == (0, 4)  # never resumed: nothing skipped
    reasons = dict(judge(a, Budget(), refused="flow A->B has no checkpoints").reasons)
    assert "no checkpoints" in reasons[FailReason.FAILOVER_REFUSED]
    assert FailReason.NO_RESUME not in reasons


def test_rpo_and_rto_from_the_clock() -> None:
    a = account(sent(*A, at=10_000), [], A[:3], A[:3])
    assert rpo(a, 20_000) == {"rpo_records": 2, "rpo_seconds": 9.997}
    t = Timeline(20_000, 23_000, 23_500, 25_000, 31_000)
    assert t.rto() == {
        "rto_seconds": 11.0,
        "detection_seconds": 3.0,
        "failover_seconds": 1.5,
        "consumer_restart_seconds": 6.0,
        "failback_seconds": None,
        "back_on_source_seconds": None,
    }
    back = Timeline(20_000, 23_000, 23_500, 25_000, 31_000, 40_000, 41_000, 42_500, 44_000)
    assert (back.rto()["failback_seconds"], back.rto()["back_on_source_seconds"]) == (1.5, 4.0)


def test_after_failback_the_unmirrored_records_are_read_on_the_source() -> None:
    # k1:1 was never mirrored: the group reads it on the source after failback; nothing is lost.
    a = account(sent(*A), [("k0", 0), ("k0", 1), ("k1", 0)], A[:4], [("k0", 2)], read_after_failback=[("k1", 1)])
    assert (a.not_mirrored, a.read_after_failback, a.lost, a.redelivered, a.failed_back) == (1, 1, 0, 0, True)
    assert a.acked == a.processed_on_source + a.read_on_target + a.read_after_failback
    assert judge(a, Budget()).verdict is DrillVerdict.PASSED
    # The same drill, but failback skipped k1:1: lost, as an acknowledged record never read anywhere.
    skipped = account(sent(*A), [("k0", 0), ("k0", 1), ("k1", 0)], A[:4], [("k0", 2)], read_after_failback=[])
    assert (skipped.lost, skipped.lost_examples) == (1, (("k1", 1),))
    assert "failover and failback" in dict(judge(skipped, Budget()).reasons)[FailReason.LOST]
    # Failback that re-reads what the group read on the target re-delivers it.
    again = account(
        sent(*A), [("k0", 0), ("k0", 1), ("k1", 0)], A[:4], [("k0", 2)], read_after_failback=[("k0", 2), ("k1", 1)]
    )
    assert (again.redelivered, again.redelivered_examples) == (1, (("k0", 2),))
    # Without a failback leg the unmirrored record is the RPO, not a loss.
    assert account(sent(*A), [("k0", 0), ("k0", 1), ("k1", 0)], A[:4], [("k0", 2)]).lost == 0


def test_a_refused_failback_fails_with_drkits_reason() -> None:
    a = account(sent(*A), [("k0", 0), ("k0", 1), ("k1", 0)], A[:4], [("k0", 2)])
    reasons = dict(judge(a, Budget(), failback_refused="active_group: 1 member on A").reasons)
    assert set(reasons) == {FailReason.FAILBACK_REFUSED} and "active_group" in reasons[FailReason.FAILBACK_REFUSED]


keys = st.tuples(st.sampled_from(["k0", "k1", "k2"]), st.integers(0, 20))


@given(st.sets(keys, max_size=40), st.data())
def test_every_acknowledged_record_is_in_exactly_one_class(acked: set[tuple[str, int]], data: st.DataObject) -> None:
    ordered = sorted(acked)
    processed = data.draw(st.sets(st.sampled_from(ordered))) if ordered else set()
    mirrored = data.draw(st.sets(st.sampled_from(ordered))) if ordered else set()
    rest = sorted(mirrored - processed)
    read = data.draw(st.sets(st.sampled_from(rest))) if rest else set()
    a = account(sent(*ordered), sorted(processed), mirrored, sorted(read))
    assert a.redelivered == 0
    assert a.acked == a.processed_on_source + a.not_mirrored + a.read_on_target + a.lost
    # With failback, the group reads on the source some of what it had read nowhere: the rest is lost.
    nowhere = sorted(set(ordered) - processed - read)
    home = data.draw(st.sets(st.sampled_from(nowhere))) if nowhere else set()
    b = account(sent(*ordered), sorted(processed), mirrored, sorted(read), read_after_failback=sorted(home))
    assert b.redelivered == 0 and b.lost == len(nowhere) - len(home)
    assert b.acked == b.processed_on_source + b.read_on_target + b.read_after_failback + b.lost


def test_the_report_prints_drkits_rpo_as_a_bound_and_an_estimate() -> None:
    from drkit.core.drill import _reported
    from drkit.core.status import EndsSource, RpoReport

    assert _reported(None) == "- (no failover ran)"
    live = RpoReport(True, EndsSource.LIVE, None, 3, ())
    assert _reported(live) == "3 unmirrored offsets (source ends from live)"
    observed = RpoReport(
        False,
        EndsSource.LAST_OBSERVATION,
        None,
        0,
        (),
        observation_age_seconds=17.0,
        estimated_since_observation=3174,
        lower_bound=True,
    )
    shown = _reported(observed)
    assert shown == (
        "at least 0 unmirrored offsets (source ends from last observation, observed 17.0s before), "
        "estimated 3174 more produced after the observation"
    )
