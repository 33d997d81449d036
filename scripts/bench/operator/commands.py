"""What the operator benchmark measures and what each measurement must give: the commands timed in each phase
with their expected exit codes and targets, and the outages of phase ``clusters_down`` with the exit code drkit
must give in each (the verdicts of drkit.core.reach and drkit.core.status)."""

from __future__ import annotations

from scripts.bench.operator.fixture import FLOW

PHASES = ("without_maintain", "after_maintain")

#: The operator commands measured, in order: name -> (arguments after the config, expected exit codes).
COMMANDS: dict[str, tuple[list[str], set[int]]] = {
    "status": (["status", "--flow", FLOW], {0, 20, 21}),
    "offsets_group": (["offsets", "--flow", FLOW, "--group", "{group}"], {0}),
    "failover_group_dry_run": (["failover", "--flow", FLOW, "--group", "{group}"], {0}),
    "failover_group_apply": (["failover", "--flow", FLOW, "--group", "{group}", "--apply", "--yes"], {0}),
    "failover_all_dry_run": (["failover", "--flow", FLOW, "--all-groups"], {0}),
    "failover_all_apply": (["failover", "--flow", FLOW, "--all-groups", "--apply", "--yes"], {0}),
    "history": (["history", "--flow", FLOW], {0}),
}
#: Targets (seconds, whole process, idle machine): issue 23's for status and failover of all groups,
#: issue 10's for the others.
TARGETS = {
    "status": 1.0,
    "offsets_group": 3.0,
    "history": 3.0,
    "failover_group_dry_run": 3.0,
    "failover_all_apply": 3.0,
}
FRESHNESS_TARGET_P99 = 5.0

#: Phase ``clusters_down`` (issue 26): the operator commands while clusters are gone. Each outage names the
#: clusters it takes away and how: ``down`` stops the broker (connections refused, as after a crash or a
#: stop), ``frozen`` SIGSTOPs it (connections accepted, nothing answered, as across a network partition).
OUTAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "source_down": (("A",), "down"),
    "target_down": (("B",), "down"),
    "both_down": (("A", "B"), "down"),
    "source_frozen": (("A",), "frozen"),
    "target_frozen": (("B",), "frozen"),
    "both_frozen": (("A", "B"), "frozen"),
}
#: The commands timed in each outage (``{group}``: a group with checkpoints, failed over and back).
OUTAGE_COMMANDS: dict[str, list[str]] = {
    "status": ["status", "--flow", FLOW],
    "offsets_group": ["offsets", "--flow", FLOW, "--group", "{group}"],
    "failover_group_dry_run": ["failover", "--flow", FLOW, "--group", "{group}"],
    "failover_group_apply": ["failover", "--flow", FLOW, "--group", "{group}", "--apply", "--yes"],
    "failback_group_dry_run": ["failback", "--flow", FLOW, "--group", "{group}"],
}
#: The exit code each command must give with the source gone (A) and with the target gone (B, or both):
#: the verdicts of drkit.core.reach and drkit.core.status. Status: 22 source unreachable, 25 target
#: unreachable (also with both gone: nowhere to fail over to is the worse); failover does without the
#: source (its RPO from the last observation) and stops without the target (4); failback needs both (4);
#: offsets shows the source's column as unknown and stops without the target (4).
OUTAGE_EXPECTED: dict[str, dict[str, int]] = {
    "source": {
        "status": 22,
        "offsets_group": 0,
        "failover_group_dry_run": 0,
        "failover_group_apply": 0,
        "failback_group_dry_run": 4,
    },
    "target": {
        "status": 25,
        "offsets_group": 4,
        "failover_group_dry_run": 4,
        "failover_group_apply": 4,
        "failback_group_dry_run": 4,
    },
}
#: Issue 26's target: every command answers within this with a cluster stopped (idle machine, whole process).
OUTAGE_TARGET_SECONDS = 3.0
