"""Exactly-once for the continuous copier: its copies in transactions of the flow's slots, committed as they flow.

The rules are drkit.core.exactly_once's, kept by the same producers the per-batch path uses (the driver's
``SlotProducers``: one initialised transactional producer per slot, shared, so the copier and a batch that
copies its own records never fence each other). Invariants:

* **Commit as records flow.** A slot's transaction opens with the first copy after its last commit and is
  committed ``COMMIT_SECONDS`` later (a commit flushes: every copy in it is acknowledged first), so a
  ``read_committed`` consumer sees a copy tens of milliseconds after it was made; while the copier is behind
  the source, later (drkit.core.exactly_once.transaction_span: a commit holds the copying thread, and a
  backlog would be copied at a fraction of the at-least-once rate). A lane's copies count
  (``Lane.committed``) only once their transaction committed: a batch takes committed copies only.
* **No copy is produced into a transaction being committed.** A commit (its flush, then ``EndTxn``) blocks the
  copying thread up to ``COMMIT_WAIT_SECONDS``; one that timed out is retried (librdkafka resumes it), and
  until it succeeds that slot's records are held back, in read order, while the other slots' records go on.
  A commit that did not block the thread (a flush that returns at once, resumed on each turn) measured worse
  latency in an A/B (docs/performance.md): right after a commit, the held records open the slot's next
  transaction at once, while the coordinator still writes the markers.
* **Fence, then read back, before a lane starts.** A lane starts after the committed copies already on the
  target past the last sync (an earlier process's, or this copier's from a lane it dropped), read with
  ``read_committed`` once every open transaction of the copier committed (a read stops at the first open
  one), as the per-batch path reads back (drkit.mirror.transactions.read_back). The copies of a partition
  are committed in the order they were made, so what is found is always a prefix from the last sync.
* **A failed transaction fails its lanes.** An aborted transaction's copies are invisible to
  ``read_committed`` consumers; its lanes fail, the copier drops everything (aborting every open transaction
  and marking the partitions to be read back), and the batch copies its own records on the per-batch
  exactly-once path, which reads back and keeps what was committed. A fenced producer means another mirror:
  the batch's own copy meets the same fence and the mirror stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drkit import metrics
from drkit.core.exactly_once import Partition, Resume, slot_of, transaction_span
from drkit.core.offsets import BatchRanges
from drkit.mirror.lanes import Lane
from drkit.mirror.producers import describe, is_fenced
from drkit.mirror.transactions import SlotProducers, read_back

log = logging.getLogger(__name__)

#: How long a slot's transaction stays open: the latency a read_committed consumer adds to the copy's own.
COMMIT_SECONDS = 0.05
#: How long one commit call may block the copying thread; a commit that takes longer is resumed later.
COMMIT_WAIT_SECONDS = 1.0
#: The upstream end of a lane's read back: everything committed past the last sync, whatever its origin.
_UNBOUNDED = 2**62


#: Reads back the committed copies of the given ranges past each partition's last sync (``read_copies``).
ReadBack = Callable[[BatchRanges, Mapping[str, str]], Resume]


def target_read_back(
    tails: Callable[[], Mapping[Partition, int]], tail_consumer: Callable[[], Any], source_alias: str, target_alias: str
) -> ReadBack:
    """The read back of a flow's target, with a ``read_committed`` consumer made for each read."""

    def read(ranges: BatchRanges, topic_map: Mapping[str, str]) -> Resume:
        consumer = tail_consumer()
        try:
            found, _ = read_back(consumer, ranges, tails(), topic_map, source_alias, target_alias)
        finally:
            consumer.close()
        return found

    return read


@dataclass
class _Open:
    """A slot's open transaction: its producer, when it began, the lanes with copies in it."""

    producer: Any
    began: float
    lanes: dict[Partition, Lane] = field(default_factory=dict)
    committing: bool = False


class LaneTransactions:
    """The continuous copier's transactions (used by its copying thread only)."""

    def __init__(
        self,
        producers: SlotProducers,
        read: ReadBack,
        target_alias: str,
        commit_seconds: float = COMMIT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        before_commit: Callable[[int], None] = lambda commits: None,
    ) -> None:
        self.producers = producers
        #: called with the commits made so far, once a transaction's copies are acknowledged and before it
        #: commits (a test's fault plan kills the process there: the abort case)
        self._before_commit = before_commit
        self._read = read
        self._target = target_alias
        self.commit_seconds = commit_seconds
        self._clock = clock
        self._conf: dict[str, Any] = {}
        self._open: dict[int, _Open] = {}
        #: transactions committed (for the benchmark and the tests)
        self.commits = 0
        #: the copier is behind the source (set by the copying thread: its last reads filled their chunk)
        self.behind = False
        #: how long the last commit held the copying thread
        self.last_commit = 0.0

    def bind(self, producer_conf: Mapping[str, Any]) -> None:
        """The producer settings the batches ask for (a change makes new slot producers: commit first)."""
        self._conf = dict(producer_conf)

    def producer(self, key: Partition, lane: Lane) -> Any:
        """The producer of ``key``'s slot with its transaction open, or None while that transaction is being
        committed (the record waits)."""
        slot = slot_of(key[0], key[1], self.producers.slots)
        held = self._open.get(slot)
        if held is None:
            producer, _ = self.producers.producer(slot, self._conf)
            producer.begin_transaction()
            held = self._open[slot] = _Open(producer, self._clock())
        elif held.committing:
            return None
        held.lanes[key] = lane
        return held.producer

    def poll(self) -> None:
        """Serve the delivery reports of the open transactions."""
        for held in self._open.values():
            held.producer.poll(0)

    def commit_due(self, force: bool = False) -> bool:
        """Once a transaction was open for its span (``commit_seconds`` while the copier keeps up), or with
        ``force``, commit every open one; False when one could not be committed yet (a commit that timed out is
        resumed on the next call). The slots commit at once, each on a thread of its own (each slot is its own
        transactional producer; the calls wait on the network, outside the GIL), so the copying thread waits
        for the slowest commit, not for their sum; it alone changes the transactions' state, once every call
        returned."""
        now = self._clock()
        span = transaction_span(self.commit_seconds, self.last_commit, self.behind)
        if not any(force or held.committing or now - held.began >= span for held in self._open.values()):
            return True
        # One due, all committed: the commits run at once and the copying thread waits for the slowest, so the
        # others cost it almost nothing now, where each on its own turn would hold it again.
        due = sorted(self._open.items())
        for _, held in due:
            held.committing = True
        errors = self._end_all([held for _, held in due])
        self.last_commit = self._clock() - now
        metrics.MIRROR_TRANSACTION_COMMIT_SECONDS.labels(self.producers.flow).observe(self.last_commit)
        done = True
        for (slot, held), error in zip(due, errors, strict=True):
            done = self._settle(slot, held, error) and done
        return done

    def _end_all(self, due: list[_Open]) -> list[Exception | None]:
        """Each transaction's commit call: None when it committed, else what it raised."""
        if len(due) <= 1:
            return [self._end(held) for held in due]
        errors: list[Exception | None] = [None] * len(due)
        raised: list[BaseException] = []  # anything else a call raised is the copying thread's to raise

        def end(n: int) -> None:
            try:
                errors[n] = self._end(due[n])
            except BaseException as exc:
                raised.append(exc)

        threads = [threading.Thread(target=end, args=(n,), name="drkit-commit", daemon=True) for n in range(len(due))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if raised:
            raise raised[0]
        return errors

    def _end(self, held: _Open) -> Exception | None:
        from confluent_kafka import KafkaException

        try:
            if not held.producer.flush(COMMIT_WAIT_SECONDS):
                self._before_commit(self.commits)
            held.producer.commit_transaction(COMMIT_WAIT_SECONDS)
        except KafkaException as exc:
            return exc
        return None

    def _settle(self, slot: int, held: _Open, error: Exception | None) -> bool:
        """A commit call's outcome: committed, to be resumed (False), or the transaction failed."""
        if error is not None:
            err = error.args[0]
            if not is_fenced(err) and err.retriable() and not err.txn_requires_abort():
                return False  # resumed by the next call; the slot's records wait meanwhile
            self._fail(slot, held, f"the transaction of slot {slot} failed on {self._target}: {describe(err)}")
            return True
        for lane in held.lanes.values():
            lane.committed = len(lane.ups)  # a commit flushes: every copy in it was acknowledged
        del self._open[slot]
        self.commits += 1
        return True

    def _fail(self, slot: int, held: _Open, reason: str) -> None:
        """The transaction's copies are not committed: abort them (unless fenced) and fail their lanes."""
        del self._open[slot]
        for lane in held.lanes.values():
            lane.failure = lane.failure or reason
        self._abort(held)

    def _abort(self, held: _Open) -> None:
        from confluent_kafka import KafkaException

        try:
            held.producer.abort_transaction(COMMIT_WAIT_SECONDS)
        except KafkaException as exc:  # the next initialisation of the slot's id aborts it: forget the producers
            log.warning("exactly-once: a transaction on %s could not be aborted: %s", self._target, exc)
            self.producers.drop()

    def release(self, keys: set[Partition]) -> None:
        """Before the lanes of ``keys`` are dropped (and the batch may copy its own records with the same
        producers): abort every open transaction, and have those partitions read back before they are copied
        again (their committed copies no batch took are on the target)."""
        for slot in sorted(self._open):
            self._abort(self._open.pop(slot))
        self.unread(keys)

    def unread(self, keys: set[Partition]) -> None:
        self.producers.mark_unread(keys)

    def seed(self, starts: Mapping[Partition, Lane], topic_map: Mapping[str, str]) -> int:
        """Start new lanes after the committed copies on the target past each partition's last sync (only the
        partitions their producer has not read back since it was initialised); how many copies were kept.
        Every open transaction must have been committed first."""
        wanted = self.producers.unread({key: (lane.base, _UNBOUNDED) for key, lane in starts.items()}, self._conf)
        if not wanted:
            return 0
        found = self._read(wanted, topic_map)
        self.producers.mark_read(found, wanted)
        for key, pairs in found.found.items():
            starts[key].seed(pairs)
        return sum(len(pairs) for pairs in found.found.values())
