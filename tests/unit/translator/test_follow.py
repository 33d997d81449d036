"""The commit follower over a fake ``__consumer_offsets`` tail and fake shadow groups: nothing written before
the tail caught up, one coalesced write per group per interval with the translator's translation, deletions,
a refused write retried, a group's write never started while its previous one is unanswered (the others are),
and the one-line fallback when reading the topic is refused."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path

import pytest
from support.fakes import NOW, World, two_cluster_config, world

from drkit.core.group_commits import GroupRecord, RecordKind
from drkit.core.live_checkpoints import decode_metadata, shadow_group
from drkit.core.offsets import SyncRange
from drkit.core.translate import Position
from drkit.errors import AccessDenied, ClusterError, Refusal
from drkit.layout import StateLayout
from drkit.translator.follow import CommitFollower, FollowMode
from drkit.translator.job import TranslatorJob
from drkit.wiring import translator_context

FLOW = "A->B"


class FakeTail:
    def __init__(self, chunks: list[list[GroupRecord]], denied: bool = False, caught_up_after: int = 1) -> None:
        self.chunks = chunks
        self.denied = denied
        self.reads = 0
        self.caught_up_after = caught_up_after
        self.closed = False

    def read(self, timeout: float = 0.1) -> list[GroupRecord]:
        if self.denied:
            raise AccessDenied("cluster A: the principal may not READ topic __consumer_offsets")
        self.reads += 1
        return self.chunks.pop(0) if self.chunks else []

    def caught_up(self, idle: bool = False) -> bool:
        return self.reads >= self.caught_up_after

    def close(self) -> None:
        self.closed = True


class FakeShadows:
    """Answers each write at once (refused for the groups in ``refuse``, once), or, with ``hold``, leaves its
    answer to the test (``answer``)."""

    def __init__(self, refuse: Iterable[str] = (), hold: bool = False) -> None:
        self.commits: list[dict[str, dict[tuple[str, int], tuple[int, str]]]] = []
        self.deleted: list[str] = []
        self.refuse = set(refuse)
        self.hold = hold
        self.pending: dict[str, Future[Refusal | None]] = {}
        self.deny = False

    def commit_with_metadata_started(
        self, commits: Mapping[str, Mapping[tuple[str, int], tuple[int, str]]]
    ) -> dict[str, Future[Refusal | None]]:
        self.commits.append({g: dict(o) for g, o in commits.items()})
        out: dict[str, Future[Refusal | None]] = {}
        for g in commits:
            out[g] = Future()
            if self.hold:
                self.pending[g] = out[g]
            elif self.deny:
                out[g].set_result(AccessDenied(f"cluster B: the principal may not READ group {g!r}"))
            else:
                out[g].set_result(ClusterError("cluster B: refused") if g in self.refuse else None)
        self.refuse.clear()
        return out

    def answer(self, group: str, refusal: str | None = None) -> None:
        self.pending.pop(group).set_result(None if refusal is None else ClusterError(refusal))

    def delete_groups(self, groups: Iterable[str]) -> dict[str, str]:
        self.deleted.extend(groups)
        return {}


def commit(group: str, partition: int, offset: int, ts: int, topic: str = "t") -> GroupRecord:
    return GroupRecord(RecordKind.OFFSET_COMMIT, 1, group, topic, partition, offset, commit_timestamp=ts)


def mirrored(tmp_path: Path) -> World:
    extra = {"flows": [{"source": "A", "target": "B", "checkpoint": {"follow_commits": True}}]}
    w = world(tmp_path, two_cluster_config(tmp_path, **extra))
    w.syncs.add(FLOW, "t", "A.t", 0, SyncRange(0, 99, 1000, 1099))
    return w


def follower(w: World, tail: FakeTail, shadows: FakeShadows) -> CommitFollower:
    ctx = translator_context(
        w.config, StateLayout(w.config.state_root()), lambda: NOW, w.clusters, w.syncs, w.checkpoints
    )
    return CommitFollower(TranslatorJob(ctx, w.config.flows[0]), tail, shadows)


def test_nothing_is_written_before_the_tail_caught_up_then_one_coalesced_write(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    tail = FakeTail([[commit("g", 0, 10, 1), commit("g", 0, 40, 2)], [commit("g", 0, 30, 3)]], caught_up_after=2)
    shadows = FakeShadows()
    f = follower(w, tail, shadows)
    f.step(0)
    assert f.flush() is None and shadows.commits == []  # an older commit than one written before may be in the fold
    f.step(0)
    f.flush()
    assert len(shadows.commits) == 1
    (offset, meta) = shadows.commits[0][shadow_group(FLOW, "g")][("A.t", 0)]
    # The last in log order (a reset from 40 to 30), translated by the syncs: 1030.
    assert offset == 1030
    assert decode_metadata(FLOW, "g", "A.t", 0, meta) is not None
    live = decode_metadata(FLOW, "g", "A.t", 0, meta)
    assert live is not None and (
        live.checkpoint.upstream_offset,
        live.checkpoint.position,
        live.commit_timestamp_ms,
    ) == (
        30,
        Position.MIRRORED,
        3,
    )
    assert f.flush() is None  # nothing new: nothing written


def test_unselected_unchanged_and_unmirrored_commits_are_not_written(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    records = [commit("g", 0, 10, 1), commit("connect-x", 0, 5, 1), commit("g", 1, 5, 1)]
    shadows = FakeShadows()
    f = follower(w, FakeTail([records, [commit("g", 0, 10, 1)]]), shadows)
    f.step(0)
    f.flush()
    assert list(shadows.commits[0]) == [shadow_group(FLOW, "g")]
    assert set(shadows.commits[0][shadow_group(FLOW, "g")]) == {("A.t", 0)}  # partition 1: nothing mirrored
    f.step(0)  # the same commit again (a replayed record): no change
    assert f.flush() is None


def test_deletions_reach_the_shadow_groups(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    chunks = [
        [commit("g", 0, 10, 1), commit("h", 0, 20, 1)],
        [GroupRecord(RecordKind.OFFSET_TOMBSTONE, 1, "g", "t", 0), GroupRecord(RecordKind.GROUP_TOMBSTONE, 2, "h")],
    ]
    shadows = FakeShadows()
    f = follower(w, FakeTail(chunks), shadows)
    f.step(0)
    f.flush()
    f.step(0)
    f.flush()
    assert shadows.deleted == [shadow_group(FLOW, "h")]
    marker = decode_metadata(FLOW, "g", "A.t", 0, shadows.commits[1][shadow_group(FLOW, "g")][("A.t", 0)][1])
    assert marker is not None and marker.deleted


def test_a_refused_write_is_retried_with_the_newest(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    shadows = FakeShadows(refuse=[shadow_group(FLOW, "g")])
    f = follower(w, FakeTail([[commit("g", 0, 10, 1)], [commit("h", 0, 5, 2)]]), shadows)
    f.step(0)
    f.flush()
    f.step(0)
    f.flush()
    assert set(shadows.commits[1]) == {shadow_group(FLOW, "g"), shadow_group(FLOW, "h")}
    assert shadows.commits[1][shadow_group(FLOW, "g")][("A.t", 0)][0] == 1010


def test_shadow_writes_refused_for_a_missing_acl_fall_back_with_one_warning_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A target that refuses the shadow groups for a missing ACL refuses every write alike: not retried every
    interval (a line each time), the follower stops with one line naming the target and the fallback."""
    w = mirrored(tmp_path)
    tail = FakeTail([[commit("g", 0, 10, 1)], [commit("g", 0, 20, 2)], [commit("g", 0, 30, 3)]])
    shadows = FakeShadows()
    shadows.deny = True
    f = follower(w, tail, shadows)
    guard = threading.Event()
    timer = threading.Timer(10, guard.set)  # a follower that never falls back fails the test, not the run
    timer.start()
    with caplog.at_level(logging.WARNING, logger="drkit.translator.follow"):
        assert f.run(guard) is FollowMode.ADMIN_API
    timer.cancel()
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1, lines
    assert "cluster B refused the shadow groups' writes" in lines[0] and "may not READ group" in lines[0]
    assert "following commits through the admin API every 2.0 s instead" in lines[0]
    assert len(shadows.commits) == 1 and tail.closed


def test_a_refused_read_falls_back_with_one_warning_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = mirrored(tmp_path)
    tail = FakeTail([], denied=True)
    f = follower(w, tail, FakeShadows())
    with caplog.at_level(logging.WARNING, logger="drkit.translator.follow"):
        assert f.run(threading.Event()) is FollowMode.ADMIN_API
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1
    assert "cluster A" in lines[0] and "following commits through the admin API every 2.0 s instead" in lines[0]
    assert tail.closed


def test_a_write_that_fails_outright_is_kept_for_the_next(tmp_path: Path) -> None:
    w = mirrored(tmp_path)

    class Down(FakeShadows):
        def commit_with_metadata_started(
            self, commits: Mapping[str, Mapping[tuple[str, int], tuple[int, str]]]
        ) -> dict[str, Future[Refusal | None]]:
            raise ClusterError("cluster B: down")

    down = Down()
    f = follower(w, FakeTail([[commit("g", 0, 10, 1)]]), down)
    f.step(0)
    with pytest.raises(ClusterError):
        f.flush()
    f.shadows = shadows = FakeShadows()
    f.flush()
    assert shadows.commits[0][shadow_group(FLOW, "g")][("A.t", 0)][0] == 1010


def test_a_group_with_a_write_in_flight_waits_for_its_answer_while_the_others_are_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    w = mirrored(tmp_path)
    chunks = [[commit("g", 0, 10, 1)], [commit("g", 0, 20, 2), commit("h", 0, 5, 2)], [commit("g", 0, 30, 3)]]
    shadows = FakeShadows(hold=True)
    f = follower(w, FakeTail(chunks), shadows)
    g, h = shadow_group(FLOW, "g"), shadow_group(FLOW, "h")
    f.step(0)
    f.flush()
    f.step(0)
    f.flush()  # g's first write unanswered: only h is written; g's 20 waits
    assert [set(c) for c in shadows.commits] == [{g}, {h}]
    f.step(0)  # g commits 30
    assert f.flush() is None  # still unanswered: nothing of g is written
    shadows.answer(g)
    shadows.answer(h)
    f.flush()
    assert list(shadows.commits[2]) == [g] and shadows.commits[2][g][("A.t", 0)][0] == 1030  # the newest
    # Refused: put back under anything newer, and written again once answered; one warning line.
    with caplog.at_level(logging.WARNING, logger="drkit.translator.follow"):
        shadows.answer(g, "cluster B: COORDINATOR_NOT_AVAILABLE")
        f.flush()
    assert shadows.commits[3][g][("A.t", 0)][0] == 1030
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "1 shadow group(s) not written (retried)" in line and "COORDINATOR_NOT_AVAILABLE" in line
