"""A drill's accounting: every acknowledged record in exactly one class (the verdict on it, in judge, alongside)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.drill import Budget, DrillVerdict, FailReason, judge
from drkit.core.drill_accounting import Sent, Shortfall, account, shortfall_detail, shortfalls, traces


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


def test_a_record_processed_twice_on_the_source_is_a_re_read_not_one_record() -> None:
    # The source group read k0:1 twice (a rebalance before its commit): one re-delivery, counted as such.
    a = account(sent(*A), [("k0", 0), ("k0", 1), ("k0", 1), ("k1", 0)], A[:4], [("k0", 2)])
    assert (a.processed_on_source, a.redelivered, a.redelivered_examples) == (3, 1, (("k0", 1),))
    assert FailReason.REDELIVERED in dict(judge(a, Budget()).reasons)
    # Read three times on the target: two re-reads.
    b = account(sent(*A), [("k0", 0), ("k0", 1), ("k1", 0)], A[:4], [("k0", 2), ("k0", 2), ("k0", 2)])
    assert (b.read_on_target, b.redelivered) == (1, 2)


def test_a_record_copied_twice_is_one_record_with_an_extra_copy() -> None:
    a = account(sent(*A), [("k0", 0), ("k0", 1), ("k1", 0)], [*A[:4], ("k0", 2)], [("k0", 2)])
    assert (a.not_mirrored, a.read_on_target, a.redelivered, a.extra_copies_on_target) == (1, 1, 0, 1)


def test_each_acknowledged_record_is_traced_with_its_place_and_every_time_it_was_seen() -> None:
    acked = [Sent("k0", 0, 1, 2, 40), Sent("k0", 1, 2, 2, 41), Sent("k1", 0, 3, 0, 7)]
    rows = traces(acked, [("k0", 0), ("k0", 0)], [("k0", 0), ("k0", 1), ("k0", 1)], [("k0", 1)], [("k1", 0)])
    assert [(r.ident, r.partition, r.offset) for r in rows] == [
        (("k0", 0), 2, 40),
        (("k0", 1), 2, 41),
        (("k1", 0), 0, 7),
    ]
    assert [(r.processed_on_source, r.copies_on_target, r.read_on_target, r.read_after_failback) for r in rows] == [
        (2, 1, 0, 0),
        (0, 2, 1, 0),
        (0, 0, 0, 1),
    ]
    assert [r.processed for r in rows] == [2, 1, 1]


def test_a_record_acknowledged_twice_is_refused_not_merged() -> None:
    with pytest.raises(ValueError, match=r"acknowledged more than once: \[\('k0', 1\)\]"):
        account([Sent("k0", 1, 1), Sent("k0", 1, 2)], [], [], [])


def test_a_read_short_of_its_end_offsets_names_each_partition() -> None:
    assert shortfalls({0: 5, 1: 3, 2: 0}, {0: 5, 1: 3}) == ()
    short = shortfalls({0: 5, 1: 3, 2: 4}, {0: 2, 1: 3})
    assert short == (Shortfall(0, 2, 5), Shortfall(2, 0, 4))
    line = shortfall_detail("A.drill", "B", short, 60)
    assert line == (
        "the drill could not read A.drill on cluster B to its end offsets within 60s: 7 offsets unread "
        "(partition 0 at 2 of 5, 2 at 0 of 4); the drill cannot count the copies"
    )


idents = st.tuples(st.sampled_from(["k0", "k1", "k2"]), st.integers(0, 20))


def _distinct(keys: list[tuple[str, int]]) -> int:
    return len(Counter(keys))


@given(st.lists(idents, unique=True, max_size=25), st.data())
def test_every_acknowledged_record_is_in_exactly_one_class_and_every_repeat_is_a_re_read(
    acked: list[tuple[str, int]], data: st.DataObject
) -> None:
    # The producer acknowledges each record once, in any order; the group and the mirror may see a record
    # any number of times, in any order.
    def some(pool: list[tuple[str, int]]) -> list[tuple[str, int]]:
        return data.draw(st.lists(st.sampled_from(pool), max_size=30)) if pool else []

    processed, mirrored = some(acked), some(acked)
    read = some([k for k in mirrored if k not in processed])
    a = account(sent(*acked), processed, mirrored, read)
    assert a.acked == len(acked)
    assert (a.processed_on_source, a.read_on_target) == (_distinct(processed), _distinct(read))
    # Every time past the first that the group processed a record is one re-read, exactly.
    assert a.redelivered == len(processed) + len(read) - _distinct(processed + read)
    assert a.extra_copies_on_target == len(mirrored) - _distinct(mirrored)
    assert a.acked == a.processed_on_source + a.not_mirrored + a.read_on_target + a.lost
    # The order the facts arrive in changes nothing but the keys seen out of sequence.
    shuffled = account(
        sent(*data.draw(st.permutations(acked))),
        data.draw(st.permutations(processed)),
        data.draw(st.permutations(mirrored)),
        data.draw(st.permutations(read)),
    )
    assert replace(shuffled, out_of_order_keys=0, oldest_unmirrored_ms=None) == replace(
        a, out_of_order_keys=0, oldest_unmirrored_ms=None
    )
    # With failback, the group reads on the source some of what it had read nowhere (again any number of
    # times): the rest is lost, and every repeat anywhere is a re-read.
    nowhere = [k for k in acked if k not in processed and k not in read]
    home = some(nowhere)
    b = account(sent(*acked), processed, mirrored, read, read_after_failback=home)
    assert b.lost == len(nowhere) - _distinct(home) and b.read_after_failback == _distinct(home)
    assert b.redelivered == len(processed) + len(read) + len(home) - _distinct(processed + read + home)
    assert b.acked == b.processed_on_source + b.read_on_target + b.read_after_failback + b.lost


def test_a_copy_the_group_read_but_the_drills_read_of_the_target_missed_fails_the_drill() -> None:
    """The drill's own read of the target is the ground for not-mirrored and RPO: if the group read a record
    there that this read did not find, the read fell short and the drill must not pass on its figures."""
    sent = [Sent("k", i, 1000 + i, 0, i) for i in range(3)]
    mirrored = [("k", 0), ("k", 1)]  # the drill's read of B: the copy of ("k", 2) not found
    a = account(sent, [], mirrored, [("k", 0), ("k", 1), ("k", 2)])
    assert (a.read_without_copy, a.read_without_copy_examples) == (1, (("k", 2),))
    reasons = dict(judge(a, Budget()).reasons)
    assert FailReason.TARGET_UNCOUNTED in reasons and "('k', 2)" in reasons[FailReason.TARGET_UNCOUNTED]
    whole = account(sent, [], [*mirrored, ("k", 2)], [("k", 0), ("k", 1), ("k", 2)])
    assert whole.read_without_copy == 0 and FailReason.TARGET_UNCOUNTED not in dict(judge(whole, Budget()).reasons)
