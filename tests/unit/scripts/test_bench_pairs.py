"""The A/B benchmark's pure parts (scripts/bench/lib/pairs.py): who goes first in each pair, the per-pair ratios
(only ever between the two measurements of one pair), their median and spread, and the load range."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts.bench.lib.pairs import (  # noqa: E402
    AFTER,
    BEFORE,
    Measurement,
    order,
    pair_ratios,
    ratio_summary,
    summarize,
)


def m(contender: str, pair: str, value: float | None, load: float = 1.0) -> Measurement:
    return Measurement(contender, pair, value, load, load)


def test_the_first_contender_alternates_from_pair_to_pair() -> None:
    assert [order(i) for i in range(4)] == [
        [BEFORE, AFTER],
        [AFTER, BEFORE],
        [BEFORE, AFTER],
        [AFTER, BEFORE],
    ]


@given(st.integers(0, 1_000))
def test_every_pair_runs_each_contender_once(pair: int) -> None:
    assert sorted(order(pair)) == sorted([BEFORE, AFTER])
    assert order(pair) != order(pair + 1)


def test_a_ratio_is_after_over_before_within_its_own_pair_whatever_the_order() -> None:
    runs = [m(BEFORE, "p1", 2.0), m(AFTER, "p1", 3.0), m(AFTER, "p2", 1.0), m(BEFORE, "p2", 4.0)]
    assert pair_ratios(runs) == {"p1": 1.5, "p2": 0.25}


def test_a_pair_missing_a_value_or_a_contender_has_no_ratio() -> None:
    runs = [
        m(BEFORE, "failed", 2.0),
        m(AFTER, "failed", None),
        m(BEFORE, "alone", 2.0),
        m(BEFORE, "zero", 0.0),
        m(AFTER, "zero", 1.0),
        m(BEFORE, "ok", 2.0),
        m(AFTER, "ok", 2.2),
    ]
    assert pair_ratios(runs) == {"ok": 1.1}


def test_the_ratio_summary_gives_median_and_spread() -> None:
    summary = ratio_summary({"a": 0.9, "b": 1.2, "c": 1.0, "d": 1.1})
    assert summary == {
        "per_pair": {"a": 0.9, "b": 1.2, "c": 1.0, "d": 1.1},
        "pairs": 4,
        "median": 1.05,
        "min": 0.9,
        "max": 1.2,
    }
    assert ratio_summary({}) == {"per_pair": {}, "pairs": 0, "median": None, "min": None, "max": None}


def test_summarize_keeps_each_contenders_values_and_the_loads_seen() -> None:
    runs = [
        Measurement(BEFORE, "p1", 1.0, 2.5, 2.7),
        Measurement(AFTER, "p1", 1.2, 2.7, 3.1),
        Measurement(AFTER, "p2", None, 3.1, 1.9),
        Measurement(BEFORE, "p2", 3.0, 1.9, 2.0),
    ]
    summary = summarize(runs)
    assert summary["values"] == {BEFORE: [1.0, 3.0], AFTER: [1.2, None]}
    assert summary["median"] == {BEFORE: 2.0, AFTER: 1.2}
    assert summary["failed"] == 1
    assert summary["ratio_after_to_before"]["per_pair"] == {"p1": 1.2}
    assert summary["load1"] == {"min": 1.9, "max": 3.1}


@given(
    st.lists(
        st.tuples(st.floats(0.01, 100, allow_nan=False), st.floats(0.01, 100, allow_nan=False)),
        min_size=1,
        max_size=30,
    )
)
def test_the_median_ratio_is_the_median_of_the_pairs_ratios_not_the_ratio_of_medians(
    pairs: list[tuple[float, float]],
) -> None:
    runs = [x for i, (b, a) in enumerate(pairs) for x in (m(BEFORE, f"p{i}", b), m(AFTER, f"p{i}", a))]
    summary = summarize(runs)[f"ratio_{AFTER}_to_{BEFORE}"]
    ratios = [round(a / b, 3) for b, a in pairs]
    assert summary["pairs"] == len(pairs)
    assert summary["median"] == round(statistics.median(ratios), 3)
    assert summary["min"] == min(ratios) and summary["max"] == max(ratios)
