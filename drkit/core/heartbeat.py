"""Heartbeats: a small record the mirror writes on the source every ``[flows.heartbeats] interval_seconds``
and copies like any other record, so that replication latency and liveness are measured from the target
alone, even with the source gone (as MirrorMaker 2's heartbeats topic).

A heartbeat's key names its flow (``<source>-><target>``) and its value holds the time it was created on
the source. The target's copy of the heartbeat topic keeps the broker's append time
(``message.timestamp.type=LogAppendTime``, set when drkit creates it), so the newest copy gives:

* latency: append time on the target minus creation time on the source (one record's trip; unknown when
  the copy's topic keeps create times, e.g. a target topic drkit did not create);
* age: now minus the creation time of the newest copy: how old the freshest proof of replication is. With
  the source down it grows, one second per second: it never looks better than the truth.

No heartbeat copied yet: both are unknown (None), never 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: The topic heartbeats are written to on every source cluster (one partition). Not an internal name: every
#: flow selects it (drkit.config.DrkitConfig.topic_selector), so its copy is mirrored like data.
HEARTBEAT_TOPIC = "drkit-heartbeats"

#: Configs of the target's copy of the heartbeat topic: the broker's append time, for the latency.
HEARTBEAT_TARGET_CONFIGS = {"message.timestamp.type": "LogAppendTime"}

#: Configs of the source's heartbeat topic: compacted (one key per flow), as MirrorMaker 2's. Compaction never
#: moves the log start, so a heartbeat is never removed before the mirror copied it, however long the mirror
#: was down (retention would, and ``fail_on_data_loss`` would then stop the mirror for a heartbeat); the
#: target's copy gets the same policy, and keeps the newest heartbeat however long the source is gone.
HEARTBEAT_SOURCE_CONFIGS = {"cleanup.policy": "compact"}


def heartbeat_key(source: str, target: str) -> bytes:
    return f"{source}->{target}".encode()


def encode(created_ms: int) -> bytes:
    return json.dumps({"version": 1, "created_ms": created_ms}).encode()


def created_ms_of(value: bytes | None) -> int | None:
    """The creation time a heartbeat value holds; None for anything else."""
    try:
        data = json.loads(value or b"")
        created = data["created_ms"]
    except (ValueError, TypeError, KeyError):
        return None
    return created if isinstance(created, int) and created >= 0 else None


@dataclass(frozen=True)
class HeartbeatCopy:
    """The newest copy of a flow's heartbeat on the target."""

    created_ms: int  # on the source
    appended_ms: int | None  # on the target (None: the copy's topic keeps create times, not LogAppendTime)


@dataclass(frozen=True)
class HeartbeatReading:
    latency_seconds: float | None
    age_seconds: float | None


def reading(newest: HeartbeatCopy | None, now_ms: float) -> HeartbeatReading:
    """Latency and age from the newest copy (see the module docstring); unknown without one. A latency below 0
    (clocks of two hosts apart) is shown as 0: the append cannot precede the creation."""
    if newest is None:
        return HeartbeatReading(None, None)
    age = round(max(0.0, (now_ms - newest.created_ms) / 1000), 1)
    if newest.appended_ms is None:
        return HeartbeatReading(None, age)
    return HeartbeatReading(round(max(0.0, (newest.appended_ms - newest.created_ms) / 1000), 3), age)
