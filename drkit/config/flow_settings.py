"""The tuning sections of a flow: ``[flows.mirror]``, ``[flows.checkpoint]``, ``[flows.topology]``,
``[flows.heartbeats]``, and the interval rule they share.

Invariant: a section that exists holds intervals between their floor and one day (or 0 where 0 means
off), producer properties librdkafka accepts and that leave drkit's no-loss settings alone, and consumer
properties that leave drkit's read settings alone.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from drkit.config.base import ConfigModel
from drkit.config.properties import check_client_properties, flatten_properties
from drkit.config.regex import Pattern
from drkit.core.exactly_once import TRANSACTION_SLOTS, Delivery
from drkit.core.topology import CONFIG_EXCLUDE_DEFAULT

#: Trigger, translator, observation and heartbeat intervals below this would spend the machine on
#: bookkeeping (each trigger is a Spark job; each translator run reads every group's offsets).
MIN_INTERVAL_SECONDS = 0.1
#: A reconciliation describes every selected topic on both clusters; 0 turns it off.
MIN_REFRESH_INTERVAL_SECONDS = 1.0
#: A longer interval (or stop grace) is a typo of units: a mirror that would trigger once a day.
MAX_INTERVAL_SECONDS = 86_400.0
#: Kafka stores a replication factor as a 16-bit number.
_MAX_REPLICATION_FACTOR = 32767


def interval_problem(value: float, floor: float, off: bool = False) -> str | None:
    """Why ``value`` seconds is not a sane interval (``off``: 0 is allowed and means off), or None."""
    if off and value == 0:
        return None
    if value < floor:
        zero = " (or 0: off)" if off else ""
        return f"must be at least {floor:g} seconds{zero}"
    if value > MAX_INTERVAL_SECONDS:
        return f"must be at most {MAX_INTERVAL_SECONDS:g} seconds (one day)"
    return None


def checked_interval(value: float, floor: float, off: bool = False) -> float:
    """``value``, or ValueError saying why it is no sane interval (:func:`interval_problem`)."""
    problem = interval_problem(value, floor, off)
    if problem:
        raise ValueError(problem)
    return value


#: Batches of up to this many offsets are copied by the mirror's driver (``driver_copy_max_records``):
#: above ``max_offsets_per_trigger``'s default, so by default every batch whose start is known.
DRIVER_COPY_MAX_RECORDS = 1_000_000


class MirrorSettings(ConfigModel):
    """Tuning of the mirror job of one flow."""

    trigger_interval_seconds: float = 1.0
    max_offsets_per_trigger: int | None = Field(default=100_000, gt=0)
    #: In local mode, a batch of at most this many planned offsets is read and copied by the driver itself
    #: (a streaming read: memory does not grow with the batch), without the Spark job of the copy tasks,
    #: whose fixed cost is most of a small batch's time; larger batches go to copy tasks. With a cluster
    #: master every batch is copied by tasks on the executors (drkit.core.copying). 0: always tasks.
    driver_copy_max_records: int = Field(default=DRIVER_COPY_MAX_RECORDS, ge=0)
    #: In local mode, the driver copies records as they arrive, ahead of the micro-batches, which record
    #: what the target acknowledged (drkit.mirror.continuous): tens of milliseconds from source to target
    #: instead of a trigger and a batch. false: each batch copies its own records. A one-shot run
    #: (``--once``) and a cluster master always copy per batch.
    continuous_copy: bool = True
    #: What the mirror promises (drkit.core.exactly_once). ``at_least_once``: no record is lost; a crash or a
    #: retried batch may copy records again (orphans, without syncs). ``exactly_once``: every batch copies its
    #: own records in Kafka transactions, so a consumer of the target with ``isolation.level=read_committed``
    #: sees each source record once, across crashes; a second mirror of the flow is fenced and stops. The
    #: continuous copy is at-least-once only: exactly-once copies per batch (latency about a trigger).
    delivery: Delivery = Delivery.AT_LEAST_ONCE
    #: exactly_once: the flow's transactional ids (at most this many copy tasks and transactions per batch).
    #: Every host that may run the flow's mirror must use the same value: a partition's id follows from it.
    transaction_slots: int = Field(default=TRANSACTION_SLOTS, ge=1, le=1024)
    #: Replication factor of target topics drkit creates; -1 is the target broker's default.
    target_replication_factor: int = Field(default=-1)
    #: Stop when records were removed from the source before they were mirrored (retention).
    fail_on_data_loss: bool = True
    #: Extra properties for the target producer (compression.type, linger.ms, batch.size, ...).
    producer: dict[str, str] = Field(default_factory=dict)
    #: Extra properties for the Spark Kafka source (without the ``kafka.`` prefix).
    consumer: dict[str, str] = Field(default_factory=dict)
    #: On SIGINT/SIGTERM, how long to let the running micro-batch finish before stopping it (a stopped
    #: batch is produced again after a restart: duplicates on the target, never a loss or a wrong sync).
    stop_grace_seconds: float = Field(default=10.0, ge=0)
    #: Seconds between observations of the source's end offsets (lag metrics, RPO) while no batch runs;
    #: after every batch the ends are observed at once, in the background.
    observe_interval_seconds: float = 5.0
    #: How long the flow's lease lasts without a renewal (drkit.core.mirror_lease): a standby takes over this
    #: long after the active mirror's last renewal (plus about one renewal interval and its start). Every
    #: process of the flow must use the same value.
    lease_seconds: float = Field(default=5.0, ge=1.0, le=300.0)
    #: How often the holder renews the lease and a standby says it is there; at most a third of the lease.
    lease_renew_seconds: float = Field(default=1.0, ge=0.1, le=100.0)

    @field_validator("trigger_interval_seconds", "observe_interval_seconds")
    @classmethod
    def _interval(cls, value: float) -> float:
        return checked_interval(value, MIN_INTERVAL_SECONDS)

    @model_validator(mode="after")
    def _renewals_fit_the_lease(self) -> MirrorSettings:
        if self.lease_renew_seconds * 3 > self.lease_seconds:
            raise ValueError(
                f"lease_renew_seconds ({self.lease_renew_seconds:g}) must be at most a third of lease_seconds "
                f"({self.lease_seconds:g}): two renewals may fail before the lease runs out"
            )
        return self

    @field_validator("stop_grace_seconds")
    @classmethod
    def _grace(cls, value: float) -> float:
        # 0 is a deliberate "stop at once" (the running batch is copied again after a restart).
        return checked_interval(value, 0.0)

    @field_validator("target_replication_factor")
    @classmethod
    def _rf(cls, value: int) -> int:
        if value == 0 or value < -1 or value > _MAX_REPLICATION_FACTOR:
            raise ValueError(f"must be -1 (broker default) or a number from 1 to {_MAX_REPLICATION_FACTOR}")
        return value

    _flat = field_validator("producer", "consumer", mode="before")(flatten_properties)

    @field_validator("producer")
    @classmethod
    def _producer(cls, value: dict[str, str]) -> dict[str, str]:
        forced = {"enable.idempotence", "acks", "bootstrap.servers", "transactional.id"} & set(value)
        if forced:
            raise ValueError(f"{sorted(forced)[0]!r} is set by drkit for no-loss delivery and cannot be overridden")
        # The target producer is a librdkafka (confluent-kafka) producer in the Spark tasks.
        return check_client_properties(value)

    @field_validator("consumer")
    @classmethod
    def _consumer(cls, value: dict[str, str]) -> dict[str, str]:
        forced = {"isolation.level", "group.id", "enable.auto.commit", "bootstrap.servers"} & set(value)
        if forced:
            raise ValueError(f"{sorted(forced)[0]!r} is set by drkit and cannot be overridden")
        return value


class CheckpointSettings(ConfigModel):
    """Tuning of the checkpoint translator of one flow."""

    #: Seconds between translator runs. A run without changes costs one round of group-offset reads
    #: and no Delta commit, so the default keeps checkpoints a few seconds behind the source's commits
    #: (MirrorMaker 2 emits checkpoints every 60 s by default).
    interval_seconds: float = 2.0
    #: Also commit translated offsets to idle groups on the target (like MM2's sync.group.offsets).
    sync_group_offsets: bool = False
    #: Failover refuses checkpoints older than this unless told --allow-stale.
    max_age_seconds: float = Field(default=300.0, gt=0)
    #: The continuous ``drkit checkpoint`` also follows the source's commits as they are made (tailing its
    #: ``__consumer_offsets``) onto the target's checkpoint topic (drkit.core.live_checkpoints), which failover
    #: reads as the newest checkpoint: a failover re-reads the commits in flight, not an interval's worth.
    #: Without READ on ``__consumer_offsets``, or WRITE on the checkpoint topic, it says so once and the interval
    #: runs continue alone; a failover that may not read the topic uses the rows and says so.
    follow_commits: bool = True
    #: Milliseconds between the follower's appends to the checkpoint topic (coalesced per group in between).
    follow_interval_ms: int = Field(default=100, ge=10, le=60_000)

    @field_validator("interval_seconds")
    @classmethod
    def _interval(cls, value: float) -> float:
        return checked_interval(value, MIN_INTERVAL_SECONDS)


class TopologySettings(ConfigModel):
    """How a running mirror follows the source's topics (``[flows.topology]``)."""

    #: Seconds between reconciliations of a running mirror: new topics and partitions are created on the
    #: target and config changes propagated. 0 turns the periodic reconciliation off; a batch holding a
    #: new topic or partition still creates what it needs before it copies.
    refresh_interval_seconds: float = 10.0
    #: Copy topic configs (at creation, then every change) except ``config_exclude``.
    sync_configs: bool = True
    #: Topic properties never copied, as full-match regexes; the default list and why each entry is
    #: there: drkit.core.topology.CONFIG_EXCLUDE_DEFAULT.
    config_exclude: list[Pattern] = Field(default_factory=lambda: [p for p, _ in CONFIG_EXCLUDE_DEFAULT])
    #: Copy the topic ACLs of mirrored topics to their target names (READ and DESCRIBE only, never WRITE).
    sync_acls: bool = False

    @field_validator("refresh_interval_seconds")
    @classmethod
    def _interval(cls, value: float) -> float:
        return checked_interval(value, MIN_REFRESH_INTERVAL_SECONDS, off=True)


class HeartbeatSettings(ConfigModel):
    """Heartbeat records the mirror writes on the source and copies like data (``[flows.heartbeats]``)."""

    #: Seconds between heartbeats; 0 writes none.
    interval_seconds: float = 1.0

    @field_validator("interval_seconds")
    @classmethod
    def _interval(cls, value: float) -> float:
        return checked_interval(value, MIN_INTERVAL_SECONDS, off=True)
