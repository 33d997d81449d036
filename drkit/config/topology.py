"""The config's side of the flow-topology rules: FlowConfigs in, ``(key, message)`` out.

The rules themselves are pure and live in :mod:`drkit.core.flows`; this module only turns flows into
core values and each finding into the dotted key and message operators have always seen.
Invariant: :func:`topology_problem` reports the first finding of :func:`drkit.core.flows.topology_findings`,
and every message names the setting to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from drkit.core.flows import Finding, Flow, Policy, Problem, topology_findings
from drkit.core.selection import NameSelector

if TYPE_CHECKING:
    from drkit.config.flows import FlowConfig


def topology_problem(flows: Sequence[FlowConfig], selectors: Sequence[NameSelector]) -> tuple[str, str] | None:
    """(key, reason) of the first way ``flows`` would copy records forever or mix two sources in one topic.

    ``selectors[i]`` is the topic selection of ``flows[i]``; the rules are :mod:`drkit.core.flows`'.
    """
    core = [Flow(f.source, f.target, Policy(f.replication_policy), f.separator) for f in flows]
    finding = next(topology_findings(core, selectors), None)
    return None if finding is None else _message(core, finding)


def _message(flows: Sequence[Flow], finding: Finding) -> tuple[str, str]:
    flow, other = flows[finding.flow], flows[finding.other]
    names = ", ".join(flows[i].name for i in finding.flows)
    match finding.problem:
        case Problem.MIXED_POLICY_PAIR:
            return (
                f"flows[{finding.flow}].replication_policy",
                f"flow {flow.name} uses the identity policy while flow {other.name} uses the prefix policy, so "
                "copies of copies would be created forever under ever longer names; use the same policy both ways "
                "(prefix, or identity: records that came from a flow's target are never copied back)",
            )
        case Problem.NO_PREFIX_HANDOFF:
            return (
                f"flows[{finding.flow}].replication_policy",
                f"flows {names} form a loop in which no cluster both receives and sends with the prefix policy, so "
                "copies of copies would be created around it forever under ever longer names; use the prefix "
                "policy on two flows in a row of the loop, or the identity policy on all of them",
            )
        case Problem.MIXED_SEPARATORS:
            return (
                f"flows[{finding.flow}].separator",
                f"the prefix flows of the loop {names} use different separators, so none recognises the prefixes "
                "the others write and records would be copied around it forever; use one separator",
            )
        case Problem.IDENTITY_FAN_IN:
            return (
                f"flows[{finding.flow}].topics.include",
                f"flows {other.name} and {flow.name} both copy into cluster {flow.target!r} with "
                "the identity policy and may select the same topic name, so two topics would be written "
                "into one; give them include patterns that start with different literal text, or use "
                "the prefix policy",
            )
