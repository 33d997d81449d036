"""Session-scoped integration fixtures: two real local Kafka clusters and one Spark session.

The clusters run on their own ports (29092 / 29102 unless DRKIT_TEST_BASE_PORT moves them) and state
folder, so they never collide with clusters a user started with scripts/local-kafka. Each test makes
its own topics and groups with unique names, so tests neither depend on each other nor on their order.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.object_store import BUCKET, S3Server
from support.ports import OBJECT_STORE_INDEX, SESSION

from drkit.config import DrkitConfig, parse_config
from drkit.localdev.clusters import LocalKafka


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def local_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    kafka = LocalKafka(tmp_path_factory.mktemp("local-kafka"), base_port=SESSION.base, heap="384m")
    try:
        kafka.up(["A", "B"])
        yield kafka
    finally:
        kafka.down()


@pytest.fixture(scope="session")
def clusters(local_kafka: LocalKafka) -> dict[str, str]:
    """alias -> bootstrap servers of the test clusters."""
    return {c.alias: c.bootstrap_servers for c in local_kafka.status()}


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server on loopback, with :data:`~support.object_store.BUCKET`: one per session."""
    server = S3Server.start(SESSION.at(OBJECT_STORE_INDEX), tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        server.client().create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from drkit.config import SparkConfig
    from drkit.runtime.spark import build_session

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = build_session(SparkConfig(conf={"spark.sql.warehouse.dir": str(warehouse)}), "drkit-tests")
    yield session
    stop_within(session, 120.0)


def stop_within(session: Any, seconds: float) -> None:
    """Stop the Spark session; if the JVM does not answer in time (a streaming task still waiting on a
    broker a test killed), end the JVM rather than hang the suite."""

    def stop() -> None:
        for query in session.streams.active:
            with contextlib.suppress(Exception):  # spark.sql.streaming.stopTimeout: the query is abandoned
                query.stop()
        session.stop()

    stopper = threading.Thread(target=stop, daemon=True)
    stopper.start()
    stopper.join(seconds)
    if stopper.is_alive():
        process = getattr(session.sparkContext._gateway, "proc", None)
        if process is not None:
            process.kill()


#: How long a query a test started may take to be stopped after the test (a runner thread winding down).
QUERY_STOP_SECONDS = 30.0


@pytest.fixture(autouse=True)
def no_query_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that leaves a streaming query of its own running in the shared Spark session.

    Queries that were stopped are not counted even while Spark still lists them: one stopped while its
    source is down stays registered until Spark's Kafka source closes its admin client, which waits on
    the dead broker for minutes (the mirror names its query per state root, so later tests still start
    theirs). The failure shows the Python threads' stacks.
    """
    if "spark" not in request.fixturenames:
        yield
        return
    session = request.getfixturevalue("spark")
    before = {q.runId for q in session.streams.active}
    yield

    def running() -> list[str]:
        return [q.name for q in session.streams.active if q.runId not in before and q.isActive]

    deadline = time.monotonic() + QUERY_STOP_SECONDS
    while running() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = running()
    if left:
        stacks = "\n".join(
            f"--- thread {ident}\n{''.join(traceback.format_stack(frame))}"
            for ident, frame in sys._current_frames().items()
        )
        pytest.fail(f"streaming queries still running {QUERY_STOP_SECONDS:.0f}s after the test: {left}\n{stacks}")


@pytest.fixture
def make_config(clusters: dict[str, str], tmp_path: Path) -> Callable[..., DrkitConfig]:
    """Build a validated config for the test clusters, with state under this test's tmp_path."""

    def build(flows: list[dict[str, Any]] | None = None, **extra: Any) -> DrkitConfig:
        data: dict[str, Any] = {
            "clusters": {alias: {"bootstrap_servers": bs} for alias, bs in clusters.items()},
            # Heartbeats off unless a test asks: they add records to every flow's copy, and tests count records.
            "flows": [
                {"heartbeats": {"interval_seconds": 0}, **f}
                for f in (flows if flows is not None else [{"source": "A", "target": "B"}])
            ],
            "state": {"root": str(tmp_path / "state")},
        }
        data.update(extra)
        return parse_config(data, str(tmp_path / "drkit.toml"))

    return build
