"""The probe drill's steps on fakes (drkit.drill.probe): its refusals change nothing, the group itself is never
committed to, the drill group (and an interrupted probe's) is deleted, and the reads are judged."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.fakes import NOW_MS, World, world

from drkit.config import ClusterConfig
from drkit.core.drill import DrillVerdict
from drkit.core.mirror_lease import Instance, LeaseAct, LeaseEntry
from drkit.core.offsets import SyncRange
from drkit.core.plan import Plan
from drkit.core.probe import ProbeBudget, ReadRecord, SourceRecord, drill_group_prefix
from drkit.drill.probe import Probe, ProbeRequest
from drkit.errors import AccessDenied, RefusedError
from drkit.operate.context import OperateContext
from drkit.operate.failover import FailoverRequest, plan_failover

FLOW = "A->B"
Key = tuple[str, int]


class Facade:
    def __init__(self, w: World) -> None:
        self.w = w
        self.config = w.config
        self.context: OperateContext = w.context

    def plan_failover(self, flow: str, groups: list[str] | None) -> Plan:
        return plan_failover(self.context, FailoverRequest(self.config.flow(flow), groups))


def mirrored(tmp_path: Path, lease: bool = True) -> World:
    """orders/0: 10 records on A, copied 1:1; billing committed 5 on A and checkpointed there."""
    w = world(tmp_path)
    w.syncs.add(FLOW, "orders", "A.orders", 0, SyncRange(0, 9, 0, 9))
    w.a.ends[("orders", 0)] = 10
    w.a.offsets["billing"] = {("orders", 0): 5}
    w.checkpoints.add(FLOW, "billing", "orders", "A.orders", 0, 5)
    if lease:
        holder = Instance("m1", "host-1", 42)
        w.b.lease[FLOW] = [LeaseEntry(0, NOW_MS - 1_000, LeaseAct.CLAIM, holder, 5_000)]
    return w


def source_reads(
    cluster: ClusterConfig, alias: str, ranges: Mapping[Key, tuple[int, int]], timeout: float
) -> dict[Key, list[SourceRecord]]:
    return {k: [SourceRecord(o, f"d{o}", o) for o in range(a, b)] for k, (a, b) in ranges.items()}


def target_reads(
    origins: list[int], seen: list[str]
) -> Callable[..., tuple[dict[Key, list[ReadRecord]], float | None]]:
    def read(
        cluster: ClusterConfig,
        alias: str,
        group: str,
        partitions: Sequence[Key],
        origin_alias: str,
        done: Callable[[Key, Sequence[ReadRecord], bool], bool],
        wait: float,
        cap: int,
    ) -> tuple[dict[Key, list[ReadRecord]], float | None]:
        seen.append(group)
        return {("A.orders", 0): [ReadRecord(o, o, f"d{o}") for o in origins]}, 0.01

    return read


def probe(w: World, origins: list[int], seen: list[str] | None = None, **kw: Any) -> Probe:
    request = ProbeRequest(w.config.flow(FLOW), "billing", **kw)
    return Probe(Facade(w), request, source_reads, target_reads(origins, seen if seen is not None else []))


def test_a_correct_copy_passes_and_only_the_drill_group_is_committed_then_deleted(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    leftover = f"{drill_group_prefix(FLOW, 'billing')}old"
    w.b.offsets[leftover] = {("A.orders", 0): 1}  # an interrupted probe's
    seen: list[str] = []
    report = probe(w, list(range(5, 10)), seen).run()
    assert report.verdict is DrillVerdict.PASSED and report.total("verified") == 5
    assert [g for g, _ in w.b.commits] == [report.drill_group] == seen
    assert w.b.commits[0][1] == {("A.orders", 0): 5}
    assert "billing" not in w.b.offsets and w.a.offsets["billing"] == {("orders", 0): 5}
    assert report.drill_group not in w.b.offsets and leftover not in w.b.offsets


def test_a_re_read_past_the_budget_fails(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    w.a.offsets["billing"] = {("orders", 0): 7}  # committed after the checkpoint at 5
    report = probe(w, list(range(5, 10))).run()
    assert report.verdict is DrillVerdict.FAILED and report.total("reread") == 2
    assert probe(w, list(range(5, 10)), budget=ProbeBudget(reread=2)).run().verdict is DrillVerdict.PASSED


def test_no_mirror_holding_the_lease_is_refused_before_anything(tmp_path: Path) -> None:
    w = mirrored(tmp_path, lease=False)
    with pytest.raises(RefusedError, match="no mirror holds its lease on B"):
        probe(w, []).run()
    assert w.b.commits == []


def test_a_group_without_checkpoints_is_refused_before_anything(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    request = ProbeRequest(w.config.flow(FLOW), "nobody")
    with pytest.raises(RefusedError, match="group 'nobody' has no checkpoints in flow A->B"):
        Probe(Facade(w), request, source_reads, target_reads([], [])).run()
    assert w.b.commits == []


def test_a_target_refusing_the_drill_group_s_commit_is_its_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    w = mirrored(tmp_path)

    def refuse(group: str, offsets: Mapping[Key, int]) -> None:
        w.b.offsets[group] = dict(offsets)  # as if a part were kept before the refusal
        raise AccessDenied(f"cluster B: the principal may not commit group {group!r} (READ on GROUP)")

    def no_delete(groups: Any) -> dict[str, str]:
        for g in groups:
            w.b.offsets.pop(g, None)
        return {g: "cluster B: cannot delete group" for g in groups}

    w.b.commit_offsets = refuse  # type: ignore[method-assign]
    w.b.delete_groups = no_delete  # type: ignore[method-assign]
    with pytest.raises(AccessDenied, match="READ on GROUP"):
        probe(w, []).run()
    assert not [g for g in w.b.offsets if g.startswith(drill_group_prefix(FLOW, "billing"))]
