"""How flows relate: the flow topologies drkit refuses, decided over the flows alone.

A topology is refused when records would be copied forever around a loop of flows, or when two
flows would write two different source topics into one target topic. Pure: the config model turns
its flows into :class:`FlowEdge` values and reports a :class:`FlowProblem` under the key it names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from drkit.core.selection import NameSelector


class PolicyName(StrEnum):
    """A flow's replication policy (drkit.core.policy): how its target topics are named."""

    PREFIX = "prefix"
    IDENTITY = "identity"


@dataclass(frozen=True)
class FlowEdge:
    """One flow as the topology sees it: from where to where, and how it names what it copies."""

    name: str
    source: str
    target: str
    policy: PolicyName
    separator: str = "."


@dataclass(frozen=True)
class FlowProblem:
    """Why a set of flows cannot work, and the config key (``flows[i].<field>``) to fix."""

    key: str
    reason: str


def topology_problem(flows: Sequence[FlowEdge], selectors: Sequence[NameSelector]) -> FlowProblem | None:
    """The first way ``flows`` would copy records forever or mix two sources in one topic, with the key
    of the config (``flows[i].<field>``) it is about.

    ``selectors[i]`` is the topic selection of ``flows[i]``. Loops: follow a topic around a cycle of
    flows. An identity flow keeps its name; a prefix flow X->Y renames it ``X.<name>`` and skips names
    whose chain of prefixes already holds Y. A cycle of identity flows keeps every name, and the mirror never
    copies a record whose ``drkit.origin`` headers name the flow's target, so records stop there. Otherwise
    a copy stops coming around exactly when some cluster of
    the cycle both receives and sends with the prefix policy (its outgoing flow writes the prefix its
    incoming flow recognises) and every prefix flow of the cycle writes the same separator (the chain
    is read with one). Otherwise the name comes back unchanged, or longer, every lap. Fan-in: two
    identity flows into one target keep their sources' names; if both may select one name, two
    different topics are written into one.
    """
    for cycle in _simple_cycles(flows):
        problem = _loop_problem(flows, cycle)
        if problem:
            return problem
    identity = [i for i, flow in enumerate(flows) if flow.policy is PolicyName.IDENTITY]
    for a in identity:
        for b in identity:
            if a < b and flows[a].target == flows[b].target and _may_overlap(selectors[a], selectors[b]):
                return FlowProblem(
                    f"flows[{b}].topics.include",
                    f"flows {flows[a].name} and {flows[b].name} both copy into cluster {flows[b].target!r} with "
                    "the identity policy and may select the same topic name, so two topics would be written "
                    "into one; give them include patterns that start with different literal text, or use "
                    "the prefix policy",
                )
    return None


def _simple_cycles(flows: Sequence[FlowEdge]) -> list[list[int]]:
    """Every simple cycle of the flow graph, as flow indices in order, each found once (from its least cluster)."""
    outgoing: dict[str, list[int]] = {}
    for i, flow in enumerate(flows):
        outgoing.setdefault(flow.source, []).append(i)
    cycles: list[list[int]] = []

    def extend(start: str, node: str, path: list[int], visited: frozenset[str]) -> None:
        for i in outgoing.get(node, []):
            nxt = flows[i].target
            if nxt == start:
                cycles.append([*path, i])
            elif nxt > start and nxt not in visited:
                extend(start, nxt, [*path, i], visited | {nxt})

    for start in sorted(outgoing):
        extend(start, start, [], frozenset({start}))
    return cycles


def _loop_problem(flows: Sequence[FlowEdge], cycle: list[int]) -> FlowProblem | None:
    names = ", ".join(flows[i].name for i in cycle)
    prefix = [flows[i].policy is PolicyName.PREFIX for i in cycle]
    if not any(prefix):
        # Names stay the same all the way round, and the mirror never copies a record whose drkit.origin
        # headers name the flow's target (it has been there): nothing goes round twice.
        return None
    if not any(prefix[j] and prefix[(j + 1) % len(cycle)] for j in range(len(cycle))):
        first = min(i for i in cycle if flows[i].policy is PolicyName.IDENTITY)
        if len(cycle) == 2:
            reverse = flows[cycle[0] if first == cycle[1] else cycle[1]].name
            return FlowProblem(
                f"flows[{first}].replication_policy",
                f"flow {flows[first].name} uses the identity policy while flow {reverse} uses the prefix policy, so "
                "copies of copies would be created forever under ever longer names; use the same policy both ways "
                "(prefix, or identity: records that came from a flow's target are never copied back)",
            )
        return FlowProblem(
            f"flows[{first}].replication_policy",
            f"flows {names} form a loop in which no cluster both receives and sends with the prefix policy, so "
            "copies of copies would be created around it forever under ever longer names; use the prefix policy on "
            "two flows in a row of the loop, or the identity policy on all of them",
        )
    prefixed = sorted(i for i in cycle if flows[i].policy is PolicyName.PREFIX)
    if len({flows[i].separator for i in prefixed}) > 1:
        other = next(i for i in prefixed if flows[i].separator != flows[prefixed[0]].separator)
        return FlowProblem(
            f"flows[{other}].separator",
            f"the prefix flows of the loop {names} use different separators, so none recognises the prefixes "
            "the others write and records would be copied around it forever; use one separator",
        )
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


def _may_overlap(a: NameSelector, b: NameSelector) -> bool:
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
