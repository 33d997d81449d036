"""A MirrorMaker 2 file maps to a drkit config that keeps MM2's meaning, accounts for every property, and
never holds a secret: Kafka's own example files (tests/fixtures/mm2), then each rule on a small file."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.config import parse_config
from drkit.config.mm2 import (
    DropReason,
    Mm2Mapping,
    generated_toml,
    map_mm2,
    parse_mm2_properties,
    read_mm2_properties,
)
from drkit.config.mm2.catalogue import GROUPS_EXCLUDE_DEFAULT, TOPICS_EXCLUDE_DEFAULT
from drkit.config.properties import librdkafka_problem
from drkit.errors import ConfigError
from drkit.kafka.clients import java_properties

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mm2"
HEARTBEATS = ["heartbeats", r".+\.heartbeats"]


def mapped(text: str) -> Mm2Mapping:
    return map_mm2(parse_mm2_properties(text.encode("latin-1")), librdkafka_problem)


def fixture(name: str) -> Mm2Mapping:
    return map_mm2(read_mm2_properties(FIXTURES / name), librdkafka_problem)


def fate(m: Mm2Mapping) -> dict[str, str]:
    """Each MM2 key -> "carried" or its drop reason; a key both carried and dropped fails here."""
    out: dict[str, str] = {c.key: "carried" for c in m.carried}
    for d in m.dropped:
        assert d.key not in out, f"{d.key} is both carried and dropped"
        out[d.key] = d.reason.value
    return out


def loaded(m: Mm2Mapping, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The generated TOML as drkit loads it, with the environment variables set."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    data = tomllib.loads(generated_toml("test.properties", m))
    return parse_config(data).model_dump()


# -- Kafka's own files


def test_kafkas_sample_file_maps_both_flows_with_mm2s_defaults() -> None:
    m = fixture("connect-mirror-maker.properties")
    props = read_mm2_properties(FIXTURES / "connect-mirror-maker.properties")
    clusters = m.config["clusters"]
    assert clusters == {
        "A": {"bootstrap_servers": "A_host1:9092,A_host2:9092,A_host3:9092"},
        "B": {"bootstrap_servers": "B_host1:9092,B_host2:9092,B_host3:9092"},
    }
    flows = {(f["source"], f["target"]): f for f in m.config["flows"]}
    assert set(flows) == {("A", "B"), ("B", "A")}
    for flow in flows.values():
        assert flow["replication_policy"] == "prefix"
        assert flow["topics"] == {"include": [".*"], "exclude": [*TOPICS_EXCLUDE_DEFAULT, *HEARTBEATS]}
        assert flow["groups"] == {"include": [".*"], "exclude": list(GROUPS_EXCLUDE_DEFAULT)}
        assert flow["mirror"] == {"target_replication_factor": 1}
    assert fate(m) == {
        "clusters": "carried",
        "A.bootstrap.servers": "carried",
        "B.bootstrap.servers": "carried",
        "A->B.enabled": "carried",
        "A->B.topics": "carried",
        "B->A.enabled": "carried",
        "B->A.topics": "carried",
        "replication.factor": "carried",
        "checkpoints.topic.replication.factor": "internal_topic",
        "heartbeats.topic.replication.factor": "internal_topic",
        "offset-syncs.topic.replication.factor": "internal_topic",
        "offset.storage.replication.factor": "connect_worker",
        "status.storage.replication.factor": "connect_worker",
        "config.storage.replication.factor": "connect_worker",
    }
    assert set(fate(m)) == set(props.values)  # the whole file, nothing more


def test_the_docs_first_example_keeps_its_topic_list() -> None:
    m = fixture("docs-basic.properties")
    (flow,) = m.config["flows"]
    assert (flow["source"], flow["target"]) == ("primary", "secondary")
    assert flow["topics"]["include"] == ["foobar-topic", "quux-.*"]
    assert m.dropped == ()


def test_the_docs_client_security_and_flow_examples_together(monkeypatch: pytest.MonkeyPatch) -> None:
    m = fixture("docs-us-west-us-east.properties")
    text = generated_toml("docs-us-west-us-east.properties", m)
    assert "my-secret-password" not in text
    assert "my-secret-password" not in repr(m)
    (flow,) = m.config["flows"]
    assert flow["separator"] == "_"
    assert flow["topics"]["include"] == ["foo.*"]
    assert flow["topics"]["exclude"][-1] == ".+_heartbeats"  # MM2's heartbeat copies under this separator
    assert flow["groups"]["include"] == ["bar.*"]
    assert flow["mirror"] == {"producer": {"compression.type": "gzip"}}
    east = m.config["clusters"]["us-east"]["properties"]
    assert east["security.protocol"] == "SSL"
    assert east["ssl.truststore.location"] == "/path/to/truststore.jks"  # for Spark's Java client
    assert east["ssl.truststore.password"] == "${env:DRKIT_US_EAST_SSL_TRUSTSTORE_PASSWORD}"
    assert {s.name for s in m.secrets} == {
        "DRKIT_US_EAST_SSL_TRUSTSTORE_PASSWORD",
        "DRKIT_US_EAST_SSL_KEYSTORE_PASSWORD",
        "DRKIT_US_EAST_SSL_KEY_PASSWORD",
    }
    reasons = fate(m)
    assert reasons["us-west.consumer.isolation.level"] == "always"
    assert reasons["us-east.producer.buffer.memory"] == "client_unsupported"
    assert reasons["us-west.admin.bootstrap.servers"] == "no_equivalent"
    assert reasons["us-west->us-east.emit.heartbeats"] == "unknown"  # the docs' typo for emit.heartbeats.enabled
    assert reasons["topics"] == reasons["groups"] == "overridden"
    assert reasons["tasks.max"] == "no_equivalent"
    for worker in ("listeners", "us-west.offset.storage.topic", "us-east.exactly.once.source.support"):
        assert reasons[worker] == "connect_worker"
    assert any("JKS truststore" in n and "ssl.ca.location" in n for n in m.notes)
    env = {s.name: "x-from-env" for s in m.secrets}
    config = loaded(m, env, monkeypatch)
    assert config["clusters"]["us-east"]["properties"]["ssl.key.password"] == "x-from-env"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        # Java has no end-of-line comments: MM2 would read an alias "us-east   # defines cluster aliases".
        ("docs-config-syntax.properties", "clusters: the value holds ' #...'"),
        # ... and Boolean.parseBoolean("true     # disabled by default") is false: no flow at all.
        ("readme-mm2.properties", "us-west->us-east.enabled: the value holds ' #...'"),
        ("docs-active-passive.properties", "no clusters"),
        (
            "docs-active-active.properties",
            "us-east.bootstrap.servers: missing for cluster us-east of clusters (Us-east",
        ),
        ("docs-multi-cluster.properties", "clusters.west-1.bootstrap_servers: expected host:port"),
    ],
)
def test_the_docs_examples_that_cannot_work_as_written_fail_in_one_line(name: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        generated_toml(name, fixture(name))
    assert str(info.value).startswith(message) or message in str(info.value)
    assert "\n" not in str(info.value)


def test_an_invalid_value_names_the_mm2_property_behind_it() -> None:
    with pytest.raises(ConfigError, match=r"\(from MM2 property west-1\.bootstrap\.servers\)$"):
        generated_toml("x", fixture("docs-multi-cluster.properties"))


# -- the properties format, as Java reads it


def test_java_properties_syntax() -> None:
    props = parse_mm2_properties(
        b"clusters: A,\\\n    B\n"  # ':' separator, a continuation line
        b"A.bootstrap.servers h:1\n"  # whitespace separator
        b"! a comment\n"
        b"B.bootstrap.servers=h:2\n"
        b"A->B.topics = caf\\u00e9, x\\:y\n"  # \u escape, escaped ':'
        b"A->B.topics = last\n"  # the last definition wins
        b"k\\ ey = \xe9\n"  # escaped space in a key; ISO-8859-1 bytes
    )
    assert props.values == {
        "clusters": "A,B",
        "A.bootstrap.servers": "h:1",
        "B.bootstrap.servers": "h:2",
        "A->B.topics": "last",
        "k ey": "é",
    }


def test_a_malformed_unicode_escape_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"not a valid \.properties file"):
        parse_mm2_properties(b"clusters = A\\u00zz\n")


def test_a_missing_file_or_a_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        read_mm2_properties(tmp_path / "nope.properties")
    with pytest.raises(ConfigError, match="is a directory, not a MirrorMaker 2 file"):
        read_mm2_properties(tmp_path)


# -- each rule

BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


@pytest.mark.parametrize(
    ("mechanism", "module"),
    [
        ("SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
        ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
    ],
)
def test_a_plain_or_scram_jaas_config_becomes_user_and_password_and_derives_back(
    mechanism: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = mapped(
        BASE + "A.security.protocol = SASL_SSL\n"
        f"A.sasl.mechanism = {mechanism}\n"
        f'A.sasl.jaas.config = {module} required username="mirror" password="pw\\\\"x";\n'
    )
    props = m.config["clusters"]["A"]["properties"]
    assert props["sasl.username"] == "mirror"
    assert props["sasl.password"] == "${env:DRKIT_A_SASL_PASSWORD}"
    assert 'pw"x' not in generated_toml("f", m)
    config = loaded(m, {"DRKIT_A_SASL_PASSWORD": 'pw"x'}, monkeypatch)
    java = java_properties(config["clusters"]["A"]["properties"])  # type: ignore[index]
    assert java["sasl.jaas.config"] == f'{module} required username="mirror" password="pw\\"x";'


def test_another_login_module_is_kept_whole_as_a_secret_with_a_note() -> None:
    m = mapped(
        BASE + "A.sasl.mechanism = GSSAPI\n"
        "A.sasl.jaas.config = com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
        'keyTab="/k.keytab" principal="mm2@REALM";\n'
    )
    props = m.config["clusters"]["A"]["properties"]
    assert props["sasl.jaas.config"] == "${env:DRKIT_A_SASL_JAAS_CONFIG}"
    assert any("GSSAPI" in n and "sasl.kerberos" in n for n in m.notes)


def test_a_pem_truststore_and_keystore_become_librdkafka_locations() -> None:
    m = mapped(
        BASE + "B.security.protocol = SSL\nB.ssl.truststore.type = PEM\nB.ssl.truststore.location = /ca.pem\n"
        "B.ssl.keystore.type = PEM\nB.ssl.keystore.location = /me.pem\nB.ssl.key.password = kp\n"
    )
    assert m.config["clusters"]["B"]["properties"] == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/me.pem",
        "ssl.key.location": "/me.pem",
        "ssl.key.password": "${env:DRKIT_B_SSL_KEY_PASSWORD}",
    }
    assert m.notes and not any("truststore" in n for n in m.notes)
    assert fate(m)["B.ssl.truststore.type"] == "carried"


def test_top_level_security_is_every_clusters_default_unless_it_sets_its_own() -> None:
    m = mapped(BASE + "security.protocol = SSL\nB.security.protocol = PLAINTEXT\n")
    assert m.config["clusters"]["A"]["properties"] == {"security.protocol": "SSL"}
    assert m.config["clusters"]["B"]["properties"] == {"security.protocol": "PLAINTEXT"}
    assert {c.to for c in m.carried if c.key == "security.protocol"} == {"clusters.A.properties.security.protocol"}


def test_secrets_of_two_aliases_that_read_alike_get_two_variables() -> None:
    m = mapped(
        "clusters = a-b, a_b\na-b.bootstrap.servers = x:1\na_b.bootstrap.servers = y:1\n"
        "a-b.sasl.password = one\na_b.sasl.password = two\n"
    )
    assert sorted(s.name for s in m.secrets) == ["DRKIT_A_B_SASL_PASSWORD", "DRKIT_A_B_SASL_PASSWORD_2"]


def test_a_secret_inside_a_value_is_never_written() -> None:
    m = mapped(BASE + "A.sasl.oauthbearer.token.endpoint.url = https://u:hunter22@idp/token\n")
    assert "hunter22" not in generated_toml("f", m)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy", "prefix"),
        ("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", "identity"),
    ],
)
def test_the_replication_policy(policy: str, expected: str) -> None:
    m = mapped(BASE + f"replication.policy.class = {policy}\n")
    assert m.config["flows"][0]["replication_policy"] == expected


def test_a_policy_of_the_users_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"replication\.policy\.class: drkit has DefaultReplicationPolicy"):
        mapped(BASE + "replication.policy.class = com.example.MyPolicy\n")


def test_deprecated_blacklists_count_unless_the_new_name_is_set() -> None:
    alone = mapped(BASE + "topics.blacklist = secret.*\ngroups.blacklist = g1\n")
    assert alone.config["flows"][0]["topics"]["exclude"] == ["secret.*", *HEARTBEATS]
    assert alone.config["flows"][0]["groups"]["exclude"] == ["g1"]
    both = mapped(BASE + "topics.blacklist = old\nA->B.topics.exclude = new\n")
    assert both.config["flows"][0]["topics"]["exclude"] == ["new", *HEARTBEATS]
    assert fate(both)["topics.blacklist"] == "superseded"


def test_intervals_switches_and_group_offset_sync() -> None:
    m = mapped(
        BASE + "emit.checkpoints.interval.seconds = 10\nsync.group.offsets.enabled = true\n"
        "emit.heartbeats.enabled = false\nrefresh.topics.interval.seconds = 30\nsync.topic.acls.enabled = false\n"
        "A->B.refresh.topics.enabled = false\nsync.group.offsets.interval.seconds = 5\n"
    )
    flow = m.config["flows"][0]
    assert flow["checkpoint"] == {"interval_seconds": 10, "sync_group_offsets": True}
    assert flow["heartbeats"] == {"interval_seconds": 0}
    assert flow["topology"] == {"sync_acls": False, "refresh_interval_seconds": 0}
    assert fate(m)["sync.group.offsets.interval.seconds"] == "always"
    assert any("sync_group_offsets" in n and "MM2's checkpoints are stopped" in n for n in m.notes)
    parse_config(tomllib.loads(generated_toml("f", m)))


def test_client_overrides_go_to_the_flows_that_use_the_cluster() -> None:
    m = mapped(
        BASE + "A.consumer.fetch.min.bytes = 1024\nB.producer.linger.ms = 50\nB.producer.acks = 1\n"
        "B.consumer.fetch.min.bytes = 1\nA.admin.request.timeout.ms = 5\n"
    )
    assert m.config["flows"][0]["mirror"] == {"consumer": {"fetch.min.bytes": "1024"}, "producer": {"linger.ms": "50"}}
    reasons = fate(m)
    assert reasons["B.producer.acks"] == "always"
    assert reasons["B.consumer.fetch.min.bytes"] == "unused"  # no enabled flow reads from B
    assert reasons["A.admin.request.timeout.ms"] == "no_equivalent"


def test_a_disabled_flows_settings_are_reported_as_such() -> None:
    m = mapped(BASE + "B->A.enabled = false\nB->A.topics = x\n")
    assert [f["source"] for f in m.config["flows"]] == ["A"]
    assert fate(m)["B->A.topics"] == fate(m)["B->A.enabled"] == "disabled_flow"


def test_a_flow_naming_an_unknown_cluster_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^A->C\.enabled: names a flow between clusters that are not in clusters"):
        mapped(BASE + "A->C.enabled = true\n")


def test_a_file_without_flows_gives_clusters_and_says_so() -> None:
    m = mapped("clusters = A\nA.bootstrap.servers = a:1\n")
    assert "flows" not in m.config
    assert any("no flow is enabled" in n for n in m.notes)


# -- the rule over any file: every property accounted for, no secret written

_KEYS = st.sampled_from(
    [
        "topics",
        "groups.exclude",
        "tasks.max",
        "A.sasl.password",
        "A.security.protocol",
        "B.ssl.truststore.password",
        "A.consumer.max.poll.records",
        "B.producer.batch.size",
        "B.producer.buffer.memory",
        "A->B.emit.checkpoints.interval.seconds",
        "B->A.topics",
        "offset.storage.topic",
        "whatever.else",
        "A.admin.retries",
        "sasl.jaas.config",
    ]
)
_VALUES = st.from_regex(r"[a-z0-9.*]{1,12}", fullmatch=True)


@given(st.dictionaries(_KEYS, _VALUES, max_size=8), st.booleans())
def test_every_property_is_carried_or_dropped_and_no_secret_is_written(extra: dict[str, str], reverse: bool) -> None:
    props = dict(parse_mm2_properties(BASE.encode()).values) | extra
    if reverse:
        props["B->A.enabled"] = "true"
    lines = "".join(f"{k} = {v}\n" for k, v in props.items())
    try:
        m = mapped(lines)
        text = generated_toml("f", m)
    except ConfigError:
        return  # a value drkit cannot use (e.g. an interval that is not a number): refused in one line
    assert set(fate(m)) == set(props)
    secrets = ("A.sasl.password", "B.ssl.truststore.password", "sasl.jaas.config")
    # A secret that is also the value of a property that is not secret may appear for that one.
    public = {v for k, v in props.items() if k not in secrets}
    for key in secrets:
        if key in extra and len(extra[key]) >= 4 and extra[key] not in public:
            assert f'"{extra[key]}"' not in text
    assert all(d.reason in DropReason for d in m.dropped)
