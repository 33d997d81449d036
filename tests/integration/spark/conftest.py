"""A Spark standalone cluster on loopback for the session: a master and two workers, separate JVMs from the
pyspark package (drkit.localdev.spark_cluster), on ports of their own (support.ports.SPARK), authenticated and
encrypted with a secret of its own (a driver names it: ``[spark] auth_secret_file``).

The test process already holds the shared ``local[2]`` SparkContext (one per process), so whatever runs
against the cluster runs in a subprocess: ``drkit mirror`` with a config whose ``[spark] master`` is the
cluster's (:func:`cluster_config`), or a small driver script. That is also how an operator runs it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.ports import SPARK

from drkit.localdev.spark_cluster import LocalSpark

WORKERS = 2


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSpark]:
    # One core and 1g per worker: one executor each (the machine has two cores for everything).
    cluster = LocalSpark(tmp_path_factory.mktemp("local-spark"), base_port=SPARK.base, cores=1, memory="1g")
    try:
        cluster.up(WORKERS)
        yield cluster
    finally:
        cluster.down()


#: Spark settings of the cluster tests' drivers: executors small enough for two on this machine.
CLUSTER_CONF = {"spark.executor.memory": "512m", "spark.driver.memory": "1g"}


@pytest.fixture
def cluster_config(spark_cluster: LocalSpark, clusters: dict[str, str], tmp_path: Path) -> Callable[..., Path]:
    """Write a drkit config (TOML) whose Spark master is the standalone cluster; returns its path.

    ``topic``: the one topic of the flow A->B; ``mirror``: its [flows.mirror] keys; ``spark_conf``: extra Spark
    settings.
    """

    def write(topic: str, mirror: dict[str, object] | None = None, spark_conf: dict[str, str] | None = None) -> Path:
        conf = {**CLUSTER_CONF, **(spark_conf or {})}
        lines = [
            "[state]",
            f"root = {json.dumps(str(tmp_path / 'state'))}",
            "",
            "[spark]",
            f'master = "{spark_cluster.master_url()}"',
            # The cluster authenticates (drkit.localdev.spark_cluster): the driver names its secret's file.
            f"auth_secret_file = {json.dumps(str(spark_cluster.secret_file()))}",
            # The driver on loopback, like the cluster: nothing listens beyond this machine.
            'driver_host = "127.0.0.1"',
            'driver_bind_address = "127.0.0.1"',
            "conf = { " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in conf.items()) + " }",
            "",
            f'[clusters.A]\nbootstrap_servers = "{clusters["A"]}"',
            f'[clusters.B]\nbootstrap_servers = "{clusters["B"]}"',
            "",
            "[[flows]]",
            'source = "A"',
            'target = "B"',
            f"topics = {{ include = [{json.dumps(topic)}] }}",
            "heartbeats = { interval_seconds = 0 }",
        ]
        if mirror:
            lines.append("mirror = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in mirror.items()) + " }")
        path = tmp_path / "drkit.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    return write
