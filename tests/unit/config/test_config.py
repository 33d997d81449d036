"""drkit.config: the example loads, each bad config fails with one exact keyed message, no secret shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drkit.config import MASK, is_secret_key, load_config, masked_dump, parse_config
from drkit.core.exactly_once import TRANSACTION_SLOTS, Delivery
from drkit.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "drkit.local.toml"

TWO_CLUSTERS = """\
[clusters.A]
bootstrap_servers = "127.0.0.1:19092"

[clusters.B]
bootstrap_servers = "127.0.0.1:19102"
"""

ONE_FLOW = (
    TWO_CLUSTERS
    + """
[[flows]]
source = "A"
target = "B"
"""
)


def write_toml(tmp_path: Path, text: str, name: str = "drkit.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value)


# --- the example -----------------------------------------------------------------------------------


def test_example_config_loads_with_both_flows() -> None:
    cfg = load_config(EXAMPLE)
    assert sorted(cfg.clusters) == ["A", "B"]
    assert cfg.clusters["A"].bootstrap_servers == "127.0.0.1:19092"
    assert cfg.clusters["B"].bootstrap_servers == "127.0.0.1:19102"
    assert cfg.clusters["A"].properties == {}
    assert [f.name for f in cfg.flows] == ["A->B", "B->A"]
    assert cfg.spark.master == "local[2]"
    assert cfg.source_path == str(EXAMPLE)


def test_example_config_fills_defaults() -> None:
    cfg = load_config(EXAMPLE)
    for flow in cfg.flows:
        assert flow.replication_policy == "prefix"
        assert flow.separator == "."
        assert flow.topics.include == ["demo\\..*"]
        assert flow.topics.exclude == []
        assert flow.mirror.trigger_interval_seconds == 1.0
        assert flow.mirror.max_offsets_per_trigger == 100_000
        assert flow.mirror.target_replication_factor == -1
        assert flow.mirror.producer == {}
        assert flow.mirror.consumer == {}
        assert flow.checkpoint.interval_seconds == 2.0
        assert flow.checkpoint.sync_group_offsets is False
        assert flow.checkpoint.max_age_seconds == 300.0
    back = cfg.flow("B->A")
    assert back.groups.include == [".*"]  # not set in the file for B->A: the default
    assert back.groups.exclude == []
    assert cfg.flow("A->B").policy().target_topic("A", "demo.orders") == "A.demo.orders"
    assert back.policy().target_topic("B", "demo.orders") == "B.demo.orders"


def test_state_root_is_relative_to_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the working directory must not matter
    assert load_config(EXAMPLE).state_root() == (REPO / ".drkit" / "state").resolve()

    nested = tmp_path / "etc" / "drkit"
    nested.mkdir(parents=True)
    path = write_toml(nested, TWO_CLUSTERS + '\n[state]\nroot = "state"\n')
    assert load_config(path).state_root() == (nested / "state").resolve()

    path = write_toml(nested, TWO_CLUSTERS + f'\n[state]\nroot = "{tmp_path / "abs"}"\n', "abs.toml")
    assert load_config(path).state_root() == (tmp_path / "abs").resolve()


def test_default_state_root_and_no_flows(tmp_path: Path) -> None:
    cfg = load_config(write_toml(tmp_path, TWO_CLUSTERS))
    assert cfg.flows == []
    assert cfg.state_root() == (tmp_path / ".drkit" / "state").resolve()


def test_parse_config_without_a_file_resolves_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = parse_config({"clusters": {"A": {"bootstrap_servers": "h:1"}}, "state": {"root": "st"}})
    assert cfg.source_path is None
    assert cfg.state_root() == (tmp_path / "st").resolve()


def test_several_bootstrap_servers_and_scalar_properties(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """\
[clusters.A]
bootstrap_servers = "k1.example.com:9092, k2.example.com:9093,[::1]:9094"
properties = { "request.timeout.ms" = 30000, "enable.ssl.certificate.verification" = false }
""",
    )
    cluster = load_config(path).clusters["A"]
    assert cluster.properties == {
        "request.timeout.ms": "30000",
        "enable.ssl.certificate.verification": "false",
    }


def test_exactly_once_delivery_and_its_slots(tmp_path: Path) -> None:
    default = load_config(write_toml(tmp_path, ONE_FLOW)).flows[0].mirror
    assert default.delivery is Delivery.AT_LEAST_ONCE
    assert default.transaction_slots == TRANSACTION_SLOTS
    text = ONE_FLOW + '\n[flows.mirror]\ndelivery = "exactly_once"\ntransaction_slots = 7\n'
    mirror = load_config(write_toml(tmp_path, text, "eo.toml")).flows[0].mirror
    assert mirror.delivery is Delivery.EXACTLY_ONCE
    assert mirror.transaction_slots == 7


# --- bad configs: one exact message each, naming the file and the key ---------------------------------

BAD_CONFIGS = [
    pytest.param(
        "a = 1\na = 2\n",
        "not valid TOML: Cannot overwrite a value (at line 2, column 6)",
        id="invalid-toml",
    ),
    pytest.param(
        '[state]\nroot = "x"\n',
        "clusters: required key is missing",
        id="no-clusters",
    ),
    pytest.param(
        "clusters = {}\n",
        'clusters: define at least one cluster: [clusters.<alias>] with bootstrap_servers = "host:port"',
        id="empty-clusters",
    ),
    pytest.param(
        'colour = "blue"\n' + TWO_CLUSTERS,
        "colour: unknown key",
        id="unknown-top-level-key",
    ),
    pytest.param(
        'source_path = "/elsewhere/drkit.toml"\n' + TWO_CLUSTERS,
        "source_path: unknown key",
        id="source-path-is-not-a-config-key",
    ),
    pytest.param(
        '[clusters.A]\nbootstrap_servers = "h:1"\nbootstrap = "h:2"\n',
        "clusters.A.bootstrap: unknown key",
        id="unknown-key-in-cluster",
    ),
    pytest.param(
        '[clusters.A]\nproperties = { "security.protocol" = "SSL" }\n',
        "clusters.A.bootstrap_servers: required key is missing",
        id="missing-bootstrap-servers",
    ),
    pytest.param(
        '[clusters.A]\nbootstrap_servers = "localhost"\n',
        "clusters.A.bootstrap_servers: expected host:port[,host:port...] with a port from 1 to 65535",
        id="bootstrap-without-port",
    ),
    pytest.param(
        '[clusters.A]\nbootstrap_servers = "localhost:99999"\n',
        "clusters.A.bootstrap_servers: expected host:port[,host:port...] with a port from 1 to 65535",
        id="bootstrap-port-out-of-range",
    ),
    pytest.param(
        '[clusters.A]\nbootstrap_servers = "h:1,"\n',
        "clusters.A.bootstrap_servers: expected host:port[,host:port...] with a port from 1 to 65535; entry 2 of 2 "
        "is not",
        id="bootstrap-trailing-comma",
    ),
    pytest.param(
        '[clusters.A]\nbootstrap_servers = ""\n',
        "clusters.A.bootstrap_servers: must not be empty",
        id="bootstrap-empty",
    ),
    pytest.param(
        "[clusters.A]\nbootstrap_servers = 9092\n",
        "clusters.A.bootstrap_servers: input should be a valid string",
        id="bootstrap-not-a-string",
    ),
    pytest.param(
        '[clusters."a b"]\nbootstrap_servers = "h:1"\n',
        "clusters: cluster alias 'a b' must start with a letter or digit and contain only letters, digits, '_' or '-'",
        id="bad-cluster-alias",
    ),
    pytest.param(
        '[clusters."A.east"]\nbootstrap_servers = "h:1"\n',
        "clusters: cluster alias 'A.east' must start with a letter or digit and contain only letters, "
        "digits, '_' or '-'",
        id="cluster-alias-with-separator",
    ),
    pytest.param(
        TWO_CLUSTERS + '\n[[flows]]\nsource = "C"\ntarget = "B"\n',
        "flows[0].source: unknown cluster 'C'; defined clusters: A, B",
        id="flow-unknown-source",
    ),
    pytest.param(
        TWO_CLUSTERS + '\n[[flows]]\nsource = "A"\ntarget = "Z"\n',
        "flows[0].target: unknown cluster 'Z'; defined clusters: A, B",
        id="flow-unknown-target",
    ),
    pytest.param(
        TWO_CLUSTERS + '\n[[flows]]\nsource = "A"\ntarget = "A"\n',
        "flows[0].target: a flow cannot mirror cluster 'A' to itself",
        id="flow-to-itself",
    ),
    pytest.param(
        ONE_FLOW + '\n[[flows]]\nsource = "B"\ntarget = "A"\n\n[[flows]]\nsource = "A"\ntarget = "B"\n',
        "flows[2]: flow A->B is defined twice",
        id="same-flow-twice",
    ),
    pytest.param(
        TWO_CLUSTERS + '\n[[flows]]\nsource = "A"\n',
        "flows[0].target: required key is missing",
        id="flow-without-target",
    ),
    pytest.param(
        ONE_FLOW + 'topic = ["orders"]\n',
        "flows[0].topic: unknown key",
        id="unknown-key-in-flow",
    ),
    pytest.param(
        ONE_FLOW + 'topics.include = ["orders.(*"]\n',
        "flows[0].topics.include[0]: not a valid regular expression: nothing to repeat at position 8",
        id="invalid-include-regex",
    ),
    pytest.param(
        ONE_FLOW + 'groups.exclude = ["ok", "(unclosed"]\n',
        "flows[0].groups.exclude[1]: not a valid regular expression: missing ), unterminated subpattern at position 0",
        id="invalid-group-exclude-regex",
    ),
    pytest.param(
        ONE_FLOW + 'topics.include = "orders.*"\n',
        "flows[0].topics.include: input should be a valid list",
        id="include-not-a-list",
    ),
    pytest.param(
        ONE_FLOW + 'replication_policy = "mirror"\n',
        "flows[0].replication_policy: must be one of 'prefix' or 'identity'",
        id="unknown-replication-policy",
    ),
    pytest.param(
        ONE_FLOW + 'separator = ""\n',
        "flows[0].separator: must not be empty",
        id="empty-separator",
    ),
    pytest.param(
        TWO_CLUSTERS + '\n[[flows]]\nsource = "A"\ntarget = "B"\n'
        '\n[[flows]]\nsource = "B"\ntarget = "A"\nreplication_policy = "identity"\n',
        "flows[1].replication_policy: flow B->A uses the identity policy while flow A->B uses the prefix policy, so "
        "copies of copies would be created forever under ever longer names; use the same policy both ways "
        "(prefix, or identity: records that came from a flow's target are never copied back)",
        id="identity-one-way-of-two",
    ),
    pytest.param(
        ONE_FLOW + "mirror.trigger_interval_seconds = 0\n",
        "flows[0].mirror.trigger_interval_seconds: must be at least 0.1 seconds",
        id="trigger-interval-zero",
    ),
    pytest.param(
        ONE_FLOW + "mirror.trigger_interval_seconds = -2.5\n",
        "flows[0].mirror.trigger_interval_seconds: must be at least 0.1 seconds",
        id="trigger-interval-negative",
    ),
    pytest.param(
        ONE_FLOW + "mirror.max_offsets_per_trigger = 0\n",
        "flows[0].mirror.max_offsets_per_trigger: input should be greater than 0",
        id="max-offsets-zero",
    ),
    pytest.param(
        ONE_FLOW + "mirror.target_replication_factor = 0\n",
        "flows[0].mirror.target_replication_factor: must be -1 (broker default) or a number from 1 to 32767",
        id="replication-factor-zero",
    ),
    pytest.param(
        ONE_FLOW + "mirror.target_replication_factor = -3\n",
        "flows[0].mirror.target_replication_factor: must be -1 (broker default) or a number from 1 to 32767",
        id="replication-factor-below-minus-one",
    ),
    pytest.param(
        ONE_FLOW + 'checkpoint.interval_seconds = "soon"\n',
        "flows[0].checkpoint.interval_seconds: input should be a valid number, unable to parse string as a number",
        id="checkpoint-interval-not-a-number",
    ),
    pytest.param(
        ONE_FLOW + 'mirror.producer = { "acks" = "1" }\n',
        "flows[0].mirror.producer: 'acks' is set by drkit for no-loss delivery and cannot be overridden",
        id="producer-acks",
    ),
    pytest.param(
        ONE_FLOW + 'mirror.producer = { "enable.idempotence" = "false" }\n',
        "flows[0].mirror.producer: 'enable.idempotence' is set by drkit for no-loss delivery and cannot be overridden",
        id="producer-idempotence",
    ),
    pytest.param(
        # An unquoted dotted key is a nested TOML table; it must not slip past the check.
        ONE_FLOW + "\n[flows.mirror.producer]\nenable.idempotence = false\n",
        "flows[0].mirror.producer: 'enable.idempotence' is set by drkit for no-loss delivery and cannot be overridden",
        id="producer-idempotence-dotted-key",
    ),
    pytest.param(
        # Each slot's transactional id is drkit's (drkit.core.exactly_once): one id per partition, everywhere.
        ONE_FLOW + 'mirror.producer = { "transactional.id" = "x" }\n',
        "flows[0].mirror.producer: 'transactional.id' is set by drkit for no-loss delivery and cannot be overridden",
        id="producer-transactional-id",
    ),
    pytest.param(
        ONE_FLOW + '\n[flows.mirror]\ndelivery = "exactly-once"\n',
        "flows[0].mirror.delivery: input should be 'at_least_once' or 'exactly_once'",
        id="unknown-delivery",
    ),
    pytest.param(
        ONE_FLOW + "mirror.transaction_slots = 0\n",
        "flows[0].mirror.transaction_slots: input should be greater than or equal to 1",
        id="no-transaction-slots",
    ),
    pytest.param(
        ONE_FLOW + "mirror.transaction_slots = 1025\n",
        "flows[0].mirror.transaction_slots: input should be less than or equal to 1024",
        id="too-many-transaction-slots",
    ),
    pytest.param(
        ONE_FLOW + 'mirror.consumer = { "group.id" = "mine" }\n',
        "flows[0].mirror.consumer: 'group.id' is set by drkit and cannot be overridden",
        id="consumer-group-id",
    ),
    pytest.param(
        '[clusters.A]\nbootstrap_servers = "h:1"\nproperties = { "ssl.ca.location" = ["a", "b"] }\n',
        "clusters.A.properties: property 'ssl.ca.location' must be a string, number or boolean",
        id="property-list-value",
    ),
    pytest.param(
        '[clusters.A]\nbootstrap_servers = "h:1"\n'
        'properties = { "sasl.mechanism" = "PLAIN", sasl = { mechanism = "SCRAM-SHA-512" } }\n',
        "clusters.A.properties: property 'sasl.mechanism' is defined twice",
        id="property-defined-twice",
    ),
    pytest.param(
        "[clusters.A]\nfoo = 1\nbar = 2\n",
        "clusters.A.bootstrap_servers: required key is missing (and 2 more problems)",
        id="several-problems-counted",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_CONFIGS)
def test_bad_config_names_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write_toml(tmp_path, text)
    assert config_error(path) == f"{path}: {message}"


def test_missing_config_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    assert config_error(path) == f"{path}: config file not found (create one from examples/drkit.local.toml)"


def test_config_path_is_a_directory(tmp_path: Path) -> None:
    assert config_error(tmp_path) == f"{tmp_path}: is a directory, not a config file; give the path of a TOML file"


def test_unset_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRKIT_TEST_UNSET_PW", raising=False)
    path = write_toml(
        tmp_path,
        """\
[clusters.A]
bootstrap_servers = "h:1"
properties = { "sasl.password" = "${env:DRKIT_TEST_UNSET_PW}" }
""",
    )
    assert config_error(path) == (
        f"{path}: clusters.A.properties.sasl.password: environment variable DRKIT_TEST_UNSET_PW is not set"
    )


def test_unset_environment_variable_in_a_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRKIT_TEST_UNSET_TOPIC", raising=False)
    path = write_toml(tmp_path, ONE_FLOW + 'topics.include = ["a", "${env:DRKIT_TEST_UNSET_TOPIC}"]\n')
    assert config_error(path) == (
        f"{path}: flows[0].topics.include[1]: environment variable DRKIT_TEST_UNSET_TOPIC is not set"
    )


def test_environment_variables_are_substituted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRKIT_TEST_HOST", "kafka-b.example.com")
    path = write_toml(tmp_path, '[clusters.B]\nbootstrap_servers = "${env:DRKIT_TEST_HOST}:9093"\n')
    assert load_config(path).clusters["B"].bootstrap_servers == "kafka-b.example.com:9093"


# --- secrets -----------------------------------------------------------------------------------------

SECRET = "s3cr3t-value"
SECRET_CONFIG = (
    TWO_CLUSTERS
    + """
[clusters.C]
bootstrap_servers = "kafka-c.example.com:9093"

[clusters.C.properties]
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "SCRAM-SHA-512"
"sasl.username" = "drkit"
"sasl.password" = "${env:PW}"
"ssl.key.password" = "key-${env:PW}"
"sasl.jaas.config" = 'org.apache.kafka.common.security.scram.ScramLoginModule required password="${env:PW}";'

[[flows]]
source = "A"
target = "C"
mirror.producer = { "compression.type" = "zstd", "sasl.password" = "${env:PW}" }
"""
)


@pytest.fixture
def secret_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PW", SECRET)
    return write_toml(tmp_path, SECRET_CONFIG)


def test_secrets_are_loaded_into_the_model(secret_config: Path) -> None:
    props = load_config(secret_config).clusters["C"].properties
    assert props["sasl.password"] == SECRET
    assert props["ssl.key.password"] == f"key-{SECRET}"
    assert props["sasl.jaas.config"] == (
        f'org.apache.kafka.common.security.scram.ScramLoginModule required password="{SECRET}";'
    )
    assert props["security.protocol"] == "SASL_SSL"


def test_masked_dump_hides_secrets_and_keeps_the_rest(secret_config: Path) -> None:
    cfg = load_config(secret_config)
    dump = masked_dump(cfg)
    assert dump["clusters"]["C"]["properties"] == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "drkit",
        "sasl.password": MASK,
        "ssl.key.password": MASK,
        "sasl.jaas.config": MASK,
    }
    assert dump["flows"][0]["mirror"]["producer"] == {"compression.type": "zstd", "sasl.password": MASK}
    assert MASK == "********"
    assert "source_path" not in dump
    text = json.dumps(dump)
    assert SECRET not in text
    # masking is on the dump only: the model still holds the real values
    assert cfg.clusters["C"].properties["sasl.password"] == SECRET


def test_dotted_property_keys_are_flattened_and_masked(tmp_path: Path) -> None:
    # TOML turns unquoted dotted keys into nested tables; they mean the dotted property names.
    path = write_toml(
        tmp_path,
        """\
[clusters.A]
bootstrap_servers = "h:1"

[clusters.A.properties]
security.protocol = "SASL_SSL"
sasl.password = "dotted-secret"
ssl.endpoint.identification.algorithm = "https"
""",
    )
    cfg = load_config(path)
    assert cfg.clusters["A"].properties == {
        "security.protocol": "SASL_SSL",
        "sasl.password": "dotted-secret",
        "ssl.endpoint.identification.algorithm": "https",
    }
    dump = masked_dump(cfg)
    assert dump["clusters"]["A"]["properties"]["sasl.password"] == MASK
    assert "dotted-secret" not in json.dumps(dump)


def test_spark_conf_secrets_are_masked(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        TWO_CLUSTERS
        + """
[spark.conf]
"spark.hadoop.fs.s3a.secret.key" = "aws-secret"
spark.sql.shuffle.partitions = 4
""",
    )
    cfg = load_config(path)
    key = "spark.hadoop.fs.s3a.secret.key"
    assert cfg.spark.conf == {key: "aws-secret", "spark.sql.shuffle.partitions": "4"}
    dump = masked_dump(cfg)
    assert dump["spark"]["conf"] == {key: MASK, "spark.sql.shuffle.partitions": "4"}
    assert "aws-secret" not in json.dumps(dump)


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "sasl.jaas.config",
        "SASL.JAAS.CONFIG",
        "sasl.oauthbearer.client.secret",
        "ssl.key.pem",
        "ssl.keystore.key",
        "basic.auth.user.info",
        "sasl.oauthbearer.token",
        "aws.credentials",
        "spark.hadoop.fs.s3a.secret.key",
    ],
)
def test_is_secret_key_positive(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "security.protocol",
        "sasl.mechanism",
        "sasl.username",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.endpoint.identification.algorithm",
        "compression.type",
        "bootstrap.servers",
        "client.id",
    ],
)
def test_is_secret_key_negative(key: str) -> None:
    assert not is_secret_key(key)


# --- choosing a flow ----------------------------------------------------------------------------------


def test_flow_none_with_one_flow_returns_it(tmp_path: Path) -> None:
    cfg = load_config(write_toml(tmp_path, ONE_FLOW))
    assert cfg.flow(None).name == "A->B"
    assert cfg.flow("A->B") is cfg.flow(None)
    assert cfg.flow("A -> B").name == "A->B"
    assert cfg.flows_named(None) == [cfg.flow("A->B")]


def test_flow_none_with_two_flows_asks_to_choose() -> None:
    cfg = load_config(EXAMPLE)
    with pytest.raises(ConfigError) as info:
        cfg.flow(None)
    assert str(info.value) == "choose a flow with --flow (defined: A->B, B->A)"
    assert [f.name for f in cfg.flows_named(None)] == ["A->B", "B->A"]
    assert [f.name for f in cfg.flows_named("B->A")] == ["B->A"]


def test_unknown_flow_lists_the_defined_ones() -> None:
    cfg = load_config(EXAMPLE)
    with pytest.raises(ConfigError) as info:
        cfg.flow("X->Y")
    assert str(info.value) == "unknown flow 'X->Y'; defined flows: A->B, B->A"
    with pytest.raises(ConfigError) as info:
        cfg.flows_named("A->C")
    assert str(info.value) == "unknown flow 'A->C'; defined flows: A->B, B->A"


def test_flow_without_any_flows(tmp_path: Path) -> None:
    cfg = load_config(write_toml(tmp_path, TWO_CLUSTERS))
    with pytest.raises(ConfigError) as info:
        cfg.flow(None)
    assert str(info.value) == "choose a flow with --flow (defined: none)"
    with pytest.raises(ConfigError) as info:
        cfg.flow("A->B")
    assert str(info.value) == "unknown flow 'A->B'; defined flows: none"
