"""The mirror lease's fold: one holder at a time, the same answer for every reader, renewals by the holder only."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.core.mirror_lease import (
    DRIFT_SHARE,
    Instance,
    LeaseAct,
    LeaseEntry,
    LeaseView,
    believed_until,
    checkpoint_sources,
    fold,
    renewal_accepted,
    settings_difference,
)

A, B, C = (Instance(i, f"host-{i}", n) for n, i in enumerate("abc", start=1))
LEASE = 1_000


def entry(offset: int, at: int, act: LeaseAct, who: Instance, claim: int = -1, epoch: int = 0) -> LeaseEntry:
    return LeaseEntry(offset, at, act, who, LEASE, claim, epoch, {"delivery": "at_least_once"})


def test_a_claim_on_a_free_lease_holds_until_renewed_or_expired() -> None:
    view = fold(LeaseView(), [entry(0, 100, LeaseAct.CLAIM, A)])
    assert view.holds("a", 0) and view.running() and view.holder is not None and view.holder.ends_ms == 1_100
    # B claims while A's lease runs: refused; A renews: its lease moves on.
    view = fold(view, [entry(1, 600, LeaseAct.CLAIM, B), entry(2, 900, LeaseAct.RENEW, A, claim=0, epoch=4)])
    assert view.holds("a", 0) and view.holder is not None and view.holder.ends_ms == 1_900
    assert view.holder.epoch == 4
    # B's claim after A's lease ended wins; A's late renewal is not A's lease any more.
    view = fold(view, [entry(3, 1_900, LeaseAct.CLAIM, B), entry(4, 1_950, LeaseAct.RENEW, A, claim=0)])
    assert view.holds("b", 3) and not view.holds("a", 0)
    assert view.holder is not None and view.holder.ends_ms == 2_900 and view.holder.epoch == 0


def test_a_lapsed_holder_renews_when_nobody_claimed() -> None:
    """A target outage longer than the lease does not hand the flow over when nobody else wants it."""
    view = fold(LeaseView(), [entry(0, 0, LeaseAct.CLAIM, A), entry(1, 5_000, LeaseAct.RENEW, A, claim=0)])
    assert view.holds("a", 0) and view.running()


def test_a_release_frees_the_lease_at_once_and_only_the_holder_releases() -> None:
    view = fold(LeaseView(), [entry(0, 0, LeaseAct.CLAIM, A), entry(1, 10, LeaseAct.RELEASE, B, claim=0)])
    assert view.holds("a", 0)
    view = fold(view, [entry(2, 20, LeaseAct.RELEASE, A, claim=0), entry(3, 30, LeaseAct.CLAIM, B)])
    assert view.holds("b", 3)


def test_standbys_are_listed_until_forgotten_and_not_the_holder() -> None:
    view = fold(LeaseView(), [entry(0, 0, LeaseAct.CLAIM, A), entry(1, 10, LeaseAct.STANDBY, B)])
    assert [s.instance for s in view.waiting()] == [B]
    view = fold(view, [entry(2, 10 + 3 * LEASE + 1, LeaseAct.STANDBY, C)])
    assert [s.instance for s in view.waiting()] == [C]  # B not seen for three leases
    view = fold(view, [entry(3, 10 + 3 * LEASE + 2, LeaseAct.CLAIM, C)])
    assert view.waiting() == () and view.holds("c", 3)


def test_an_entry_read_twice_is_folded_once() -> None:
    entries = [entry(0, 0, LeaseAct.CLAIM, A), entry(1, 1_500, LeaseAct.CLAIM, B)]
    once = fold(LeaseView(), entries)
    assert fold(once, entries) == once and once.holds("b", 1)


def test_renewal_accepted_needs_the_renewal_to_be_the_holders() -> None:
    claim = entry(0, 0, LeaseAct.CLAIM, A)
    renewal = entry(1, 500, LeaseAct.RENEW, A, claim=0)
    assert renewal_accepted(fold(LeaseView(), [claim, renewal]), "a", 0, renewal)
    late = entry(3, 2_000, LeaseAct.RENEW, A, claim=0)
    taken = fold(LeaseView(), [claim, renewal, entry(2, 1_600, LeaseAct.CLAIM, B), late])
    assert not renewal_accepted(taken, "a", 0, late)


def test_believed_until_ends_before_the_brokers_lease_even_with_a_faster_local_clock() -> None:
    sent = 10.0  # local seconds; the broker appends it later, so its lease ends after sent + lease
    assert believed_until(sent, LEASE) < sent + LEASE / 1000
    # A local clock running DRIFT_SHARE faster reaches the broker's end no earlier than the belief's end.
    assert believed_until(sent, LEASE) <= sent + LEASE / 1000 * (1 - DRIFT_SHARE) + 1e-9


def test_settings_difference_names_the_first_setting_both_name() -> None:
    assert settings_difference({"delivery": "exactly_once", "topics": "x"}, {"delivery": "at_least_once"}) == (
        "delivery: exactly_once here, at_least_once on the active"
    )
    assert settings_difference({"topics": "x", "new": "1"}, {"topics": "x"}) is None


# -- properties ------------------------------------------------------------------------------------

INSTANCES = (A, B, C)


@st.composite
def logs(draw: st.DrawFn) -> list[LeaseEntry]:
    """Entries of three processes in offset order, append times non-decreasing, renewals and releases of
    claims that exist or not."""
    n = draw(st.integers(0, 40))
    out: list[LeaseEntry] = []
    at = 0
    claims: list[int] = []
    for offset in range(n):
        at += draw(st.integers(0, 700))
        who = draw(st.sampled_from(INSTANCES))
        act = draw(st.sampled_from(list(LeaseAct)))
        claim = -1
        if act in (LeaseAct.RENEW, LeaseAct.RELEASE):
            claim = draw(st.sampled_from(claims)) if claims and draw(st.booleans()) else draw(st.integers(-1, n))
        if act is LeaseAct.CLAIM:
            claims.append(offset)
        out.append(entry(offset, at, act, who, claim))
    return out


def held_intervals(entries: list[LeaseEntry]) -> list[tuple[tuple[str, int], int, int]]:
    """Per entry the fold accepted, the broker-time interval it gives its tenure: [at, end), cut short only by
    the tenure's release (a lapse is not cut: the next claim must come after the end)."""
    out: list[tuple[tuple[str, int], int, int]] = []
    view = LeaseView()
    for e in entries:
        before = view.holder
        view = fold(view, [e])
        after = view.holder
        if after is not None and after != before:
            out.append(((after.instance.id, after.claim), e.at_ms, after.ends_ms))
        if before is not None and after is None:  # released
            mine = (before.instance.id, before.claim)
            out = [(t, s, min(end, e.at_ms)) if t == mine else (t, s, end) for t, s, end in out]
    return out


@given(logs())
@settings(max_examples=300)
def test_two_tenures_never_overlap_in_broker_time(entries: list[LeaseEntry]) -> None:
    intervals = held_intervals(entries)
    for i, (who, start, end) in enumerate(intervals):
        for other, start2, end2 in intervals[i + 1 :]:
            if who != other:
                assert end <= start2 or end2 <= start, (who, start, end, other, start2, end2)


@given(logs(), st.data())
@settings(max_examples=300)
def test_every_reader_of_the_same_entries_holds_the_same_view(entries: list[LeaseEntry], data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(entries)))
    again = data.draw(st.integers(0, cut))  # a reader that fetched some entries twice
    stepwise = fold(fold(LeaseView(), entries[:cut]), entries[again:])
    assert stepwise == fold(LeaseView(), entries)


@given(logs())
@settings(max_examples=300)
def test_a_claim_is_taken_only_when_no_lease_runs(entries: list[LeaseEntry]) -> None:
    view = LeaseView()
    for e in entries:
        after = fold(view, [e])
        if e.act is LeaseAct.CLAIM and after.holds(e.instance.id, e.offset):
            assert view.holder is None or view.holder.ends_ms <= e.at_ms
        view = after


def test_a_claim_one_millisecond_before_the_end_is_refused_and_at_the_end_taken() -> None:
    claim = entry(0, 0, LeaseAct.CLAIM, A)
    assert fold(LeaseView(), [claim, entry(1, LEASE - 1, LeaseAct.CLAIM, B)]).holds("a", 0)
    assert fold(LeaseView(), [claim, entry(1, LEASE, LeaseAct.CLAIM, B)]).holds("b", 1)


@given(st.sets(st.integers(0, 20)), st.integers(0, 21))
def test_a_holder_goes_on_from_the_newest_earlier_checkpoint_and_deletes_only_older_ones(
    found: set[int], epoch: int
) -> None:
    origin, old = checkpoint_sources(found, epoch)
    earlier = {e for e in found if e < epoch}
    assert origin == (max(earlier) if earlier else None)
    assert set(old) == {e for e in earlier if e != origin} and epoch not in old and origin not in old
