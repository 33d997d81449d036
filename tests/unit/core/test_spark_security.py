"""Spark's own security per master (drkit.core.spark_security): on for every cluster master, refused on a
standalone master without the cluster's secret, nothing for a master on this machine, one warning when off."""

from __future__ import annotations

import pytest

from drkit.core.spark_security import SECRET_FILE_SETTING, SECURE_SETTINGS, is_cluster_master, spark_security

CLUSTER = ["spark://10.0.0.5:7077", "spark://a:7077,b:7077", "k8s://https://kube:6443", "yarn"]
LOCAL = ["local", "local[2]", "local[*]", "local[2,3]", "local-cluster[2,1,512]"]


@pytest.mark.parametrize("master", CLUSTER)
def test_a_cluster_master_with_a_secret_gets_authentication_and_both_encryptions(master: str) -> None:
    assert is_cluster_master(master)
    security = spark_security(master, secure=True, has_secret=True)
    assert security.settings == SECURE_SETTINGS and security.refusal is None and security.warning is None
    assert security.settings == {
        "spark.authenticate": "true",
        "spark.network.crypto.enabled": "true",
        "spark.io.encryption.enabled": "true",
    }


@pytest.mark.parametrize("master", ["k8s://https://kube:6443", "yarn"])
def test_yarn_and_kubernetes_without_a_secret_let_spark_generate_one(master: str) -> None:
    security = spark_security(master, secure=True, has_secret=False)
    assert security.settings == SECURE_SETTINGS and security.refusal is None


def test_a_standalone_master_without_its_secret_is_refused_in_one_line_naming_the_ways_out() -> None:
    security = spark_security("spark://m:7077", secure=True, has_secret=False)
    assert security.settings == {} and security.refusal is not None
    assert "\n" not in security.refusal
    for way in ("auth_secret_file", "DRKIT_SPARK_AUTH_SECRET", "secure = false"):
        assert way in security.refusal


@pytest.mark.parametrize("master", LOCAL)
def test_a_master_on_this_machine_needs_nothing(master: str) -> None:
    assert not is_cluster_master(master)
    for secure in (True, False):
        assert spark_security(master, secure, has_secret=False) == spark_security(master, secure, True)
        assert spark_security(master, secure, has_secret=False).settings == {}
        assert spark_security(master, secure, has_secret=False).warning is None


@pytest.mark.parametrize("master", CLUSTER)
def test_security_off_on_a_cluster_is_one_warning_line_and_no_settings(master: str) -> None:
    security = spark_security(master, secure=False, has_secret=False)
    assert security.settings == {} and security.refusal is None
    assert security.warning is not None and "\n" not in security.warning and master in security.warning


def test_only_a_standalone_master_is_given_the_secret_itself() -> None:
    assert spark_security("spark://m:7077", True, True).passes_secret
    for master in ("k8s://https://kube:6443", "yarn"):  # Spark's SecurityManager ignores it there
        assert not spark_security(master, True, True).passes_secret


def test_on_kubernetes_a_secret_file_is_sparks_own_for_driver_and_executor_pods() -> None:
    security = spark_security("k8s://https://kube:6443", True, True, "/etc/drkit/spark/auth-secret")
    assert security.settings == {**SECURE_SETTINGS, SECRET_FILE_SETTING: "/etc/drkit/spark/auth-secret"}
    assert not security.passes_secret
    assert SECRET_FILE_SETTING not in spark_security("yarn", True, True, "/s").settings
