"""The commit follower over a fake ``__consumer_offsets`` tail and a fake checkpoint topic: nothing appended
before the tail caught up, one coalesced record per changed group per interval with the translator's
translation and the group's whole state, deletions as tombstones, a refused append appended again with the
newest state, and the one-line fallback when reading ``__consumer_offsets`` or appending is refused."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fakes import NOW, World, two_cluster_config, world

from drkit.core.group_commits import GroupRecord, RecordKind
from drkit.core.live_checkpoints import LiveCheckpoint, decode_value, parse_key
from drkit.core.offsets import SyncRange
from drkit.core.translate import Position
from drkit.errors import AccessDenied, ClusterError, Refusal
from drkit.layout import StateLayout
from drkit.translator.follow import CommitFollower, FollowMode
from drkit.translator.job import TranslatorJob
from drkit.wiring import translator_context

FLOW = "A->B"

Answer = Callable[[Refusal | None], None]


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


class FakeTopic:
    """The checkpoint topic: each append is answered at the next poll (refused once for the groups in
    ``refuse``; with ``hold``, only when the test says: ``answer``); ``log`` holds what was appended."""

    def __init__(self, refuse: tuple[str, ...] = (), hold: bool = False) -> None:
        self.sent: list[tuple[str, bytes | None]] = []
        self.log: list[tuple[str, bytes | None]] = []
        self.refuse = set(refuse)
        self.hold = hold
        self.deny = False
        self.down = False
        self.ensured = 0
        self.closed = False
        #: Raised by the next poll (a writer that failed for good: what it had in flight is never answered).
        self.fail: Exception | None = None
        self._waiting: list[tuple[str, bytes | None, Answer]] = []

    def ensure(self) -> None:
        self.ensured += 1

    def append(self, key: bytes, value: bytes | None, answer: Answer) -> None:
        if self.down:
            raise ClusterError("cluster B: down")
        named = parse_key(key)
        assert named is not None and named[0] == FLOW
        self.sent.append((named[1], value))
        self._waiting.append((named[1], value, answer))

    def poll(self, timeout: float = 0.0) -> None:
        if self.fail is not None:
            fail, self.fail, self._waiting = self.fail, None, []
            raise fail
        if not self.hold:
            self.answer()

    def answer(self, refusal: Refusal | None = None) -> None:
        waiting, self._waiting = self._waiting, []
        for group, value, answer in waiting:
            if self.deny:
                answer(AccessDenied("cluster B: the principal may not WRITE topic _drkit.checkpoints"))
            elif refusal is not None or group in self.refuse:
                self.refuse.discard(group)
                answer(refusal or ClusterError("cluster B: NOT_ENOUGH_REPLICAS"))
            else:
                self.log.append((group, value))
                answer(None)

    def close(self) -> None:
        self.closed = True

    def newest(self, group: str) -> list[LiveCheckpoint] | None:
        """The group's newest appended record (None: a tombstone, or never appended)."""
        values = [v for g, v in self.log if g == group]
        return decode_value(FLOW, group, values[-1]) if values and values[-1] is not None else None


def commit(group: str, partition: int, offset: int, ts: int, topic: str = "t") -> GroupRecord:
    return GroupRecord(RecordKind.OFFSET_COMMIT, 1, group, topic, partition, offset, commit_timestamp=ts)


def mirrored(tmp_path: Path) -> World:
    extra = {"flows": [{"source": "A", "target": "B", "checkpoint": {"follow_commits": True}}]}
    w = world(tmp_path, two_cluster_config(tmp_path, **extra))
    w.syncs.add(FLOW, "t", "A.t", 0, SyncRange(0, 99, 1000, 1099))
    return w


def follower(w: World, tail: FakeTail, topic: FakeTopic) -> CommitFollower:
    ctx = translator_context(
        w.config, StateLayout(w.config.state_root()), lambda: NOW, w.clusters, w.syncs, w.checkpoints
    )
    return CommitFollower(TranslatorJob(ctx, w.config.flows[0]), tail, topic)


def offsets(lives: list[LiveCheckpoint] | None) -> dict[tuple[str, int], int | None]:
    return {(c.checkpoint.target_topic, c.checkpoint.partition): c.checkpoint.downstream_offset for c in lives or []}


def test_nothing_is_appended_before_the_tail_caught_up_then_one_coalesced_record(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    tail = FakeTail([[commit("g", 0, 10, 1), commit("g", 0, 40, 2)], [commit("g", 0, 30, 3)]], caught_up_after=2)
    topic = FakeTopic()
    f = follower(w, tail, topic)
    f.step(0)
    assert f.flush() == [] and topic.sent == []  # an older commit than one appended before may be in the fold
    f.step(0)
    f.flush()
    assert len(topic.sent) == 1 and topic.ensured == 1
    [live] = topic.newest("g") or []
    # The last in log order (a reset from 40 to 30), translated by the syncs: 1030.
    assert (live.checkpoint.downstream_offset, live.checkpoint.upstream_offset) == (1030, 30)
    assert (live.checkpoint.position, live.commit_timestamp_ms) == (Position.MIRRORED, 3)
    assert f.flush() == [] and len(topic.sent) == 1  # nothing new: nothing appended


def test_unselected_unchanged_and_unmirrored_commits_are_not_appended(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    records = [commit("g", 0, 10, 1), commit("connect-x", 0, 5, 1), commit("g", 1, 5, 1)]
    topic = FakeTopic()
    f = follower(w, FakeTail([records, [commit("g", 0, 10, 1)]]), topic)
    f.step(0)
    f.flush()
    assert [g for g, _ in topic.sent] == ["g"]
    assert offsets(topic.newest("g")) == {("A.t", 0): 1010}  # partition 1: nothing mirrored
    f.step(0)  # the same commit again (a replayed record): no change
    assert f.flush() == []


def test_every_record_carries_the_groups_whole_state_and_deletions_reach_the_topic(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    w.syncs.add(FLOW, "t", "A.t", 1, SyncRange(0, 99, 2000, 2099))
    chunks = [
        [commit("g", 0, 10, 1), commit("g", 1, 10, 1), commit("h", 0, 20, 1)],
        [commit("g", 0, 11, 2)],
        [GroupRecord(RecordKind.OFFSET_TOMBSTONE, 1, "g", "t", 0), GroupRecord(RecordKind.GROUP_TOMBSTONE, 2, "h")],
    ]
    topic = FakeTopic()
    f = follower(w, FakeTail(chunks), topic)
    for _ in range(3):
        f.step(0)
        f.flush()
    assert [g for g, _ in topic.sent] == ["g", "h", "g", "g", "h"]
    assert offsets(decode_value(FLOW, "g", topic.sent[2][1])) == {("A.t", 0): 1011, ("A.t", 1): 2010}
    assert offsets(topic.newest("g")) == {("A.t", 1): 2010}  # the deleted offset left out
    assert topic.sent[-1] == ("h", None)  # the deleted group: a tombstone


def test_a_refused_append_is_appended_again_with_the_newest_and_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    w = mirrored(tmp_path)
    topic = FakeTopic(hold=True)
    chunks = [[commit("g", 0, 10, 1)], [commit("g", 0, 20, 2), commit("h", 0, 5, 2)], [commit("g", 0, 30, 3)]]
    f = follower(w, FakeTail(chunks), topic)
    f.step(0)
    f.flush()
    f.step(0)
    f.flush()  # g's first append unanswered: g's newer state is appended behind it (one partition, in order)
    assert [g for g, _ in topic.sent] == ["g", "g", "h"] and f.in_flight == {"g": 2, "h": 1}
    with caplog.at_level(logging.WARNING, logger="drkit.translator.follow"):
        topic.answer(ClusterError("cluster B: NOT_ENOUGH_REPLICAS"))  # all three refused
        f.step(0)  # g commits 30
        f.flush()
    assert f.in_flight == {"g": 1, "h": 1}
    assert sorted(g for g, _ in topic.sent[3:]) == ["g", "h"]
    topic.answer()
    assert offsets(topic.newest("g")) == {("A.t", 0): 1030} and offsets(topic.newest("h")) == {("A.t", 0): 1005}
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "2 group(s)' live checkpoints not appended (appended again)" in line and "NOT_ENOUGH_REPLICAS" in line


def test_appends_refused_for_a_missing_acl_fall_back_with_one_warning_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A target that refuses the checkpoint topic for a missing ACL refuses every append alike: not appended
    again every interval (a line each time), the follower stops with one line naming the target and the
    fallback."""
    w = mirrored(tmp_path)
    tail = FakeTail([[commit("g", 0, 10, 1)], [commit("g", 0, 20, 2)], [commit("g", 0, 30, 3)]])
    topic = FakeTopic()
    topic.deny = True
    f = follower(w, tail, topic)
    guard = threading.Event()
    timer = threading.Timer(10, guard.set)  # a follower that never falls back fails the test, not the run
    timer.start()
    with caplog.at_level(logging.WARNING, logger="drkit.translator.follow"):
        assert f.run(guard) is FollowMode.ADMIN_API
    timer.cancel()
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1, lines
    assert "cluster B refused the checkpoint topic _drkit.checkpoints" in lines[0]
    assert "may not WRITE topic" in lines[0]
    assert "following commits through the admin API every 2.0 s instead" in lines[0]
    assert len(topic.sent) == 1 and tail.closed and topic.closed


def test_a_creation_refused_for_a_missing_acl_falls_back_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = mirrored(tmp_path)

    class NoCreate(FakeTopic):
        def ensure(self) -> None:
            raise AccessDenied("cluster B: the principal may not CREATE topic _drkit.checkpoints")

    topic = NoCreate()
    f = follower(w, FakeTail([[commit("g", 0, 10, 1)]]), topic)
    with caplog.at_level(logging.WARNING, logger="drkit.translator.follow"):
        assert f.run(threading.Event()) is FollowMode.ADMIN_API
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "refused the checkpoint topic" in line and "may not CREATE" in line and topic.sent == []


def test_a_refused_read_falls_back_with_one_warning_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = mirrored(tmp_path)
    tail = FakeTail([], denied=True)
    f = follower(w, tail, FakeTopic())
    with caplog.at_level(logging.WARNING, logger="drkit.translator.follow"):
        assert f.run(threading.Event()) is FollowMode.ADMIN_API
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1
    assert "cluster A" in lines[0] and "following commits through the admin API every 2.0 s instead" in lines[0]
    assert tail.closed


def test_an_append_that_fails_outright_is_kept_for_the_next(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    topic = FakeTopic()
    topic.down = True
    f = follower(w, FakeTail([[commit("g", 0, 10, 1), commit("h", 0, 5, 1)]]), topic)
    f.step(0)
    with pytest.raises(ClusterError):
        f.flush()
    topic.down = False
    f.flush()
    assert offsets(topic.newest("g")) == {("A.t", 0): 1010} and offsets(topic.newest("h")) == {("A.t", 0): 1005}


def test_a_translation_that_fails_keeps_the_changes_for_the_next(tmp_path: Path) -> None:
    w = mirrored(tmp_path)
    topic = FakeTopic()
    f = follower(w, FakeTail([[commit("g", 0, 10, 1)], [commit("g", 1, 3, 2)]]), topic)
    f.step(0)
    real = f.indexes

    def broken() -> dict[tuple[str, int], object]:
        raise ClusterError("cluster B: the syncs table is away")

    f.indexes = broken  # type: ignore[method-assign,assignment]
    with pytest.raises(ClusterError):
        f.flush()
    f.indexes = real  # type: ignore[method-assign]
    f.step(0)
    f.flush()
    assert offsets(topic.newest("g")) == {("A.t", 0): 1010}


@pytest.mark.parametrize("denied", [False, True], ids=["fatal", "id-refused"])
def test_a_writer_lost_for_good_has_its_unanswered_groups_appended_again_or_falls_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, denied: bool
) -> None:
    """A fatal producer error leaves the appends in flight unanswered: each of their groups is appended again
    at the next write; a refused producer id (no WRITE on the topic) is a missing ACL: the fallback line."""
    w = mirrored(tmp_path)
    topic = FakeTopic(hold=True)
    f = follower(w, FakeTail([[commit("g", 0, 10, 1), commit("h", 0, 5, 1)], [commit("k", 0, 7, 2)]]), topic)
    f.step(0)
    f.flush()
    assert f.in_flight == {"g": 1, "h": 1}
    topic.hold = False
    if denied:
        topic.fail = AccessDenied(
            "cluster B: principal lacks WRITE on topic _drkit.checkpoints (its idempotent producer's id was refused)"
        )
        with caplog.at_level(logging.WARNING, logger="drkit.translator.follow"):
            assert f.run(threading.Event()) is FollowMode.ADMIN_API
        [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert "cluster B refused the checkpoint topic _drkit.checkpoints" in line and "WRITE on topic" in line
        return
    topic.fail = ClusterError("cluster B: appending to _drkit.checkpoints: Fatal: sequence lost")
    with pytest.raises(ClusterError):
        f.step(0)
    assert f.in_flight == {}
    f.flush()
    assert sorted(g for g, _ in topic.sent[2:]) == ["g", "h", "k"]
    assert offsets(topic.newest("g")) == {("A.t", 0): 1010} and offsets(topic.newest("k")) == {("A.t", 0): 1007}
