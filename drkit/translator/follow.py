"""The commit follower of one flow: the source's group commits, as they are made, into the target's shadow groups.

It tails the source's ``__consumer_offsets`` (drkit.kafka.consumer_offsets, through the context), folds every
record in log order (drkit.core.group_commits), keeps the selected groups' and topics' changes coalesced per
group and partition (drkit.core.live_checkpoints.PendingCommits) and, every ``follow_interval_ms``, translates
them with the job's cached sync indexes (drkit.core.checkpoints.plan_checkpoints, the translator's own
translation) and starts committing them to the shadow groups: one request per changed group, all in flight at
once, never waited for: the tail goes on being read while the target answers, and each answer is taken at the
next interval (a group whose write is in flight keeps its newer changes pending until it is answered).

Write rate, bounded: the target gets at most one OffsetCommit per changed group per follow interval (a group
committing a thousand times in between is written once, with its newest offsets), and at most one in flight
per group, plus one DeleteGroups of the groups deleted meanwhile; the ``checkpoints`` Delta table is not
written here at all (the job's interval runs still commit to it at most once per ``interval_seconds``).

Log order, never offsets, decides what a shadow group holds: nothing is written before the tail has read
every partition up to its end as of its start (until then the fold may hold an older commit than one a
previous follower wrote), a group's write is issued only after its previous one was answered (so two never
race), and a failed group's change is put back under anything newer. A principal that may not read
``__consumer_offsets``, or whose shadow group writes the target refuses for a missing ACL, gets one WARNING
naming the cluster and the admin API fallback; the flow's interval runs then continue alone
(``drkit_checkpoint_follow_mode`` 0). Other refusals (a coordinator moving) are retried, one WARNING per flush.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from enum import StrEnum

from drkit import metrics
from drkit.core.checkpoints import Checkpoint, CommittedOffset, plan_checkpoints
from drkit.core.group_commits import CommitLog, MalformedRecord, RecordKind
from drkit.core.live_checkpoints import GroupChange, PendingCommits, ShadowWrite, shadow_group, shadow_write
from drkit.core.translate import SyncIndex
from drkit.errors import AccessDenied, ClusterError, Refusal
from drkit.translator.context import CommitTail, ShadowGroups
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

    FOLLOWING = "following"  # __consumer_offsets tailed: live checkpoints in the shadow groups
    ADMIN_API = "admin-api"  # only the interval runs (no follower, or reading the topic is not permitted)


class ShadowsDenied(AccessDenied):
    """The target refused a shadow group's write for a missing ACL: every write would be refused alike."""


@dataclass(frozen=True)
class InFlight:
    """One group's shadow write not answered yet: its change (put back if refused) and its source commit times."""

    change: GroupChange
    stamps: tuple[int, ...]
    answer: Future[Refusal | None]


class CommitFollower:
    """Follows one flow's source commits into its shadow groups until ``stopped`` is set (:meth:`run`)."""

    def __init__(self, job: TranslatorJob, tail: CommitTail, shadows: ShadowGroups) -> None:
        self.job = job
        self.flow = job.flow
        self.tail = tail
        self.shadows = shadows
        self.log = CommitLog()
        self.pending = PendingCommits(job.groups.matches, job.topics.matches)
        self.interval = job.flow.checkpoint.follow_interval_ms / 1000
        self.mode = FollowMode.FOLLOWING
        self.writes = 0
        #: Per source group, its write in flight (answered or not: taken at the next flush).
        self.in_flight: dict[str, InFlight] = {}
        self.caught_up = False
        self.idle_since: float | None = None
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
            self.tail.close()

    def fall_back(self, exc: Exception) -> None:
        """One WARNING line (never silent); the interval runs go on alone."""
        self.mode = FollowMode.ADMIN_API
        metrics.CHECKPOINT_FOLLOW_MODE.labels(self.flow.name).set(0)
        if isinstance(exc, ShadowsDenied):
            why = f"cluster {self.flow.target} refused the shadow groups' writes ({exc})"
        else:
            why = f"cannot read __consumer_offsets on cluster {self.flow.source} ({exc})"
        log.warning(
            "flow %s: %s: following commits through the admin API every %s s instead",
            self.flow.name,
            why,
            self.flow.checkpoint.interval_seconds,
        )

    def step(self, timeout: float) -> None:
        """Read what the tail has (waiting up to ``timeout`` s) and fold it in."""
        records = self.tail.read(timeout)
        for record in records:
            # A tombstone of what the fold no longer holds still deletes (its shadow may hold it).
            if self.log.apply(record) or record.kind in _TOMBSTONES:
                self.pending.note(record)
        if not self.caught_up:
            now = time.monotonic()
            self.idle_since = (self.idle_since or now) if not records else None
            # Nothing delivered for a while: a partition holding only what is never delivered (markers,
            # aborted commits) keeps its position below its end; what is delivered was all read.
            idle_long = self.idle_since is not None and now - self.idle_since >= CATCH_UP_IDLE_SECONDS
            self.caught_up = idle_long or self.tail.caught_up(idle=not records)
            if self.caught_up:
                self.following_since_ms = self.job.context.now_ms()

    def flush(self) -> ShadowWrite | None:
        """Take the answers of the writes in flight, then start writing the pending changes of the groups with
        none in flight (once caught up); what was started, or None."""
        self.take_answers()
        if not self.caught_up or not len(self.pending):
            return None
        changes = self.pending.drain(skip=self.in_flight)
        if not changes:
            return None
        try:
            write = self.plan(changes)
            refused = self.shadows.delete_groups(write.deletes) if write.deletes else {}
            started = self.shadows.commit_with_metadata_started(write.commits) if write.commits else {}
        except BaseException:
            for group, change in changes.items():  # written again, under anything read meanwhile
                self.pending.requeue(group, change)
            raise
        by_name = {shadow_group(self.flow.name, g): g for g in changes}
        for name, answer in started.items():
            group = by_name[name]
            self.in_flight[group] = InFlight(changes[group], write.commit_timestamps.get(name, ()), answer)
        self._refused({by_name[name]: reason for name, reason in refused.items() if name in by_name}, changes)
        self.writes += 1
        return write

    def take_answers(self) -> None:
        """The answered writes: a committed one's checkpoint ages observed (from the source commit to now, never
        less than the truth), a refused one's change put back under anything newer."""
        done = [g for g, w in self.in_flight.items() if w.answer.done()]
        if not done:
            return
        answered_ms = self.job.context.now_ms()
        refused: dict[str, str] = {}
        changes: dict[str, GroupChange] = {}
        for group in done:
            w = self.in_flight.pop(group)
            reason = w.answer.result()
            if isinstance(reason, AccessDenied):
                raise ShadowsDenied(str(reason))
            if reason is not None:
                refused[group], changes[group] = str(reason), w.change
                continue
            for ts in w.stamps:
                if ts >= self.following_since_ms:
                    metrics.CHECKPOINT_FOLLOW_AGE.labels(self.flow.name).observe(max(0.0, (answered_ms - ts) / 1000))
        self._refused(refused, changes)

    def _refused(self, refused: dict[str, str], changes: dict[str, GroupChange]) -> None:
        """One WARNING per flush for the groups the target refused (the first reason named); each retried."""
        if not refused:
            return
        first = sorted(refused)[0]
        log.warning(
            "flow %s: %d shadow group(s) not written (retried), %s: %s",
            self.flow.name,
            len(refused),
            shadow_group(self.flow.name, first),
            refused[first],
        )
        for group in refused:
            self.pending.requeue(group, changes[group])

    def indexes(self) -> dict[tuple[str, int], SyncIndex]:
        """The job's sync indexes, refreshed at most every INDEX_REFRESH_SECONDS (each refresh asks the table for
        its version; failover translates C again with the syncs of its moment)."""
        now = time.monotonic()
        if self._indexes is None or now - self._indexes_at >= INDEX_REFRESH_SECONDS:
            self._indexes, self._indexes_at = self.job.indexes(), now
        return self._indexes

    def plan(self, changes: dict[str, GroupChange]) -> ShadowWrite:
        """The writes of ``changes``: the commits translated exactly as the interval runs translate them."""
        committed: dict[str, list[CommittedOffset]] = {}
        timestamps: dict[tuple[str, str, int], int] = {}
        for group, change in changes.items():
            for (topic, partition), value in change.partitions.items():
                if value is not None:
                    committed.setdefault(group, []).append(CommittedOffset(group, topic, partition, value[0]))
                    timestamps[(group, topic, partition)] = value[1]
        topics = {t for offsets in committed.values() for t in (o.topic for o in offsets)}
        topics |= {t for ch in changes.values() for t, _ in ch.partitions}
        topic_map = {t: self.job.policy.target_topic(self.flow.source, t) for t in topics}
        translated: dict[str, list[Checkpoint]] = {}
        if committed:
            plan = plan_checkpoints(self.flow.name, committed, topic_map, self.indexes(), {})
            for c in plan.current:
                translated.setdefault(c.group, []).append(c)
        return shadow_write(self.flow.name, changes, translated, timestamps, topic_map)
