"""How a failed batch or a stopped mirror query is told to the operator, and which exit it gets.

Invariant: pure functions of the error's text and the flow's config; a refusal by a cluster is its access-denied
line (exit 4), a source that cannot be read is a ``ClusterError`` naming the source and what to do (exit 4),
anything else the mirror's own failure (exit 5); a delivery failure (``FAILURE_MARKER``) is never taken for an
unreachable source.
"""

from __future__ import annotations

import re

from drkit.config import FlowConfig
from drkit.errors import ClusterError, DrkitError, MirrorError
from drkit.mirror.producers import FAILURE_MARKER, FENCED_MARKER, Fenced
from drkit.mirror.reader import ReadFailed, RecordsRemoved, SourceStalled

#: Kafka client errors that mean the source cannot be read (broker down, unreachable, or not answering).
_SOURCE_READ_FAILURE = re.compile(
    r"(Timeout of \d+ms expired before the position for partition"
    r"|Timed out waiting for a node assignment"
    r"|TimeoutException: Timeout of \d+ms expired"
    r"|Cannot fetch record for offset"
    r"|KafkaConsumer.*Connection refused"
    r"|Failed to get records for .* after polling)"
)


#: Failures that look like a lost connection rather than a refusal: timeouts, a transport down, a source
#: that cannot be read (drkit.core.outage retries them a few times even when both clusters answer).
_OUTAGE = re.compile(
    r"(Message timed out|_MSG_TIMED_OUT|_TIMED_OUT|_TRANSPORT|_ALL_BROKERS_DOWN|REQUEST_TIMED_OUT"
    r"|not acknowledged by the target|TimeoutException|timed out|unreachable|cannot be read|Connection refused)",
    re.IGNORECASE,
)


def looks_like_outage(text: str) -> bool:
    return bool(_OUTAGE.search(text) or _SOURCE_READ_FAILURE.search(text))


def _cause(text: str) -> str:
    """The Kafka client's own words: the first line that matches a source read failure."""
    for line in text.splitlines():
        match = _SOURCE_READ_FAILURE.search(line)
        if match:
            return (
                line[line.rfind("Exception: ", 0, match.start()) + len("Exception: ") :].strip()[:300]
                if "Exception: " in line[: match.start()]
                else line.strip()[:300]
            )
    return text.splitlines()[0][:300] if text else ""


def source_unreachable(flow: FlowConfig, bootstrap: str, cause: str) -> str:
    return (
        f"source cluster {flow.source} ({bootstrap}) cannot be read: {cause}. If {flow.source} is down or "
        f"unreachable from this host, restore it and restart the mirror (it resumes where it stopped); "
        f"if {flow.source} is lost, fail the groups over: drkit failover --flow '{flow.name}'"
    )


#: Spark's AvailableNow trigger (``--once``) refuses a run whose topic partitions differ from the last batch's.
_AVAILABLE_NOW_CHANGED = "should provide the same topic partitions in pre-fetched offset to end offset"


def failure_message(exc: BaseException) -> str:
    """The operator-facing reason inside a Spark/Py4J exception chain."""
    text = str(exc)
    if _AVAILABLE_NOW_CHANGED in text:
        return (
            "the flow's topic partitions changed since its last batch (a topic deleted, created or no longer "
            "selected), and --once cannot plan across such a change (Spark's AvailableNow trigger): run "
            "`drkit mirror` without --once until one batch has passed; nothing was copied or lost"
        )
    match = re.search(re.escape(FAILURE_MARKER) + r"([^\n]*)", text)
    if match:
        return match.group(1).strip()

    for line in text.splitlines():
        for name in ("MirrorError", "ClusterError", "StoreError"):
            if f"{name}: " in line:
                return line.split(f"{name}: ", 1)[1].strip()
    if isinstance(exc, DrkitError):
        return text
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # Py4J wraps a Python error raised inside foreachBatch: its last line is the error itself.
    if lines and lines[0].startswith("An exception was raised by the Python Proxy"):
        errors = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception): ", ln)]
        if errors:
            return errors[-1][:500]
    first = lines[0] if lines else type(exc).__name__
    return first[:500]


def explain(flow: FlowConfig, bootstrap: str, exc: BaseException) -> BaseException:
    """The operator-facing error of a failed batch: delivery failures as they are; a source that cannot
    be read is named, with what to do."""
    text = str(exc)
    if FAILURE_MARKER in text or not _SOURCE_READ_FAILURE.search(text):
        return exc
    return ClusterError(source_unreachable(flow, bootstrap, _cause(text)))


def source_lost(flow: FlowConfig, error: BaseException) -> bool:
    """Whether a stopped query's error is its source not answering (a cluster error, exit 4), rather
    than a failure of the mirror itself (exit 5)."""
    text = str(error)
    if FAILURE_MARKER in text:
        return False
    return f"source cluster {flow.source} (" in text or bool(_SOURCE_READ_FAILURE.search(text))


#: An access-denied line of drkit.kafka.authz (a refusal the driver or a copy task met), with the transactional
#: id a refused exactly-once producer names.
_REFUSAL = re.compile(
    r"cluster \S+: principal lacks [A-Z_]+ on [^\n]*?\([A-Z_]+_AUTHORIZATION_FAILED\)(?: \(transactional id [^)\s]+\))?"
)
#: A refusal met reading the source: Spark's Java consumer's words, or the batch reader's (drkit.mirror.reader's
#: ReadFailed as the job reports it: ``batch N cannot be read exactly (<topic>/<partition>: <error>: ...``).
_SOURCE_REFUSALS = (
    re.compile(r"TopicAuthorizationException: Not authorized to access topics: \[([^\]\n]*)\]"),
    re.compile(r"cannot be read exactly \((\S+)/\d+: TOPIC_AUTHORIZATION_FAILED\b"),
)


def refusal_in(flow: FlowConfig, error: BaseException) -> str | None:
    """The access-denied line a stopped query's error carries (the mirror then exits 4, as every command a
    cluster refuses), or None. A read of the source refused (Spark's Java consumer, the batch reader) is told
    in drkit's words: READ on the topic (they fetch; READ implies DESCRIBE)."""
    text = str(error)
    found = _REFUSAL.search(text)
    if found:
        return found.group(0)
    for pattern in _SOURCE_REFUSALS:
        on_source = pattern.search(text)
        if on_source:
            topic = on_source.group(1)
            return f"cluster {flow.source}: principal lacks READ on topic {topic} (TOPIC_AUTHORIZATION_FAILED)"
    return None


def describe_failure(flow: FlowConfig, bootstrap: str, error: BaseException) -> str:
    """One line for a query that stopped: the cause, and for a source that cannot be read, what to do."""
    text = str(error)
    if source_lost(flow, error) and "ClusterError: " not in text:
        return source_unreachable(flow, bootstrap, _cause(text))
    return failure_message(error)


class FencedMirrorError(MirrorError):
    """Another writer of the flow's transactional ids started: this mirror stops (never retries: a retry
    would fence the other one in turn)."""


def fenced_message(flow: str, target: str, cause: str) -> str:
    """The operator's line for a mirror fenced by a newer one."""
    return (
        f"flow {flow}: another mirror of this flow started writing to cluster {target} with the flow's "
        f"transactional ids and fenced this one ({cause.removeprefix(FENCED_MARKER)[:200]}); this mirror "
        "stops. Run one mirror per flow"
    )


def copy_failure(flow: FlowConfig, bootstrap: str, batch_id: int, exc: Exception) -> BaseException:
    """The operator-facing error of one failed attempt at copying a batch, whichever path copied it."""
    failure = _copy_failure(flow, bootstrap, batch_id, exc)
    return failure if isinstance(failure, FencedMirrorError) else explain(flow, bootstrap, failure)


def _copy_failure(flow: FlowConfig, bootstrap: str, batch_id: int, exc: Exception) -> BaseException:
    if isinstance(exc, RecordsRemoved):
        return MirrorError(
            f"flow {flow.name}: records were removed from the source before they were mirrored "
            f"({exc}); they are lost to the target. To go on past them, set "
            "[flows.mirror] fail_on_data_loss = false"
        )
    if isinstance(exc, ReadFailed):
        return MirrorError(
            f"flow {flow.name}: batch {batch_id} cannot be read exactly ({exc}); it is not committed "
            "and is copied again when the mirror restarts"
        )
    if isinstance(exc, SourceStalled):  # a copy task's read (the driver's own says so itself)
        return ClusterError(source_unreachable(flow, bootstrap, str(exc)))
    if isinstance(exc, Fenced):
        return FencedMirrorError(fenced_message(flow.name, flow.target, str(exc)))
    return exc
