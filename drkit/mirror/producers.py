"""The target's producers: made here, cached per process, initialised for transactions; their errors named.

Invariant: a producer's librdkafka logger is made in the process that produces (it never travels to
Spark's workers); a cached producer that saw any failure is dropped (``drop_cached``) so a retry starts
with a fresh one; a fenced transactional producer is told apart (``Fenced``): the mirror stops, never retries.
"""

from __future__ import annotations

from typing import Any

from drkit.kafka.authz import Operation, refusal

#: Prefix of the message of a delivery failure, so the driver can find it in a Spark stack trace.
FAILURE_MARKER = "DRKIT-DELIVERY-FAILED: "

#: Prefix of the message of a fenced transactional producer (exactly-once: another writer of the same
#: transactional id started), so the driver can find it in a Spark stack trace and stop, never retry.
FENCED_MARKER = "DRKIT-FENCED: "

#: How long a transactional producer may take to initialise (fencing) and to commit or abort.
TRANSACTION_TIMEOUT_SECONDS = 60.0


class DeliveryFailed(RuntimeError):
    pass


class Fenced(DeliveryFailed):
    """A newer producer of the same transactional id fenced this one: another mirror of the flow took over.
    Retrying would fence it in turn, so the mirror stops."""


def is_fenced(err: Any) -> bool:
    """Whether a librdkafka error says a newer producer with the same transactional id exists."""
    from confluent_kafka import KafkaError

    codes = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
    try:
        return err.code() in codes
    except AttributeError:
        return False


def begin_transactions(producer: Any, transactional_id: str, alias: str) -> None:
    """Initialise a transactional producer: every older producer of its id is fenced, its open transaction
    aborted (drkit.core.exactly_once)."""
    from confluent_kafka import KafkaException

    try:
        producer.init_transactions(TRANSACTION_TIMEOUT_SECONDS)
    except KafkaException as exc:
        refused = refusal(alias or "target", exc, Operation.WRITE)
        raise DeliveryFailed(
            FAILURE_MARKER
            + (
                f"{refused} (transactional id {transactional_id})"
                if refused
                else f"cluster {alias or 'target'}: transactional id {transactional_id} could not be "
                f"initialised: {describe(exc.args[0])}"
            )
        ) from None


#: Producers kept per process (a Spark Python worker, or the driver when it copies a small batch)
#: between micro-batches, by configuration. Spark reuses its Python workers, so a long-running mirror
#: keeps one idempotent producer (one producer id on the target, warm connections) per worker instead
#: of a new one per partition per batch. A producer that saw any failure is dropped, so a retry starts
#: with a fresh one. The task function reaches this cache only through ``cached_producer`` and ``drop_cached``:
#: cloudpickle ships module functions by reference but a module global the task names itself by
#: value, which would copy the cache (and fail on the driver's live producer) into every task.
_PRODUCERS: dict[str, Any] = {}


def cached_producer(conf: dict[str, Any], alias: str) -> tuple[str, Any]:
    import json

    key = json.dumps(conf, sort_keys=True, default=str)
    producer = _PRODUCERS.get(key)
    if producer is None:
        producer = _PRODUCERS[key] = new_producer(conf, alias)
    return key, producer


def new_producer(conf: dict[str, Any], alias: str) -> Any:
    """A producer of ``conf`` (without a logger) whose librdkafka log goes through Python logging, masked.
    The logger is made here, in the process that produces: it does not travel to Spark's workers."""
    from confluent_kafka import Producer

    from drkit.kafka.clients import kafka_logger

    return Producer({**conf, "logger": kafka_logger(alias or "target", conf)})


def drop_cached(key: str) -> None:
    _PRODUCERS.pop(key, None)


def describe(err: Any) -> str:
    """A librdkafka error as ``NAME: text``."""
    try:
        return f"{err.name()}: {err.str()}"
    except AttributeError:
        return str(err)
