"""A flow's entries on its target cluster's lease topic (drkit.core.mirror_lease decides what they mean).

The topic has one partition (one order for every host) and the broker's append time as each record's
timestamp (one clock): created so when missing, refused in one line when it exists otherwise. An append
waits for the broker's acknowledgement and returns the entry's offset; a read returns the entries of the
flow appended since the last read (from the partition's start on the first), each with the broker's time.
Every error names the cluster.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource

from drkit.config import ClusterConfig
from drkit.core.mirror_lease import LEASE_TOPIC, Instance, LeaseAct, LeaseEntry
from drkit.core.topology import TopicCreate
from drkit.errors import ClusterError, RefusedError
from drkit.kafka import clients, topics
from drkit.kafka.authz import Operation, denied

#: The lease topic's configs: the broker's clock on every entry, and an hour of history (the fold starts
#: wherever the partition starts; a tenure older than that is known from its renewals, which name it).
LEASE_TOPIC_CONFIGS: dict[str, str] = {
    "message.timestamp.type": "LogAppendTime",
    "cleanup.policy": "delete",
    "retention.ms": str(3_600_000),
    "segment.ms": str(600_000),
}

#: How long one fetch of the lease reader waits at most (a read ends at the partition's end).
READ_SLICE_SECONDS = 0.05

#: The group id the lease reader carries (it never joins nor commits; librdkafka wants one).
LEASE_GROUP = "_drkit-mirror-lease"

#: How long the topic's first description waits before asking again while the broker does not know it yet.
_UNKNOWN_TOPIC_RETRY_SECONDS = 0.1


class LeaseLog:
    """One flow's entries on cluster ``alias``'s lease topic, for one process (not thread-safe)."""

    def __init__(self, cluster: ClusterConfig, alias: str, flow: str, timeout: float = 10.0) -> None:
        self.alias, self.flow, self.timeout = alias, flow, timeout
        self._cluster = cluster
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._next = 0
        #: Whether the last read reached the partition's end.
        self.at_end = False

    # -- the topic --------------------------------------------------------------------------------

    def ensure(self) -> None:
        """Create the lease topic if missing; refuse one that does not stamp the broker's time."""
        admin = clients.admin(self._cluster, self.alias, timeout_ms=int(self.timeout * 1000))
        create = TopicCreate(LEASE_TOPIC, LEASE_TOPIC, 1, LEASE_TOPIC_CONFIGS)
        topics.create_topics(admin, self.alias, [create], -1, self.timeout)
        resource = ConfigResource(ConfigResource.Type.TOPIC, LEASE_TOPIC)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                configs = admin.describe_configs([resource], request_timeout=self.timeout)[resource].result(
                    self.timeout
                )
                break
            except KafkaException as exc:
                # A topic just created (here or by another host) is unknown to a broker until the controller's
                # metadata reaches it (milliseconds; a CI run saw it): asked again until the timeout.
                if _unknown_topic(exc) and time.monotonic() < deadline:
                    time.sleep(_UNKNOWN_TOPIC_RETRY_SECONDS)
                    continue
                raise self._error("describe the lease topic", exc, Operation.DESCRIBE_CONFIGS) from None
        stamp = configs.get("message.timestamp.type")
        if stamp is None or stamp.value != "LogAppendTime":
            raise RefusedError(
                f"cluster {self.alias}: topic {LEASE_TOPIC} has message.timestamp.type="
                f"{None if stamp is None else stamp.value}; the mirror lease needs the broker's clock: set it to "
                f"LogAppendTime (kafka-configs --alter --entity-type topics --entity-name {LEASE_TOPIC} "
                "--add-config message.timestamp.type=LogAppendTime)"
            )

    # -- append -----------------------------------------------------------------------------------

    def append(
        self,
        act: LeaseAct,
        instance: Instance,
        lease_ms: int,
        claim: int = -1,
        epoch: int = 0,
        settings: Mapping[str, str] | None = None,
    ) -> int:
        """Append one entry and wait for the broker; its offset (its time is read back by :meth:`read`)."""
        value = {
            "act": act.value,
            "id": instance.id,
            "host": instance.host,
            "pid": instance.pid,
            "lease_ms": lease_ms,
            "claim": claim,
            "epoch": epoch,
            "settings": dict(settings or {}),
        }
        result: list[Any] = []
        producer = self._producer_()
        try:
            producer.produce(
                LEASE_TOPIC,
                json.dumps(value).encode(),
                self.flow.encode(),
                0,
                on_delivery=lambda err, msg: result.append(err if err is not None else msg.offset()),
            )
        except (KafkaException, BufferError) as exc:
            raise ClusterError(f"cluster {self.alias}: appending to {LEASE_TOPIC}: {exc}") from None
        deadline = time.monotonic() + self.timeout
        while not result and time.monotonic() < deadline:
            producer.poll(0.05)
        if not result:
            raise ClusterError(f"cluster {self.alias}: {LEASE_TOPIC} did not acknowledge within {self.timeout:.0f}s")
        if isinstance(result[0], KafkaError):
            refused = denied(self.alias, result[0], Operation.WRITE, LEASE_TOPIC)
            raise refused or ClusterError(f"cluster {self.alias}: appending to {LEASE_TOPIC}: {result[0].str()}")
        offset: int = result[0]
        return offset

    # -- read -------------------------------------------------------------------------------------

    def read(self, wait: float) -> list[LeaseEntry]:
        """The flow's entries appended since the last read: up to the partition's end, or what came within
        ``wait`` seconds when its end was not reached by then."""
        consumer = self._consumer_()
        out: list[LeaseEntry] = []
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            # In short slices: a consume waits its whole timeout unless it fills, and the partition's end
            # (an event among the messages) is what ends a read.
            msgs = consumer.consume(500, max(0.0, min(left, READ_SLICE_SECONDS)))
            at_end = False
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end = True
                        continue
                    refused = denied(self.alias, err, Operation.READ, LEASE_TOPIC, LEASE_GROUP)
                    raise refused or ClusterError(f"cluster {self.alias}: reading {LEASE_TOPIC}: {err.str()}")
                self._next = (msg.offset() or 0) + 1
                entry = _entry(msg, self.flow)
                if entry is not None:
                    out.append(entry)
            if at_end or time.monotonic() >= deadline:
                self.at_end = at_end
                return out

    def read_through(self, offset: int, wait: float) -> list[LeaseEntry]:
        """Read until the entry at ``offset`` was read (or ``wait`` seconds passed: a ClusterError)."""
        out: list[LeaseEntry] = []
        deadline = time.monotonic() + wait
        while self._next <= offset:
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"cluster {self.alias}: {LEASE_TOPIC} offset {offset} was not readable in {wait:.0f}s"
                )
            out.extend(self.read(min(0.2, max(0.0, deadline - time.monotonic()))))
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._producer is not None:
            self._producer.flush(1.0)
            self._producer = None

    # -- clients ----------------------------------------------------------------------------------

    def _producer_(self) -> Producer:
        if self._producer is None:
            self._producer = clients.producer(
                self._cluster,
                self.alias,
                **{
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 0,
                    "message.timeout.ms": int(self.timeout * 1000),
                },
            )
        return self._producer

    def _consumer_(self) -> Consumer:
        if self._consumer is None:
            self._consumer = clients.consumer(
                self._cluster,
                self.alias,
                LEASE_GROUP,
                **{
                    "enable.partition.eof": True,
                    "fetch.wait.max.ms": 50,
                    "client.id": f"drkit-lease-{uuid.uuid4().hex[:8]}",
                },
            )
            self._consumer.assign([TopicPartition(LEASE_TOPIC, 0, self._next)])
        return self._consumer

    def _error(self, what: str, exc: KafkaException, operation: Operation) -> Exception:
        refused = denied(self.alias, exc, operation, LEASE_TOPIC)
        return refused or ClusterError(f"cluster {self.alias}: {what}: {exc.args[0]}")


def _unknown_topic(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def _entry(msg: Any, flow: str) -> LeaseEntry | None:
    """The entry in ``msg`` if it is ``flow``'s and well formed (another version's or a damaged one: None)."""
    if msg.key() != flow.encode():
        return None
    try:
        data = json.loads(msg.value())
        instance = Instance(str(data["id"]), str(data["host"]), int(data["pid"]))
        settings = {str(k): str(v) for k, v in dict(data.get("settings", {})).items()}
        return LeaseEntry(
            msg.offset(),
            int(msg.timestamp()[1]),
            LeaseAct(data["act"]),
            instance,
            int(data["lease_ms"]),
            int(data.get("claim", -1)),
            int(data.get("epoch", 0)),
            settings,
        )
    except (KeyError, TypeError, ValueError):
        return None
