"""The lease topic's first description: a broker that does not know the topic yet (just created, its metadata
still on its way from the controller) is asked again until the timeout; any other error, or that one past the
timeout, is the one line naming the cluster."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from drkit.config import ClusterConfig
from drkit.errors import ClusterError
from drkit.kafka import lease_log
from drkit.kafka.lease_log import LeaseLog


class _Config:
    value = "LogAppendTime"


class _Admin:
    """Answers describe_configs with ``errors`` first (one per call), then the lease topic's configs."""

    def __init__(self, errors: list[int]) -> None:
        self.errors, self.calls = errors, 0

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
        self.calls += 1
        answer: Future[Any] = Future()
        if self.errors:
            answer.set_exception(KafkaException(KafkaError(self.errors.pop(0))))
        else:
            answer.set_result({"message.timestamp.type": _Config()})
        return {resources[0]: answer}


def _ensure(monkeypatch: pytest.MonkeyPatch, admin: _Admin, timeout: float = 5.0) -> None:
    monkeypatch.setattr(lease_log.clients, "admin", lambda *args, **kwargs: admin)
    monkeypatch.setattr(lease_log.topics, "create_topics", lambda *args, **kwargs: [])
    LeaseLog(ClusterConfig(bootstrap_servers="127.0.0.1:1"), "B", "A->B", timeout=timeout).ensure()


def test_a_topic_the_broker_does_not_know_yet_is_described_again(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = _Admin([KafkaError.UNKNOWN_TOPIC_OR_PART] * 3)
    _ensure(monkeypatch, admin)
    assert admin.calls == 4


def test_past_the_timeout_or_another_error_it_is_one_line_naming_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ClusterError, match=r"^cluster B: describe the lease topic: .*UNKNOWN_TOPIC_OR_PART"):
        _ensure(monkeypatch, _Admin([KafkaError.UNKNOWN_TOPIC_OR_PART] * 1000), timeout=0.3)
    admin = _Admin([KafkaError.REQUEST_TIMED_OUT, KafkaError.UNKNOWN_TOPIC_OR_PART])
    with pytest.raises(ClusterError, match=r"^cluster B: describe the lease topic: .*REQUEST_TIMED_OUT"):
        _ensure(monkeypatch, admin)
    assert admin.calls == 1
