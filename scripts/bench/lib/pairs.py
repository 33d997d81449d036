"""Two contenders measured alternately in one run (an A/B), and the figures drawn from it.

The invariant: a ratio is only formed between the two measurements of one pair (the same command or round,
taken back to back, who goes first alternating from pair to pair), never across pairs; so a machine whose load
drifts during the run (a CI run on the same two cores) moves both sides of a ratio alike, and the spread of the
per-pair ratios shows how much noise is left. A measurement that failed (no value) takes its pair out of the
ratios but stays in the report.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: The contenders, in the order of the first pair: the code before a change and after it.
BEFORE, AFTER = "before", "after"
CONTENDERS = (BEFORE, AFTER)


def order(pair: int, contenders: Sequence[str] = CONTENDERS) -> list[str]:
    """Who goes first in pair ``pair`` (0-based): the contenders' order, reversed every other pair (A B, B A, ...),
    so that neither always runs first (on a cold cache, or after the other warmed it)."""
    return list(contenders) if pair % 2 == 0 else list(contenders)[::-1]


@dataclass(frozen=True)
class Measurement:
    """One contender's figure in one pair, with the host's 1-minute load average just before and after it."""

    contender: str
    pair: str
    value: float | None
    load_before: float
    load_after: float


def pair_ratios(
    measurements: Sequence[Measurement], numerator: str = AFTER, denominator: str = BEFORE, digits: int = 3
) -> dict[str, float]:
    """Per pair (in order of first appearance): numerator's value / denominator's value, rounded; a pair without
    both values, or with a zero denominator, has no ratio."""
    values: dict[str, dict[str, float | None]] = {}
    for m in measurements:
        values.setdefault(m.pair, {})[m.contender] = m.value
    ratios: dict[str, float] = {}
    for pair, by_contender in values.items():
        top, bottom = by_contender.get(numerator), by_contender.get(denominator)
        if top is not None and bottom:
            ratios[pair] = round(top / bottom, digits)
    return ratios


def _median(values: Sequence[float], digits: int) -> float | None:
    return round(statistics.median(values), digits) if values else None


def ratio_summary(ratios: dict[str, float], digits: int = 3) -> dict[str, Any]:
    """The per-pair ratios with their median, lowest and highest (None without pairs)."""
    values = list(ratios.values())
    return {
        "per_pair": ratios,
        "pairs": len(values),
        "median": _median(values, digits),
        "min": min(values) if values else None,
        "max": max(values) if values else None,
    }


def summarize(
    measurements: Sequence[Measurement], contenders: Sequence[str] = CONTENDERS, digits: int = 3
) -> dict[str, Any]:
    """Each contender's values (in run order; None for a failed one) and median, the ratios of the last contender
    to the first per pair (``ratio_<last>_to_<first>``) and the load averages seen around the measurements."""
    first, last = contenders[0], contenders[-1]
    loads = [load for m in measurements for load in (m.load_before, m.load_after)]
    return {
        "values": {c: [m.value for m in measurements if m.contender == c] for c in contenders},
        "median": {
            c: _median([m.value for m in measurements if m.contender == c and m.value is not None], digits)
            for c in contenders
        },
        "failed": sum(1 for m in measurements if m.value is None),
        f"ratio_{last}_to_{first}": ratio_summary(pair_ratios(measurements, last, first, digits), digits),
        "load1": {"min": min(loads) if loads else None, "max": max(loads) if loads else None},
    }
