"""The order statistics the reports give. Each benchmark keeps the rule its published figures were computed
with: ``nearest_rank`` (the smallest value with at least q of the values at or below it), ``index_rank`` (the
value at index floor(q * n) of the sorted values: one rank above nearest rank on exact multiples), and
``upper_median`` (index n // 2)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence


def nearest_rank(values: Sequence[float], q: float, digits: int = 3) -> float | None:
    """The nearest-rank q-quantile (q in [0, 1]), rounded; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))], digits)


def nearest_rank_summary(values: Sequence[int]) -> dict[str, int] | None:
    """p50, p90, p99 (nearest rank) and the maximum of integer values; None for no values."""
    if not values:
        return None
    ordered = sorted(values)

    def rank(q: float) -> int:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "max": ordered[-1]}


def index_rank(values: Sequence[float], q: float, digits: int = 1) -> float | None:
    """The value at index floor(q * n) of the sorted values (q = 1: the maximum), rounded; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], digits)


def upper_median(values: Sequence[float], digits: int = 3) -> float | None:
    """The value at index n // 2 of the sorted values, rounded; None for no values."""
    return round(sorted(values)[len(values) // 2], digits) if values else None


def median(values: Iterable[float | None], digits: int = 2) -> float | None:
    """The median of the values that are not None, rounded; None if there are none."""
    present = [v for v in values if v is not None]
    return round(statistics.median(present), digits) if present else None


def rate(amount: float, seconds: float | None, digits: int = 1) -> float | None:
    """amount / seconds, rounded; None without a time."""
    return round(amount / seconds, digits) if seconds else None
