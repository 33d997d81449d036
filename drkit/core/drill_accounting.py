"""Every acknowledged record of a drill's workload accounted for, record by record.

The drill's producer writes per-key sequence numbers; the source consumer records what the group
processed (only what it committed); after failover the target consumer records what the group read
there. Each acknowledged record ends in exactly one of these classes:

* **processed on the source** (committed there before the disaster);
* **not mirrored** (acknowledged by the source, never on the target): the RPO, a property of
  asynchronous replication and measured against the drill's budget, not a drkit loss;
* **read on the target** after failover;
* **lost**: on the target, never processed on the source and never read there. A failover that skips
  records does this. Must be 0;
* **not resumed**: the same, when the group never resumed on the target (the failover was refused):
  nothing was skipped, the drill failed for that reason;
* **read after failback**: with a failback leg, the records the group read on the source once it was
  moved back. The source keeps every record it acknowledged (a killed or partitioned broker comes back
  with its log), so after a failback every acknowledged record must have been processed somewhere: the
  unmirrored ones (the RPO) are read there, and one never read anywhere is **lost**.

Every time past the first that the group processed a record, on one cluster or across them, is a
**re-delivery** (a failover placed the group before it, or a consumer read it again before its commit):
the facts are counted record by record, repeats kept, never collapsed to sets. A key whose records the
group saw out of sequence was reordered. Pure: the runner gathers the facts, the copies on the target by
its own read of the target topic, which must reach the end offsets fetched before it (a read that fell
short is a shortfall, an error, not a count). The verdict is drkit.core.drill's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

Key = tuple[str, int]  # (record key, sequence number)


@dataclass(frozen=True)
class Sent:
    key: str
    seq: int
    at_ms: int  # when the source acknowledged it
    #: Where the source's delivery report placed it (None: not known, as in hand-made accounts).
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class Accounting:
    acked: int
    processed_on_source: int
    not_mirrored: int
    read_on_target: int
    lost: int
    redelivered: int
    not_resumed: int
    out_of_order_keys: int
    corrupt: int
    lost_examples: tuple[Key, ...] = ()
    redelivered_examples: tuple[Key, ...] = ()
    oldest_unmirrored_ms: int | None = None
    read_after_failback: int = 0
    failed_back: bool = False
    #: Acknowledged records the target holds more than once, beyond the first copy (the mirror's
    #: re-copies): not judged by themselves; a copy the group reads twice is a re-delivery.
    extra_copies_on_target: int = 0
    #: Acknowledged records the group read on the target of which the drill's own read of the target found
    #: no copy: that read fell short, so every figure built on it (not mirrored, RPO) is wrong.
    read_without_copy: int = 0
    read_without_copy_examples: tuple[Key, ...] = ()


@dataclass(frozen=True)
class RecordTrace:
    """One acknowledged record, and how many times each place held or processed it (``records.json``)."""

    key: str
    seq: int
    partition: int | None
    offset: int | None
    processed_on_source: int
    copies_on_target: int
    read_on_target: int
    read_after_failback: int

    @property
    def ident(self) -> Key:
        return self.key, self.seq

    @property
    def processed(self) -> int:
        """How many times the group processed it, anywhere."""
        return self.processed_on_source + self.read_on_target + self.read_after_failback


def traces(
    acked: Iterable[Sent],
    processed: Sequence[Key],
    mirrored: Iterable[Key],
    read_on_target: Sequence[Key],
    read_after_failback: Sequence[Key] | None = None,
) -> tuple[RecordTrace, ...]:
    """Every acknowledged record in acknowledgement order, each place counted record by record (a record
    seen twice counts 2). An identity acknowledged twice is refused: the producer's sequence numbers make
    each one unique, so a repeat means the facts are wrong, and a count built on them would be too."""
    sent = list(acked)
    repeated = [k for k, n in Counter((s.key, s.seq) for s in sent).items() if n > 1]
    if repeated:
        raise ValueError(f"records acknowledged more than once: {sorted(repeated)[:5]}")
    done, copies = Counter(processed), Counter(mirrored)
    read, back = Counter(read_on_target), Counter(read_after_failback or ())
    return tuple(
        RecordTrace(s.key, s.seq, s.partition, s.offset, done[k], copies[k], read[k], back[k])
        for s in sent
        for k in [(s.key, s.seq)]
    )


def account(
    acked: Iterable[Sent],
    processed: Sequence[Key],
    mirrored: Iterable[Key],
    read_on_target: Sequence[Key],
    corrupt: int = 0,
    resumed: bool = True,
    read_after_failback: Sequence[Key] | None = None,
) -> Accounting:
    """Classify every acknowledged record (see the module docstring); sequences keep the order seen and
    their repeats: a record processed twice, wherever, is a re-delivery counted once per extra time.
    ``resumed`` False: the group never resumed on the target. ``read_after_failback`` None: no failback
    leg ran (not asked for, or refused)."""
    sent = list(acked)
    at = {(s.key, s.seq): s.at_ms for s in sent}
    rows = traces(sent, processed, mirrored, read_on_target, read_after_failback)
    unmirrored = [r for r in rows if r.copies_on_target == 0 and r.processed_on_source == 0]
    if read_after_failback is None:
        unread = [r for r in rows if r.copies_on_target and not r.processed_on_source and not r.read_on_target]
    else:
        unread = [r for r in rows if r.processed == 0]
    lost = sorted(r.ident for r in unread) if resumed else []
    # Every record of the run the group processed, acknowledged or not (a record whose acknowledgement
    # was lost with the source can still be read twice).
    seen = Counter(processed) + Counter(read_on_target) + Counter(read_after_failback or ())
    redelivered = sorted(k for k, n in seen.items() if n > 1)
    uncounted = sorted(r.ident for r in rows if r.read_on_target and not r.copies_on_target)
    return Accounting(
        acked=len(rows),
        processed_on_source=sum(1 for r in rows if r.processed_on_source),
        not_mirrored=len(unmirrored),
        read_on_target=sum(1 for r in rows if r.read_on_target),
        lost=len(lost),
        not_resumed=0 if resumed else len(unread),
        redelivered=sum(n - 1 for n in seen.values() if n > 1),
        out_of_order_keys=len(_out_of_order([*processed, *read_on_target, *(read_after_failback or ())])),
        corrupt=corrupt,
        lost_examples=tuple(lost[:5]),
        redelivered_examples=tuple(redelivered[:5]),
        oldest_unmirrored_ms=min((at[r.ident] for r in unmirrored), default=None),
        read_after_failback=sum(1 for r in rows if r.read_after_failback),
        failed_back=read_after_failback is not None,
        extra_copies_on_target=sum(r.copies_on_target - 1 for r in rows if r.copies_on_target > 1),
        read_without_copy=len(uncounted),
        read_without_copy_examples=tuple(uncounted[:5]),
    )


def _out_of_order(seen: Sequence[Key]) -> set[str]:
    """Keys with a sequence number below one already seen and not itself seen before (a record seen
    again is a re-delivery, counted as such, not a reordering)."""
    top: dict[str, int] = {}
    before: set[Key] = set()
    bad: set[str] = set()
    for key, seq in seen:
        if key in top and seq < top[key] and (key, seq) not in before:
            bad.add(key)
        top[key] = max(seq, top.get(key, seq))
        before.add((key, seq))
    return bad


def accounting_dict(a: Accounting) -> dict[str, Any]:
    d = asdict(a)
    d["lost_examples"] = [list(k) for k in a.lost_examples]
    d["redelivered_examples"] = [list(k) for k in a.redelivered_examples]
    d["read_without_copy_examples"] = [list(k) for k in a.read_without_copy_examples]
    return d


def rpo(accounting: Accounting, disaster_ms: int) -> dict[str, float | int | None]:
    """RPO as measured by the drill: records not mirrored, and the age of the oldest at the disaster."""
    oldest = accounting.oldest_unmirrored_ms
    return {
        "rpo_records": accounting.not_mirrored,
        "rpo_seconds": 0.0 if oldest is None else round(max(0, disaster_ms - oldest) / 1000, 3),
    }


@dataclass(frozen=True)
class Shortfall:
    """A partition a read did not take to the end offset fetched before it started."""

    partition: int
    reached: int  # the next offset the read would have returned
    end: int


def shortfalls(ends: Mapping[int, int], reached: Mapping[int, int]) -> tuple[Shortfall, ...]:
    """The partitions whose read stopped short of its end (``reached`` missing: nothing was read)."""
    return tuple(Shortfall(p, reached.get(p, 0), end) for p, end in sorted(ends.items()) if reached.get(p, 0) < end)


def shortfall_detail(topic: str, alias: str, short: Sequence[Shortfall], seconds: float) -> str:
    """One line: which partitions of which topic on which cluster were not read to their end."""
    missing = sum(s.end - s.reached for s in short)
    parts = ", ".join(f"{s.partition} at {s.reached} of {s.end}" for s in short[:5])
    more = f" and {len(short) - 5} more" if len(short) > 5 else ""
    return (
        f"the drill could not read {topic} on cluster {alias} to its end offsets within {seconds:.0f}s: "
        f"{missing} offsets unread (partition {parts}{more}); the drill cannot count the copies"
    )
