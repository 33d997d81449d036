"""What a running mirror does when a batch fails while a cluster may be gone: wait for it, retry, or stop.

Invariant: a continuous mirror never stops because its source or its target does not answer; it waits,
probing with a bounded backoff, and copies the failed batch again once the cluster answers (Spark never
committed it, so nothing is lost; what the failed attempt delivered exists twice on the target, as after
any failed batch). It stops only on a failure with both clusters answering, after a few quick retries
of one that looks like a lost connection (the cluster may have come back between the failure and the
probe). A one-shot run (``--once``) never waits: it stops with one line (exit 4) and a restart resumes.
Pure: the adapters probe the clusters and classify the error's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class OutageAction(StrEnum):
    """What to do with a batch that failed."""

    FAIL = "fail"  # stop the mirror with the failure's own line
    WAIT_FOR_SOURCE = "wait for source"
    WAIT_FOR_TARGET = "wait for target"
    RETRY = "retry"  # both answer now: a connection lost for a moment; copy the batch again at once


#: Retries at once, in a row, of a batch whose failure looks like a lost connection while both clusters
#: answer: beyond them it is a failure of its own (a timeout that is not an outage) and the mirror stops.
QUICK_RETRIES = 3

#: Backoff between probes of a cluster that does not answer: doubling from the first, up to the ceiling.
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_CEILING_SECONDS = 30.0


@dataclass(frozen=True)
class FailedBatch:
    """A failed attempt at a batch, as the mirror sees it right after the failure."""

    once: bool  # a one-shot run (--once): never waits
    source_answers: bool
    target_answers: bool
    looks_like_outage: bool  # the error is a timeout, a lost connection or an unreadable source
    quick_retries: int  # retries already made at once for this batch (both clusters answering)


def outage_action(failed: FailedBatch) -> OutageAction:
    """Wait for a cluster that does not answer (source first: nothing can be copied without it), retry a
    lost connection a few times, stop on anything else."""
    if failed.once:
        return OutageAction.FAIL
    if not failed.source_answers:
        return OutageAction.WAIT_FOR_SOURCE
    if not failed.target_answers:
        return OutageAction.WAIT_FOR_TARGET
    if failed.looks_like_outage and failed.quick_retries < QUICK_RETRIES:
        return OutageAction.RETRY
    return OutageAction.FAIL


def backoff_seconds(attempt: int) -> float:
    """Seconds before probe ``attempt`` (0-based) of a cluster that does not answer: bounded."""
    return min(BACKOFF_CEILING_SECONDS, BACKOFF_FIRST_SECONDS * float(2 ** min(attempt, 16)))
