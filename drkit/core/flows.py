"""Rules over the set of replication flows: loops that copy forever and topics written by two sources.

Pure decisions over frozen values; :mod:`drkit.config` turns each :class:`Finding` into its message.

Invariants (checked with hypothesis in ``tests/unit/core/test_flows.py``):

- :func:`simple_cycles` returns every simple cycle of the flow graph exactly once, as flow indices
  in travel order, starting from the flow that leaves the cycle's least cluster;
- a cycle of identity flows is never a finding: names stay the same, and the mirror never copies a
  record whose ``drkit.origin`` headers name the flow's target;
- a cycle with a prefix flow is a finding exactly when a topic name sent around it never stops
  (the prefix flow X->Y skips names whose chain of prefixes holds Y): that is, unless some cluster
  both receives and sends with the prefix policy and every prefix flow writes one separator;
- two identity flows into one target are a finding when their selections may share a name;
  :func:`may_overlap` is never False for two selectors that both match some name.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from drkit.core.selection import NameSelector


class Policy(StrEnum):
    """How a flow names its target topics (:mod:`drkit.core.policy`)."""

    PREFIX = "prefix"
    IDENTITY = "identity"


class Problem(StrEnum):
    """The kinds of topology the config refuses."""

    #: A two-way pair with identity one way and prefix the other.
    MIXED_POLICY_PAIR = "mixed-policy-pair"
    #: A longer loop where no cluster both receives and sends with the prefix policy.
    NO_PREFIX_HANDOFF = "no-prefix-handoff"
    #: A loop whose prefix flows write different separators.
    MIXED_SEPARATORS = "mixed-separators"
    #: Two identity flows into one target whose selections may share a topic name.
    IDENTITY_FAN_IN = "identity-fan-in"


@dataclass(frozen=True)
class Flow:
    """One flow as the topology rules see it: its two clusters, its policy and separator."""

    source: str
    target: str
    policy: Policy = Policy.PREFIX
    separator: str = "."

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"


@dataclass(frozen=True)
class Finding:
    """A refused topology.

    ``flow`` is the index of the flow whose setting should change (the key an error names);
    ``flows`` the flows involved: a loop in travel order, or the two flows of a fan-in (earlier first).
    ``other`` is the second flow the message names (the reverse flow of a pair, the flow with another
    separator, the earlier flow of a fan-in).
    """

    problem: Problem
    flow: int
    flows: tuple[int, ...]
    other: int


def topology_findings(flows: Sequence[Flow], selectors: Sequence[NameSelector]) -> Iterator[Finding]:
    """Every finding over ``flows``, loops first (one per cycle), then fan-ins in index order.

    ``selectors[i]`` is the topic selection of ``flows[i]``.
    """
    for cycle in simple_cycles(flows):
        finding = loop_finding(flows, cycle)
        if finding is not None:
            yield finding
    identity = [i for i, flow in enumerate(flows) if flow.policy is Policy.IDENTITY]
    for a in identity:
        for b in identity:
            if a < b and flows[a].target == flows[b].target and may_overlap(selectors[a], selectors[b]):
                yield Finding(Problem.IDENTITY_FAN_IN, b, (a, b), a)


def simple_cycles(flows: Sequence[Flow]) -> list[tuple[int, ...]]:
    """Every simple cycle of the flow graph, as flow indices in order, each found once (from its least cluster)."""
    outgoing: dict[str, list[int]] = {}
    for i, flow in enumerate(flows):
        outgoing.setdefault(flow.source, []).append(i)
    cycles: list[tuple[int, ...]] = []

    def extend(start: str, node: str, path: tuple[int, ...], visited: frozenset[str]) -> None:
        for i in outgoing.get(node, []):
            nxt = flows[i].target
            if nxt == start:
                cycles.append((*path, i))
            elif nxt > start and nxt not in visited:
                # Only clusters above the start: the cycle is found once, from its least cluster.
                extend(start, nxt, (*path, i), visited | {nxt})

    for start in sorted(outgoing):
        extend(start, start, (), frozenset({start}))
    return cycles


def loop_finding(flows: Sequence[Flow], cycle: Sequence[int]) -> Finding | None:
    """Why records would go round ``cycle`` (flow indices in travel order) forever, or None."""
    loop = tuple(cycle)
    prefix = [flows[i].policy is Policy.PREFIX for i in loop]
    if not any(prefix):
        # Names stay the same all the way round, and the mirror never copies a record whose drkit.origin
        # headers name the flow's target (it has been there): nothing goes round twice.
        return None
    if not any(prefix[j] and prefix[(j + 1) % len(loop)] for j in range(len(loop))):
        first = min(i for i in loop if flows[i].policy is Policy.IDENTITY)
        if len(loop) == 2:
            reverse = loop[0] if first == loop[1] else loop[1]
            return Finding(Problem.MIXED_POLICY_PAIR, first, loop, reverse)
        return Finding(Problem.NO_PREFIX_HANDOFF, first, loop, first)
    prefixed = sorted(i for i in loop if flows[i].policy is Policy.PREFIX)
    if len({flows[i].separator for i in prefixed}) > 1:
        # The chain of prefixes is read with one separator; a prefix written with another is not seen.
        other = next(i for i in prefixed if flows[i].separator != flows[prefixed[0]].separator)
        return Finding(Problem.MIXED_SEPARATORS, other, loop, other)
    return None


def _alternatives(pattern: str) -> list[str]:
    """``pattern`` split at its top-level ``|``."""
    parts: list[str] = []
    depth, start, i, in_class = 0, 0, 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 2 if pattern[i + 1 : i + 2] == "]" else 1  # a leading ']' is a literal
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*parts, pattern[start:]]


def _literal_prefix(alternative: str) -> tuple[str, bool]:
    """The text every match of ``alternative`` starts with, and whether that text is the only match."""
    out: list[str] = []
    i = 1 if alternative.startswith("^") else 0
    while i < len(alternative):
        c = alternative[i]
        if c == "$" and i == len(alternative) - 1:
            break
        if c == "\\" and i + 1 < len(alternative) and not alternative[i + 1].isalnum():
            char, step = alternative[i + 1], 2
        elif c in ".^$*+?{}[]()|\\":
            return "".join(out), False
        else:
            char, step = c, 1
        after = alternative[i + step : i + step + 1]
        if after and after in "*?{":
            return "".join(out), False
        out.append(char)
        if after == "+":
            return "".join(out), False
        i += step
    return "".join(out), True


def literal_names(pattern: str) -> tuple[str, ...]:
    """The names ``pattern``'s alternatives that are plain text select (``orders|a\\.b``: orders, a.b)."""
    found = (_literal_prefix(alternative) for alternative in _alternatives(pattern))
    return tuple(text for text, whole in found if whole)


def alternatives(pattern: str) -> list[str]:
    """``pattern`` split at its top-level ``|``."""
    return _alternatives(pattern)


def may_overlap(a: NameSelector, b: NameSelector) -> bool:
    """False only when no name can be selected by both: a literal one refuses, or literal starts differ."""
    for x in (alt for pattern in a.include for alt in _alternatives(pattern)):
        for y in (alt for pattern in b.include for alt in _alternatives(pattern)):
            x_start, x_whole = _literal_prefix(x)
            y_start, y_whole = _literal_prefix(y)
            if x_whole or y_whole:
                name = x_start if x_whole else y_start
                if a.matches(name) and b.matches(name):
                    return True
            elif x_start.startswith(y_start) or y_start.startswith(x_start):
                return True
    return False
