"""What Spark gets for a state root in an object store: S3A's jars and settings, its secrets off the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.config import SparkConfig
from drkit.core.storage import RootUri, Scheme, StorageSettings
from drkit.layout import StateLayout
from drkit.runtime import artifacts, objectstore
from drkit.runtime.spark import session_settings

KEYS = StorageSettings(endpoint="http://127.0.0.1:9000", access_key_id="AKIA-x", secret_access_key="s3cr3t-key")
JARS = [Path("/cache/jars/s3a-3.4.1/hadoop-aws-3.4.1.jar")]


@pytest.fixture(autouse=True)
def no_maven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts, "object_store_jars", lambda: JARS)


def test_a_local_root_adds_nothing() -> None:
    assert objectstore.spark_settings(StateLayout(Path("/s"))) == ({}, [])


@pytest.mark.parametrize("scheme", [Scheme.GS, Scheme.ABFSS, Scheme.HDFS])
def test_other_stores_take_their_connector_from_spark_conf(scheme: Scheme) -> None:
    authority = "c@a.dfs.core.windows.net" if scheme is Scheme.ABFSS else "b"
    assert objectstore.spark_settings(StateLayout(Path("/h"), RootUri(scheme, authority, "x"))) == ({}, [])


def test_an_s3a_root_gets_hadoop_aws_and_the_s3a_settings() -> None:
    conf, jars = objectstore.spark_settings(StateLayout(Path("/h"), RootUri(Scheme.S3A, "b", "x"), KEYS))
    assert jars == JARS
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "s3cr3t-key"


def test_the_s3a_keys_never_reach_the_jvms_command_line() -> None:
    conf, _ = objectstore.spark_settings(StateLayout(Path("/h"), RootUri(Scheme.S3A, "b", "x"), KEYS))
    launch, secret = session_settings(SparkConfig(conf=conf), "drkit", [])
    assert secret["spark.hadoop.fs.s3a.secret.key"] == "s3cr3t-key"
    assert secret["spark.hadoop.fs.s3a.access.key"] == "AKIA-x"
    assert not any("s3cr3t-key" in v or "AKIA-x" in v for v in launch.values())
    assert launch["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"  # not a secret: on the command line


def test_the_s3a_artifacts_match_pysparks_hadoop() -> None:
    import pyspark

    from drkit import versions

    shipped = {p.name for p in Path(pyspark.__file__).parent.joinpath("jars").glob("hadoop-client-api-*.jar")}
    assert shipped == {f"hadoop-client-api-{versions.HADOOP_VERSION}.jar"}
    assert f"org.apache.hadoop:hadoop-aws:{versions.HADOOP_VERSION}" in versions.S3A_ARTIFACTS
    assert "software.amazon.awssdk:bundle" in versions.S3A_EXCLUSIONS  # 558 MB: never fetched


def test_an_excluded_artifact_is_left_out_of_every_coordinates_closure() -> None:
    pom = artifacts._pom(("g:a:1", "g:b:2"), ("software.amazon.awssdk:bundle",))
    exclusion = "<exclusion><groupId>software.amazon.awssdk</groupId><artifactId>bundle</artifactId></exclusion>"
    assert pom.count(exclusion) == 2
    assert "<exclusion>" not in artifacts._pom(("g:a:1",))
