"""Where the Spark driver binds and what it advertises (drkit.runtime.spark.driver_network): loopback for a
master on this machine unless ``[spark]`` names addresses; only what ``[spark]`` names for a cluster master;
and drkit ships itself to executors only when tasks run outside the driver's process."""

from __future__ import annotations

import pytest

from drkit.config import SparkConfig
from drkit.core.copying import is_local_master
from drkit.runtime.spark import driver_network, local_ip, session_settings

HOST, BIND = "spark.driver.host", "spark.driver.bindAddress"
PORT, BLOCKS = "spark.driver.port", "spark.driver.blockManager.port"


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "local-cluster[2,1,512]"])
def test_a_master_on_this_machine_keeps_the_driver_on_loopback(master: str) -> None:
    config = SparkConfig(master=master)
    assert driver_network(config) == {HOST: "127.0.0.1", BIND: "127.0.0.1"}
    assert local_ip(config) == "127.0.0.1"
    launch, _ = session_settings(config, "drkit", [])
    assert launch[HOST] == "127.0.0.1" and launch[BIND] == "127.0.0.1"


@pytest.mark.parametrize(
    "master", ["spark://10.0.0.5:7077", "spark://a:7077,b:7077", "k8s://https://kube:6443", "yarn"]
)
def test_a_cluster_master_gets_sparks_own_choice_when_nothing_is_named(master: str) -> None:
    config = SparkConfig(master=master)
    assert driver_network(config) == {}
    assert local_ip(config) is None  # SPARK_LOCAL_IP is left alone: the driver binds where Spark chooses
    launch, _ = session_settings(config, "drkit", [], secret_key="the-clusters-secret")
    assert HOST not in launch and BIND not in launch and PORT not in launch


def test_named_addresses_and_ports_are_passed_whatever_the_master() -> None:
    named = {"driver_host": "drkit-driver.dr.svc", "driver_bind_address": "0.0.0.0"}
    ports = {"driver_port": 7078, "block_manager_port": 7079}
    for master in ("local[2]", "k8s://https://kube:6443"):
        config = SparkConfig(master=master, **named, **ports)
        assert driver_network(config) == {HOST: "drkit-driver.dr.svc", BIND: "0.0.0.0", PORT: "7078", BLOCKS: "7079"}
        assert local_ip(config) == "0.0.0.0"


def test_a_driver_host_alone_on_a_local_master_does_not_bind_to_loopback() -> None:
    # The driver advertises 10.1.2.3: binding to 127.0.0.1 would refuse everyone who uses that address.
    config = SparkConfig(master="local[2]", driver_host="10.1.2.3")
    assert driver_network(config) == {HOST: "10.1.2.3"}
    assert local_ip(config) is None


def test_a_cluster_master_on_loopback_is_reached_with_a_named_host() -> None:
    config = SparkConfig(master="spark://127.0.0.1:7077", driver_host="127.0.0.1", driver_bind_address="127.0.0.1")
    assert driver_network(config) == {HOST: "127.0.0.1", BIND: "127.0.0.1"}


@pytest.mark.parametrize(
    ("master", "ships"),
    [
        ("local", False),
        ("local[*]", False),
        ("local-cluster[2,1,512]", True),
        ("spark://h:7077", True),
        ("yarn", True),
        ("k8s://https://kube:6443", True),
    ],
)
def test_drkit_is_shipped_only_where_tasks_run_in_other_processes(master: str, ships: bool) -> None:
    assert (not is_local_master(master)) is ships  # build_session ships drkit exactly then
