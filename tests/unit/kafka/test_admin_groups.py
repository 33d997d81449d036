"""Which groups ``KafkaAdmin.describe_groups`` describes: only those a listing cannot tell are memberless.

A tiny fake of confluent-kafka's AdminClient stands in for the broker (milliseconds); the wiring against
real brokers is covered by the failover integration tests (a group active on the target is refused).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from drkit.config import ClusterConfig
from drkit.kafka.admin import KafkaAdmin


class State(Enum):
    STABLE = 1
    EMPTY = 2
    DEAD = 3
    PREPARING_REBALANCE = 4


@dataclass
class Listing:
    group_id: str
    state: State


@dataclass
class Described:
    state: State
    members: list[Any] = field(default_factory=list)


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str


class FakeClient:
    def __init__(self, listed: dict[str, State], errors: list[Exception] | None = None) -> None:
        self.listed = listed
        self.errors = errors or []
        self.described: list[str] = []

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        result: Future[Any] = Future()
        valid = [Listing(g, s) for g, s in self.listed.items()]
        result.set_result(type("Result", (), {"valid": valid, "errors": self.errors})())
        return result

    def describe_consumer_groups(self, names: list[str], request_timeout: float) -> dict[str, Future[Any]]:
        self.described += names
        out = {}
        for name in names:
            future: Future[Any] = Future()
            state = self.listed.get(name, State.DEAD)
            members = [Member("m1", "c1", "/10.0.0.1")] if state is State.STABLE else []
            future.set_result(Described(state, members))
            out[name] = future
        return out


def admin_with(client: FakeClient) -> KafkaAdmin:
    admin = KafkaAdmin(ClusterConfig(bootstrap_servers="127.0.0.1:1"), "B")
    admin._client = client  # type: ignore[assignment]  # the client the adapter would build
    return admin


def test_only_groups_that_may_have_members_are_described() -> None:
    client = FakeClient({"idle": State.EMPTY, "busy": State.STABLE, "moving": State.PREPARING_REBALANCE})
    states = admin_with(client).describe_groups(["idle", "busy", "gone", "moving"])
    assert sorted(client.described) == ["busy", "moving"]
    assert states["idle"].state == "EMPTY" and states["idle"].members == ()
    assert states["gone"].state == "DEAD" and states["gone"].members == ()  # listed by no broker
    assert [m.member_id for m in states["busy"].members] == ["m1"]


def test_a_listing_with_errors_tells_nothing_and_every_group_is_described() -> None:
    client = FakeClient({"idle": State.EMPTY}, errors=[RuntimeError("broker 2 did not answer")])
    states = admin_with(client).describe_groups(["idle", "other"])
    assert sorted(client.described) == ["idle", "other"]
    assert set(states) == {"idle", "other"}
