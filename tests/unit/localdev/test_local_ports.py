"""scripts/local-kafka's port bookkeeping, without a JVM: recorded ports, busy ports, foreign brokers."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from drkit.errors import ClusterError
from drkit.localdev import clusters
from drkit.localdev.broker_process import ProcessFacts
from drkit.localdev.clusters import LocalKafka


def _prepared(state: Path, base_port: int, formatted: bool = False) -> LocalKafka:
    kafka = LocalKafka(state, base_port)
    kafka._prepare("A", 0)
    kafka._prepare("B", 1)
    if formatted:
        for alias in ("A", "B"):
            data = state / alias / "data"
            data.mkdir()
            (data / "meta.properties").write_text(f"version=1\ncluster.id=id-{alias}\nnode.id=1\n")
    return kafka


def test_status_shows_the_ports_a_cluster_was_made_with(tmp_path: Path) -> None:
    _prepared(tmp_path, 39092)
    # status/down run without --base-port: the default instance must still see 39092/39102.
    shown = {c.alias: (c.port, c.controller_port, c.bootstrap_servers) for c in LocalKafka(tmp_path).status()}
    assert shown == {"A": (39092, 39093, "127.0.0.1:39092"), "B": (39102, 39103, "127.0.0.1:39102")}


def test_up_refuses_other_ports_for_a_formatted_cluster(tmp_path: Path) -> None:
    _prepared(tmp_path, 39092, formatted=True)
    with pytest.raises(
        ClusterError, match=r"cluster A was created on 127.0.0.1:39092, not 127.0.0.1:19092: use --base-port 39092"
    ):
        LocalKafka(tmp_path)._prepare("A", 0)


def test_an_unformatted_cluster_may_move(tmp_path: Path) -> None:
    _prepared(tmp_path, 39092)
    LocalKafka(tmp_path, 49092)._prepare("A", 0)
    assert LocalKafka(tmp_path).describe("A").port == 49092


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_port_held_by_another_process_is_refused(busy_port: int) -> None:
    with pytest.raises(ClusterError, match=rf"port 127.0.0.1:{busy_port} is already in use by another process"):
        clusters._ensure_free("A", busy_port)


def test_a_broker_of_another_cluster_on_the_port_is_not_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kafka = _prepared(tmp_path, 39092, formatted=True)
    # A live broker of this cluster, as its PID file and /proc say: the probe is what decides.
    (tmp_path / "A" / "kafka.pid").write_text("1\n5\n")
    props = str(tmp_path / "A" / "server.properties")
    monkeypatch.setattr(clusters, "process_facts", lambda pid: ProcessFacts(("java", "kafka.Kafka", props), 5))
    monkeypatch.setattr("drkit.localdev.readiness.probe", lambda bootstrap, topic, client=None: "someone-else")
    with pytest.raises(ClusterError, match=r"127\.0\.0\.1:39092 is served by another Kafka cluster"):
        kafka.wait_ready("A", time.monotonic() + 5)
    monkeypatch.setattr("drkit.localdev.readiness.probe", lambda bootstrap, topic, client=None: "id-A")
    kafka.wait_ready("A", time.monotonic() + 5)
