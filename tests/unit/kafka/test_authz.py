"""A broker's authorization refusal becomes one line naming the cluster, the resource and the operation
(fakes of confluent-kafka's admin client; a real refusal: tests/integration/secure)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from drkit.config import ClusterConfig
from drkit.core.topology import TopicCreate
from drkit.errors import AccessDenied
from drkit.kafka import topics
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.authz import Operation, refusal


def _refused(code: int) -> KafkaException:
    return KafkaException(KafkaError(code, "Broker: authorization failed"))


def _failed(exc: Exception) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(exc)
    return future


@pytest.mark.parametrize(
    ("code", "operation", "line"),
    [
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, Operation.WRITE,
         "cluster B: principal lacks WRITE on topic A.orders (TOPIC_AUTHORIZATION_FAILED)"),
        (KafkaError.GROUP_AUTHORIZATION_FAILED, Operation.READ,
         "cluster B: principal lacks READ on group billing (GROUP_AUTHORIZATION_FAILED)"),
        (KafkaError.CLUSTER_AUTHORIZATION_FAILED, Operation.DESCRIBE,
         "cluster B: principal lacks DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED)"),
        (KafkaError.CLUSTER_AUTHORIZATION_FAILED, Operation.CREATE,
         "cluster B: principal lacks CREATE on topic A.orders (or the cluster) (CLUSTER_AUTHORIZATION_FAILED)"),
        (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Operation.WRITE,
         "cluster B: principal lacks WRITE on a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)"),
    ],
)  # fmt: skip
def test_each_refusal_names_cluster_resource_and_operation(code: int, operation: Operation, line: str) -> None:
    assert refusal("B", _refused(code), operation, "A.orders", "billing") == line
    assert refusal("B", KafkaError(code), operation, "A.orders", "billing") == line


def test_other_errors_are_not_refusals() -> None:
    assert refusal("B", _refused(KafkaError._TRANSPORT), Operation.READ, "t") is None
    assert refusal("B", ValueError("x"), Operation.READ, "t") is None


class FakeAdmin:
    """confluent-kafka's AdminClient, refusing everything with one error code."""

    def __init__(self, code: int) -> None:
        self.code = code

    def list_consumer_group_offsets(self, requests: list[Any], **_: Any) -> dict[str, Future[Any]]:
        return {r.group_id: _failed(_refused(self.code)) for r in requests}

    def alter_consumer_group_offsets(self, requests: list[Any], **_: Any) -> dict[str, Future[Any]]:
        result = type("R", (), {})()
        result.topic_partitions = [SimpleNamespace(topic="A.orders", partition=0, error=KafkaError(self.code))]
        future: Future[Any] = Future()
        future.set_result(result)
        return {r.group_id: future for r in requests}

    def create_topics(self, new: list[Any], **_: Any) -> dict[str, Future[Any]]:
        return {t.topic: _failed(_refused(self.code)) for t in new}


def _admin(code: int) -> KafkaAdmin:
    admin = KafkaAdmin(ClusterConfig(bootstrap_servers="h:1"), "B")
    admin._client = FakeAdmin(code)  # type: ignore[assignment]  # the client the adapter would build
    return admin


def test_reading_a_groups_offsets_without_describe_is_one_line() -> None:
    with pytest.raises(AccessDenied) as refused:
        _admin(KafkaError.GROUP_AUTHORIZATION_FAILED).committed_offsets("billing")
    assert str(refused.value) == "cluster B: principal lacks DESCRIBE on group billing (GROUP_AUTHORIZATION_FAILED)"
    assert refused.value.exit_code == 4


def test_committing_on_a_topic_without_read_names_the_topic() -> None:
    with pytest.raises(AccessDenied) as refused:
        _admin(KafkaError.TOPIC_AUTHORIZATION_FAILED).commit_offsets("billing", {("A.orders", 0): 5})
    assert str(refused.value) == "cluster B: principal lacks READ on topic A.orders (TOPIC_AUTHORIZATION_FAILED)"


def test_creating_a_target_topic_without_create_is_one_line() -> None:
    with pytest.raises(
        AccessDenied, match=r"^cluster B: principal lacks CREATE on topic A\.orders \(TOPIC_AUTHORIZATION_FAILED\)$"
    ):
        topics.create_topics(
            FakeAdmin(KafkaError.TOPIC_AUTHORIZATION_FAILED), "B", [TopicCreate("orders", "A.orders", 3, {})], 1
        )  # type: ignore[arg-type]


def test_end_offsets_of_a_topic_without_describe_name_the_topic() -> None:
    class Offsets:
        def list_offsets(self, request: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
            return {tp: _failed(_refused(KafkaError.TOPIC_AUTHORIZATION_FAILED)) for tp in request}

    with pytest.raises(AccessDenied) as refused:
        topics.end_offsets(Offsets(), "A", {"orders": 2})  # type: ignore[arg-type]
    assert str(refused.value) == "cluster A: principal lacks DESCRIBE on topic orders (TOPIC_AUTHORIZATION_FAILED)"


def test_a_tail_reader_refused_its_group_names_describe_on_that_group() -> None:
    """The tail reader never joins its group; a refusal on the group is librdkafka's coordinator lookup."""
    from drkit.kafka.tail import TAIL_GROUP, read_tail

    class Refused:
        def assign(self, partitions: object) -> None:
            pass

        def consume(self, count: int, timeout: float) -> list[Any]:
            error = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)
            return [SimpleNamespace(error=lambda: error)]

    with pytest.raises(AccessDenied) as named:
        read_tail(Refused(), "B", "A.orders", 0, 10, 20, "A", 5.0, TAIL_GROUP)
    assert str(named.value) == "cluster B: principal lacks DESCRIBE on group _drkit-tail (GROUP_AUTHORIZATION_FAILED)"
    with pytest.raises(AccessDenied) as unnamed:  # no group given: the fetch's READ on the topic, as before
        read_tail(Refused(), "B", "A.orders", 0, 10, 20, "A", 5.0)
    assert "lacks READ on a group" in str(unnamed.value)


def test_fencing_a_refused_transactional_id_is_one_line_not_the_producer_s_fatal_flush(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """librdkafka's producer whose init failed fatally raises the error again on flush (seen on a secure
    cluster): the refusal must still be what fencing raises (failover then records it and goes on)."""
    from drkit.kafka import clients

    fatal = KafkaException(KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "refused", fatal=True))

    class Refused:
        def init_transactions(self, timeout: float) -> None:
            raise fatal

        def flush(self, timeout: float) -> int:
            raise fatal

    monkeypatch.setattr(clients, "producer", lambda *args, **kwargs: Refused())
    with pytest.raises(AccessDenied) as refused:
        KafkaAdmin(ClusterConfig(bootstrap_servers="h:1"), "B").fence_transactions(["drkit-mirror.A->B.0"])
    assert str(refused.value) == (
        "cluster B: principal lacks WRITE on a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)"
    )
