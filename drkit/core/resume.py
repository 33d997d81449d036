"""Where a group resumes on the origin of a failback, and what that rests on.

Pure. Failback never re-reads on the origin what the group is known to have processed there (its last
checkpoint, the offset it still holds there) unless its position on the copy was set back before that
point: then it follows the group (the plan warns). Every answer names its basis, so the plan can say
why a group lands where it does.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from drkit.core.translate import UNMIRRORED, SyncIndex, Translation


class Basis(StrEnum):
    """What a move's new offset rests on."""

    TRANSLATION = "translation"  # the offset-syncs (failover; failback through either flow)
    CHECKPOINT = "checkpoint"  # failback: the group's last checkpoint on the origin (what it processed there)
    ORIGIN_OFFSET = "origin_offset"  # failback: the offset the group still holds on the origin


_KNOWN_FROM = {Basis.CHECKPOINT: "its last checkpoint", Basis.ORIGIN_OFFSET: "the offset it holds there"}


@dataclass(frozen=True)
class Processed:
    """What a group is known to have processed on the origin of a failback, and how that is known."""

    offset: int
    basis: Basis  # CHECKPOINT or ORIGIN_OFFSET

    @property
    def known_from(self) -> str:
        """Where the offset came from, as the plan's warnings say it."""
        return _KNOWN_FROM[self.basis]


def known_processed(checkpointed: int | None, held: int | None) -> Processed | None:
    """The greater of the group's last checkpoint on the origin and the offset it still holds there
    (the held offset on a tie: it is the origin's own word); None when neither is known."""
    if held is not None and (checkpointed is None or held >= checkpointed):
        return Processed(held, Basis.ORIGIN_OFFSET)
    if checkpointed is not None:
        return Processed(checkpointed, Basis.CHECKPOINT)
    return None


def translate_back(committed: int, index: SyncIndex | None, known: Processed | None) -> tuple[Translation, Basis]:
    """Where a group at ``committed`` on a copy resumes on the original partition (failback).

    Inside the mirrored range the inverse translation is exact. At or after its end it is
    provisional: records the group processed on the origin beyond what was mirrored never reached
    the copy, so the inverse would read them again. The group therefore resumes at
    max(inverse, ``known``) as long as its position on the copy is at or after where ``known`` lands
    there (it did not go back past that point); a group rewound on the copy before that point is
    followed (the plan warns). With nothing of the partition mirrored (syncs are never deleted) the
    copy holds nothing of the origin, so ``known`` is the answer where it is known.
    """
    inverse = index.inverse(committed) if index is not None else UNMIRRORED
    if known is None:
        return inverse, Basis.TRANSLATION
    reached = index.translate(known.offset) if index is not None else UNMIRRORED
    if reached.offset is not None and committed < reached.offset:
        return inverse, Basis.TRANSLATION  # set back on the copy before what it had processed: follow it
    if inverse.offset is not None and inverse.offset >= known.offset:
        return inverse, Basis.TRANSLATION
    return Translation(known.offset, inverse.position), known.basis
