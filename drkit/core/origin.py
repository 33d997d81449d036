"""Where a mirrored record came from, carried by the record itself, and the exact answer it gives.

Every record the mirror produces carries the header ``drkit.origin`` = ``<source alias>:<upstream
offset>`` (ASCII). The partition number is the same on both sides and the topic follows from the
flow's policy, so the two fields name the record's original exactly. A record mirrored across two
hops carries one header per hop, in hop order: the last one names the hop that wrote it.

Why it is needed: offset-syncs are written only after every task of a batch succeeded, so the
records a batch delivered before it failed (its source killed mid-batch, say) sit on the target past
the synced end with no sync. A committed offset ``C`` past the synced end translates, from the syncs
alone, to the synced end: the group would re-read those unsynced copies of records it had processed.
Read from the target instead, the unsynced tail answers exactly:

* the group resumes at the first tail record whose origin is at or after ``C`` (every tail record
  before it is a copy of a record before ``C``, so nothing is skipped and nothing re-read);
* a tail record without an origin of the flow's source (produced there by something else, or by a
  drkit before the header) cannot be placed: the group resumes at it (re-reads possible, no loss);
* a tail of records all before ``C`` puts the group where the reading ended: still provisional, as
  past the end of the syncs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from drkit.core.mirror_lease import EPOCH_HEADER
from drkit.core.translate import Position, SyncIndex, Translation

#: The header every mirrored record carries (value: ``<source alias>:<upstream offset>``).
ORIGIN_HEADER = "drkit.origin"

#: At most this many tail records are read per partition; the answer never goes past what was read.
TAIL_READ_LIMIT = 500_000


def origin_overhead(alias: str) -> int:
    """At most how many bytes the mirror's headers add to a record batch: the origin header's key and value
    (the largest offset has 19 digits) and the epoch header's (drkit.core.mirror_lease), their varint lengths,
    and growth of the record's own length varints (5 bytes each at most: generous, never short)."""
    return len(ORIGIN_HEADER) + len(origin_prefix(alias)) + 19 + 4 * 5 + len(EPOCH_HEADER) + 19 + 2 * 5


def origin_prefix(alias: str) -> bytes:
    """The constant part of a flow's header values; the mirror appends the upstream offset in ASCII."""
    return f"{alias}:".encode()


def origin_of(headers: Sequence[tuple[str, bytes | str | None]] | None, alias: str) -> int | None:
    """The upstream offset on cluster ``alias`` that the record copies, from its last origin header;
    None when it has none, or the last hop's source was another cluster."""
    value: bytes | str | None = None
    for key, v in headers or ():
        if key == ORIGIN_HEADER:
            value = v
    if value is None:
        return None
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    source, sep, offset = text.rpartition(":")
    if not sep or source != alias or not offset.isdigit():
        return None
    return int(offset)


def has_been_on(headers: Sequence[tuple[str, bytes | str | None]], alias: str) -> bool:
    """Whether a record was on cluster ``alias`` before: one of its origin headers (one per hop) names it.

    The mirror never copies such a record to ``alias``: that is what keeps flows both ways (and rings of
    flows) with the identity policy from copying records around forever. Aliases hold no ':' (config), so
    the header's text up to its ':' is the alias exactly."""
    wanted = origin_prefix(alias)
    for key, value in headers:
        if key != ORIGIN_HEADER or value is None:
            continue
        raw = value if isinstance(value, bytes) else value.encode("ascii", "replace")
        if raw.startswith(wanted):
            return True
    return False


@dataclass(frozen=True)
class TailRecord:
    downstream: int
    upstream: int | None  # None: no origin of the flow's source


@dataclass(frozen=True)
class TargetTail:
    """The records of a target partition from ``start`` (the synced end) up to ``end`` (exclusive):
    the partition's end when it was read, or where the read limit stopped."""

    start: int
    end: int
    records: tuple[TailRecord, ...]


def tail_reads(
    committed: Iterable[tuple[tuple[str, int], int]], indexes: Mapping[tuple[str, int], SyncIndex]
) -> dict[tuple[str, int], int]:
    """(source topic, partition) -> the synced end, for each committed offset past it: where a tail
    can change the answer. Several offsets of one partition need one read."""
    out: dict[tuple[str, int], int] = {}
    for key, offset in committed:
        index = indexes.get(key)
        if index is None:
            continue
        t = index.translate(offset)
        if t.position is Position.PAST_END and t.offset is not None:
            out[key] = t.offset
    return out


def tail_spans(
    starts: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], tuple[int, int]]:
    """[synced end, target end) of each partition whose target holds records past the synced end."""
    return {key: (start, ends[key]) for key, start in starts.items() if ends.get(key, start) > start}


def copied_through(tail: TargetTail) -> int | None:
    """One past the greatest source offset a tail's records copy (None: none names the flow's source).

    The mirror copies a partition in offset order, so nothing past that offset is on the target: the
    source's offsets from there on are unmirrored, whatever the syncs say. (A copy made ahead of its
    batch's syncs, by the continuous copy or a batch that failed, is on the target: not a loss.)"""
    upstream = [r.upstream for r in tail.records if r.upstream is not None]
    return max(upstream) + 1 if upstream else None


def copied_below(tail: TargetTail, committed: int) -> int | None:
    """One past the greatest source offset copied by the tail's records below ``committed`` on the copy
    (None: none names the flow's source). A group at ``committed`` on the copy processed those records, and
    the mirror copies in offset order: every original below that offset reached the copy before them."""
    upstream = [r.upstream for r in tail.records if r.upstream is not None and r.downstream < committed]
    return max(upstream) + 1 if upstream else None


def resolve_tail_back(translation: Translation, through: int | None) -> Translation:
    """The inverse answer (failback) for a group past the synced end on the copy, made exact by the copies
    it read there (``through``: :func:`copied_below`): it resumes on the original after the last of them,
    not at the synced end, which would read them again."""
    if translation.position is not Position.PAST_END or through is None:
        return translation
    if translation.offset is not None and through <= translation.offset:
        return translation
    return Translation(through, Position.UNSYNCED)


def resolve_tail(committed: int, translation: Translation, tail: TargetTail | None) -> Translation:
    """The syncs' answer, made exact by the unsynced tail where it was past their end."""
    if translation.position is not Position.PAST_END or tail is None or tail.start != translation.offset:
        return translation
    for record in tail.records:
        if record.upstream is None:
            return Translation(record.downstream, Position.UNKNOWN_ORIGIN)
        if record.upstream >= committed:
            return Translation(record.downstream, Position.UNSYNCED)
    return Translation(max(tail.start, tail.end), Position.PAST_END)
