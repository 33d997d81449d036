"""Where the state lives (drkit.core.storage): the root's parsing and what each engine is given."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.storage import (
    DEFAULT_REGION,
    RootUri,
    Scheme,
    StorageSettings,
    delta_options,
    hadoop_settings,
    parse_root,
    s3_client_settings,
    storage_problem,
)

MINIO = StorageSettings(endpoint="http://127.0.0.1:9000", access_key_id="id", secret_access_key="shh", path_style=True)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("s3a://bucket/drkit", RootUri(Scheme.S3A, "bucket", "drkit")),
        ("S3A://bucket/a/b/", RootUri(Scheme.S3A, "bucket", "a/b")),  # scheme case, one trailing '/'
        ("s3://bucket", RootUri(Scheme.S3, "bucket", "")),
        ("gs://bucket/x", RootUri(Scheme.GS, "bucket", "x")),
        ("abfss://box@acct.dfs.core.windows.net/x", RootUri(Scheme.ABFSS, "box@acct.dfs.core.windows.net", "x")),
        ("hdfs://nn:8020/drkit", RootUri(Scheme.HDFS, "nn:8020", "drkit")),
        ("hdfs:///drkit", RootUri(Scheme.HDFS, "", "drkit")),  # the cluster's default file system
        ("file:///var/drkit", "/var/drkit"),
        ("file://localhost/var/drkit", "/var/drkit"),
        (".drkit/state", ".drkit/state"),
        ("/abs/state", "/abs/state"),
        ("~/state", "~/state"),
        ("my:folder", "my:folder"),  # a colon in a local name that is no scheme drkit knows
    ],
)
def test_a_root_is_a_uri_or_a_local_path(text: str, expected: RootUri | str) -> None:
    assert parse_root(text) == expected


@pytest.mark.parametrize(
    "text, reason",
    [
        ("s3a:bucket/drkit", "starts with 's3a:' but not 's3a://'"),
        ("S3:bucket", "starts with 's3:' but not 's3://'"),
        ("file:relative", "starts with 'file:' but not 'file://'"),
        ("ftp://host/x", "scheme 'ftp' is not one"),
        ("s3n://bucket/x", "scheme 's3n' is not one"),
        ("s3a://", "names no bucket"),
        ("gs:///x", "names no bucket"),
        ("abfss://container/x", "CONTAINER@ACCOUNT"),
        ("s3a://user:pw@bucket/x", "holds no user or password"),
        ("s3a://bucket//x", "empty, '.' or '..' path segment"),
        ("s3a://bucket/a/../b", "empty, '.' or '..' path segment"),
        ("s3a://bucket/x?versionId=1", "is not a URI drkit can read"),
        ("file://host/x", "file:///PATH"),
    ],
)
def test_a_uri_drkit_cannot_use_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=None) as error:
        parse_root(text)
    assert reason in str(error.value)
    assert "pw" not in str(error.value)


@given(st.lists(st.text("abcXYZ09-_.", min_size=1, max_size=8).filter(lambda s: s not in (".", "..")), max_size=4))
def test_a_uri_prints_back_as_it_parses(parts: list[str]) -> None:
    text = "s3a://bucket" + "".join(f"/{p}" for p in parts)
    root = parse_root(text)
    assert isinstance(root, RootUri) and str(root) == text and parse_root(str(root)) == root


def test_the_digest_names_one_root() -> None:
    one, two = RootUri(Scheme.S3A, "b", "x"), RootUri(Scheme.S3A, "b", "y")
    assert one.digest == RootUri(Scheme.S3A, "b", "x").digest != two.digest
    assert one.digest.isalnum() and len(one.digest) == 16


@pytest.mark.parametrize(
    "root, settings, expected",
    [
        (None, StorageSettings(), None),
        (None, StorageSettings(endpoint="http://h:1"), ("endpoint", "applies to an object-store root only")),
        (None, StorageSettings(options=(("k", "v"),)), ("options", "applies to an object-store root only")),
        (RootUri(Scheme.S3A, "b"), MINIO, None),
        (RootUri(Scheme.S3A, "b"), StorageSettings(), None),  # the AWS default chain of the host
        (RootUri(Scheme.GS, "b"), StorageSettings(options=(("google_service_account", "/k.json"),)), None),
        (RootUri(Scheme.GS, "b"), StorageSettings(region="eu"), ("region", "is an S3 setting")),
        (RootUri(Scheme.S3, "b"), StorageSettings(access_key_id="id"), ("secret_access_key", "must be set with")),
        (RootUri(Scheme.S3, "b"), StorageSettings(secret_access_key="s"), ("access_key_id", "must be set with")),
        (RootUri(Scheme.S3, "b"), StorageSettings(session_token="t"), ("session_token", "needs access_key_id")),
        (RootUri(Scheme.S3, "b"), StorageSettings(endpoint="h:9000"), ("endpoint", "must be http://HOST")),
        (RootUri(Scheme.S3, "b"), StorageSettings(endpoint="http://h:9000/path"), ("endpoint", "must be http://")),
        (RootUri(Scheme.S3, "b"), StorageSettings(endpoint="https://s3.example.com/"), None),
    ],
)
def test_storage_settings_that_cannot_apply_are_named(
    root: RootUri | None, settings: StorageSettings, expected: tuple[str, str] | None
) -> None:
    found = storage_problem(root, settings)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found[0] == expected[0] and expected[1] in found[1]


def test_delta_rs_gets_s3s_settings_under_object_stores_names() -> None:
    options = delta_options(RootUri(Scheme.S3A, "b", "x"), MINIO)
    assert options == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": DEFAULT_REGION,
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "shh",
        "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_CONDITIONAL_PUT": "etag",
    }
    https = delta_options(RootUri(Scheme.S3, "b"), StorageSettings(endpoint="https://h", region="eu-west-1"))
    assert "AWS_ALLOW_HTTP" not in https and https["AWS_REGION"] == "eu-west-1"


def test_free_options_pass_to_delta_rs_and_win() -> None:
    settings = StorageSettings(options=(("AWS_CONDITIONAL_PUT", "disabled"), ("x", "y")))
    assert delta_options(RootUri(Scheme.S3A, "b"), settings)["AWS_CONDITIONAL_PUT"] == "disabled"
    assert delta_options(RootUri(Scheme.GS, "b"), settings) == {"AWS_CONDITIONAL_PUT": "disabled", "x": "y"}


def test_the_s3_client_gets_the_same_endpoint_and_keys() -> None:
    assert s3_client_settings(MINIO) == {
        "region": DEFAULT_REGION,
        "endpoint_override": "127.0.0.1:9000",
        "scheme": "http",
        "access_key": "id",
        "secret_key": "shh",
        "force_virtual_addressing": False,
    }
    aws = s3_client_settings(StorageSettings(region="eu-west-1"))
    assert aws == {"region": "eu-west-1", "force_virtual_addressing": True}


def test_spark_gets_s3a_settings_with_the_same_endpoint_and_keys() -> None:
    conf = hadoop_settings(RootUri(Scheme.S3A, "b"), MINIO)
    assert conf == {
        "spark.hadoop.fs.s3a.endpoint.region": DEFAULT_REGION,
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.access.key": "id",
        "spark.hadoop.fs.s3a.secret.key": "shh",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }
    s3 = hadoop_settings(
        RootUri(Scheme.S3, "b"), StorageSettings(access_key_id="i", secret_access_key="s", session_token="t")
    )
    assert s3["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"  # s3:// through S3A
    assert s3["spark.hadoop.fs.s3a.session.token"] == "t"
    assert s3["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    assert hadoop_settings(RootUri(Scheme.GS, "b"), StorageSettings()) == {}


def test_secrets_never_show_in_a_settings_repr() -> None:
    text = repr(StorageSettings(access_key_id="AKIA-id", secret_access_key="shh-secret", session_token="tok-en"))
    assert "shh-secret" not in text and "tok-en" not in text and "AKIA-id" not in text
