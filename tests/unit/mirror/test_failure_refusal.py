"""A mirror query stopped by a cluster's refusal ends with the access-denied line (exit 4, as every command
a cluster refuses), whether drkit's own client met it (driver, copy task) or Spark's Java consumer did."""

from __future__ import annotations

from drkit.config import FlowConfig
from drkit.mirror.failure import refusal_in

FLOW = FlowConfig(source="A", target="B")


def test_drkit_s_own_refusal_line_is_taken_whole_with_its_transactional_id() -> None:
    text = (
        "An exception was raised by the Python Proxy. ...\nDRKIT-DELIVERY-FAILED: cluster B: principal lacks WRITE on "
        "a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) (transactional id drkit-mirror.A->B.0)\n  at ..."
    )
    assert refusal_in(FLOW, RuntimeError(text)) == (
        "cluster B: principal lacks WRITE on a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) "
        "(transactional id drkit-mirror.A->B.0)"
    )


def test_spark_s_java_consumer_refused_on_the_source_is_told_in_drkit_s_words() -> None:
    text = (
        "org.apache.spark.SparkException: Job aborted\nCaused by: org.apache.kafka.common.errors."
        "TopicAuthorizationException: Not authorized to access topics: [drkit-heartbeats]\n"
    )
    assert refusal_in(FLOW, RuntimeError(text)) == (
        "cluster A: principal lacks READ on topic drkit-heartbeats (TOPIC_AUTHORIZATION_FAILED)"
    )


def test_the_batch_reader_refused_on_the_source_is_told_in_drkit_s_words() -> None:
    text = (
        "mirror of flow A->B stopped: flow A->B: batch 2 cannot be read exactly (drkit-heartbeats/0: "
        "TOPIC_AUTHORIZATION_FAILED: Fetch from broker 1 failed: Broker: Topic authorization failed); it is not "
        "committed and is copied again when the mirror restarts"
    )
    assert refusal_in(FLOW, RuntimeError(text)) == (
        "cluster A: principal lacks READ on topic drkit-heartbeats (TOPIC_AUTHORIZATION_FAILED)"
    )


def test_other_failures_are_not_refusals() -> None:
    # A delivery to the target refused is drkit's own line (drkit.mirror.deliver), never taken for the source.
    delivered = "record orders/0@5 could not be delivered to A.orders/0: TOPIC_AUTHORIZATION_FAILED: Broker: ..."
    assert refusal_in(FLOW, RuntimeError(delivered)) is None
    assert refusal_in(FLOW, RuntimeError("DRKIT-DELIVERY-FAILED: Message timed out")) is None
    assert refusal_in(FLOW, RuntimeError("Timed out waiting for a node assignment")) is None
