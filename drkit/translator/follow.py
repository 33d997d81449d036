"""The commit follower of one flow: the source's group commits, as they are made, onto the target's checkpoint topic.

It tails the source's ``__consumer_offsets`` (drkit.kafka.consumer_offsets, through the context), folds every
record in log order (drkit.core.group_commits), keeps the selected groups' and topics' changes coalesced per
group and partition (drkit.core.live_checkpoints.PendingCommits) and, every ``follow_interval_ms``, translates
them with the job's cached sync indexes (drkit.core.checkpoints.plan_checkpoints, the translator's own
translation) and appends one record per changed group, its whole live state
(drkit.core.live_checkpoints.LiveState), to the target's checkpoint topic. The appends are never waited for:
the tail goes on being read while the target answers, and the answers are taken as they come.

Write rate, bounded: at most one record per changed group per follow interval (a group committing a thousand
times in between is appended once, with its newest offsets), all of one interval sent together (one produce
request for many groups); the ``checkpoints`` Delta table is not written here at all (the job's interval runs
still commit to it at most once per ``interval_seconds``).

Log order, never offsets, decides what a group's record holds: nothing is appended before the tail has read
every partition up to its end as of its start (until then the fold may hold an older commit than one a
previous follower appended), the records are appended in the order sent (one partition, an idempotent
producer), and a group whose append failed is appended again with its state as it is then. A principal that
may not read ``__consumer_offsets``, or whose appends the target refuses for a missing ACL, gets one WARNING
naming the cluster and the admin API fallback; the flow's interval runs then continue alone
(``drkit_checkpoint_follow_mode`` 0). Other refusals (a broker moving) are appended again, one WARNING per
interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from enum import StrEnum

from drkit import metrics
from drkit.core.checkpoints import Checkpoint, CommittedOffset, plan_checkpoints
from drkit.core.group_commits import CommitLog, MalformedRecord, RecordKind
from drkit.core.live_checkpoints import CHECKPOINT_TOPIC, CheckpointRecord, GroupChange, LiveState, PendingCommits
from drkit.core.translate import SyncIndex
from drkit.errors import AccessDenied, ClusterError, Refusal
from drkit.translator.context import CheckpointAppender, CommitTail
from drkit.translator.job import TranslatorJob

log = logging.getLogger(__name__)

#: Seconds of reads returning nothing after which the tail counts as caught up whatever its positions say.
CATCH_UP_IDLE_SECONDS = 5.0
#: Seconds between refreshes of the sync indexes the follower translates with.
INDEX_REFRESH_SECONDS = 1.0
#: Seconds a failed tail (a broker error, the source gone) waits before it is opened again.
RETRY_SECONDS = 2.0


_TOMBSTONES = frozenset({RecordKind.OFFSET_TOMBSTONE, RecordKind.GROUP_TOMBSTONE})


class FollowMode(StrEnum):
    """How a flow's checkpoints learn the source's commits."""

    FOLLOWING = "following"  # __consumer_offsets tailed: live checkpoints on the target's checkpoint topic
    ADMIN_API = "admin-api"  # only the interval runs (no follower, or reading the topic is not permitted)


class CheckpointsDenied(AccessDenied):
    """The target refused the checkpoint topic's appends (or its creation) for a missing ACL: every append
    would be refused alike."""


class CommitFollower:
    """Follows one flow's source commits onto its target's checkpoint topic until ``stopped`` is set
    (:meth:`run`)."""

    def __init__(self, job: TranslatorJob, tail: CommitTail, topic: CheckpointAppender) -> None:
        self.job = job
        self.flow = job.flow
        self.tail = tail
        self.topic = topic
        self.log = CommitLog()
        self.pending = PendingCommits(job.groups.matches, job.topics.matches)
        self.state = LiveState(job.flow.name)
        self.interval = job.flow.checkpoint.follow_interval_ms / 1000
        self.mode = FollowMode.FOLLOWING
        #: Per group, its appends not answered yet.
        self.in_flight: dict[str, int] = {}
        self.caught_up = False
        self.idle_since: float | None = None
        self._ensured = False
        self._refused: dict[str, str] = {}
        self._denied: AccessDenied | None = None
        self._indexes: dict[tuple[str, int], SyncIndex] | None = None
        self._indexes_at = 0.0
        #: When the tail caught up: the age of commits made before (read back, not followed) is not measured.
        self.following_since_ms = 0

    def run(self, stopped: threading.Event) -> FollowMode:
        """Follow until ``stopped``; returns the mode it ended in (ADMIN_API when reading was refused)."""
        metrics.CHECKPOINT_FOLLOW_MODE.labels(self.flow.name).set(1)
        next_write = time.monotonic() + self.interval
        try:
            while not stopped.is_set():
                try:
                    self.step(max(0.0, min(self.interval, next_write - time.monotonic())))
                    if time.monotonic() >= next_write:
                        self.flush()
                        next_write = time.monotonic() + self.interval
                except (AccessDenied, MalformedRecord) as exc:  # a record it cannot decode: never a wrong C
                    self.fall_back(exc)
                    return self.mode
                except ClusterError as exc:  # the source or the target gone for now: the tail goes on after
                    metrics.ERRORS.labels(self.flow.name, "checkpoint").inc()
                    log.error("flow %s: following commits: %s", self.flow.name, exc)
                    stopped.wait(RETRY_SECONDS)
            return self.mode
        finally:
            try:
                self.topic.close()
            finally:
                self.tail.close()

    def fall_back(self, exc: Exception) -> None:
        """One WARNING line (never silent); the interval runs go on alone."""
        self.mode = FollowMode.ADMIN_API
        metrics.CHECKPOINT_FOLLOW_MODE.labels(self.flow.name).set(0)
        if isinstance(exc, CheckpointsDenied):
            why = f"cluster {self.flow.target} refused the checkpoint topic {CHECKPOINT_TOPIC} ({exc})"
        else:
            why = f"cannot read __consumer_offsets on cluster {self.flow.source} ({exc})"
        log.warning(
            "flow %s: %s: following commits through the admin API every %s s instead",
            self.flow.name,
            why,
            self.flow.checkpoint.interval_seconds,
        )

    def step(self, timeout: float) -> None:
        """Read what the tail has (waiting up to ``timeout`` s) and fold it in; serve the appends' answers."""
        records = self.tail.read(timeout)
        for record in records:
            # A tombstone of what the fold no longer holds still deletes (the topic may hold it).
            if self.log.apply(record) or record.kind in _TOMBSTONES:
                self.pending.note(record)
        self.serve()
        if not self.caught_up:
            now = time.monotonic()
            self.idle_since = (self.idle_since or now) if not records else None
            # Nothing delivered for a while: a partition holding only what is never delivered (markers,
            # aborted commits) keeps its position below its end; what is delivered was all read.
            idle_long = self.idle_since is not None and now - self.idle_since >= CATCH_UP_IDLE_SECONDS
            self.caught_up = idle_long or self.tail.caught_up(idle=not records)
            if self.caught_up:
                self.following_since_ms = self.job.context.now_ms()

    def flush(self) -> list[CheckpointRecord]:
        """Take the answers that came, then (once caught up) start appending a record per changed group; the
        records started."""
        self.take_answers()
        if not self.caught_up or not len(self.pending):
            return []
        changes = self.pending.drain()
        try:
            self.ensure()
            records = self.plan(changes)
        except BaseException:
            for group, change in changes.items():  # written again, under anything read meanwhile
                self.pending.requeue(group, change)
            raise
        for i, record in enumerate(records):
            try:
                self.topic.append(record.key, record.value, self._answer(record))
            except BaseException as exc:
                for rest in records[i:]:  # the state holds them: appended again, as they are then
                    self.pending.rewrite(rest.group)
                self._lost(exc)
                raise
            self.in_flight[record.group] = self.in_flight.get(record.group, 0) + 1
        self.serve()
        return records

    def serve(self) -> None:
        """Serve the appends' answers; a writer that failed for good leaves its appends unanswered: their groups
        are appended again (a missing ACL: :class:`CheckpointsDenied`)."""
        try:
            self.topic.poll(0)
        except BaseException as exc:
            self._lost(exc)
            raise

    def _lost(self, exc: BaseException) -> None:
        """After ``exc`` from the writer: what it had in flight appended again at the next write; a refusal for a
        missing ACL raised as :class:`CheckpointsDenied` (the follower falls back)."""
        if isinstance(exc, (AccessDenied, ClusterError)):
            for group in self.in_flight:
                self.pending.rewrite(group)
            self.in_flight.clear()
        if isinstance(exc, AccessDenied) and not isinstance(exc, CheckpointsDenied):
            raise CheckpointsDenied(str(exc)) from None

    def ensure(self) -> None:
        """The topic, created once if missing (a creation refused for a missing ACL: :class:`CheckpointsDenied`)."""
        if self._ensured:
            return
        try:
            self.topic.ensure()
        except AccessDenied as exc:
            raise CheckpointsDenied(str(exc)) from None
        self._ensured = True

    def take_answers(self) -> None:
        """Serve the answers that came: a refusal for a missing ACL ends following (:class:`CheckpointsDenied`),
        other refusals are appended again (one WARNING for them all)."""
        self.serve()
        if self._denied is not None:
            raise CheckpointsDenied(str(self._denied))
        if not self._refused:
            return
        first = sorted(self._refused)[0]
        log.warning(
            "flow %s: %d group(s)' live checkpoints not appended (appended again), group %r: %s",
            self.flow.name,
            len(self._refused),
            first,
            self._refused[first],
        )
        self._refused.clear()

    def _answer(self, record: CheckpointRecord) -> Callable[[Refusal | None], None]:
        """What to do with ``record``'s answer: ages observed once appended (from the source commit to the
        answer, never less than the truth), a refused group appended again with its state as it is then."""

        def answered(refusal: Refusal | None) -> None:
            left = self.in_flight.get(record.group, 0) - 1
            if left > 0:
                self.in_flight[record.group] = left
            else:
                self.in_flight.pop(record.group, None)
            if refusal is None:
                answered_ms = self.job.context.now_ms()
                for ts in record.commit_timestamps:
                    if ts >= self.following_since_ms:
                        age = max(0.0, (answered_ms - ts) / 1000)
                        metrics.CHECKPOINT_FOLLOW_AGE.labels(self.flow.name).observe(age)
                return
            self.pending.rewrite(record.group)
            if isinstance(refusal, AccessDenied):
                self._denied = refusal
            else:
                self._refused[record.group] = str(refusal)

        return answered

    def indexes(self) -> dict[tuple[str, int], SyncIndex]:
        """The job's sync indexes, refreshed at most every INDEX_REFRESH_SECONDS (each refresh asks the table for
        its version; failover translates C again with the syncs of its moment)."""
        now = time.monotonic()
        if self._indexes is None or now - self._indexes_at >= INDEX_REFRESH_SECONDS:
            self._indexes, self._indexes_at = self.job.indexes(), now
        return self._indexes

    def plan(self, changes: dict[str, GroupChange]) -> list[CheckpointRecord]:
        """The records of ``changes``: the commits translated exactly as the interval runs translate them."""
        committed: dict[str, list[CommittedOffset]] = {}
        timestamps: dict[tuple[str, str, int], int] = {}
        for group, change in changes.items():
            for (topic, partition), value in change.partitions.items():
                if value is not None:
                    committed.setdefault(group, []).append(CommittedOffset(group, topic, partition, value[0]))
                    timestamps[(group, topic, partition)] = value[1]
        translated: dict[str, list[Checkpoint]] = {}
        if committed:
            topics = {o.topic for offsets in committed.values() for o in offsets}
            topic_map = {t: self.job.policy.target_topic(self.flow.source, t) for t in topics}
            plan = plan_checkpoints(self.flow.name, committed, topic_map, self.indexes(), {})
            for c in plan.current:
                translated.setdefault(c.group, []).append(c)
        return self.state.apply(changes, translated, timestamps)
