"""drkit.config: what validation refuses because a later layer would (Java regex, librdkafka, Spark),
unsafe flow topologies, and config files that are not readable text. Every message names the key."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.config import DrkitConfig, FlowConfig, load_config, parse_config, topology_problem
from drkit.errors import ConfigError

TWO = '[clusters.A]\nbootstrap_servers = "h:1"\n[clusters.B]\nbootstrap_servers = "h:2"\n'
THREE = TWO + '[clusters.C]\nbootstrap_servers = "h:3"\n'
FLOW = TWO + '[[flows]]\nsource = "A"\ntarget = "B"\n'


def error_of(tmp_path: Path, text: str) -> str:
    path = tmp_path / "drkit.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message
    return message[len(f"{path}: ") :]


# --- regular expressions: what Java and Python would reject or read differently ----------------------

REGEXES = [
    ("(?i)orders", "inline flags at position 0 apply to the rest of the expression"),
    ("orders(?i)x", "inline flags at position 6"),
    ("(?u:orders)", "inline flags at position 0: only i, m and s mean the same in Java and Python"),
    ("(?x:o r)", "inline flags at position 0: only i, m and s"),
    ("(?P<name>orders)", "'(?P' at position 0 is Python-only syntax (named groups); Java rejects it"),
    ("(o)(?P=name)", "'(?P' at position 3 is Python-only syntax"),
    ("(?<name>o)", "not a valid regular expression: unknown extension ?<n at position 1"),
    ("orders(?#note)", "'(?#' at position 6 is a Python-only comment; Java rejects it"),
    ("(o)?(?(1)a|b)", "'(?(' at position 4 is a Python-only conditional group; Java rejects it"),
    ("(o)\\1", "'\\1' at position 3 is a backreference or octal escape"),
    ("\\0101", "'\\0' at position 0 is a backreference or octal escape"),
    ("\\U00000041", "'\\U' at position 0 means something else (or nothing) in Java's regex"),
    ("orders{", "'{' at position 6 does not start a repetition {n}, {n,} or {n,m}, which Java rejects"),
    ("x{,3}", "'{' at position 1 does not start a repetition"),
    ("[a[b]]", "'[' at position 2 inside a character class is a nested class in Java"),
    ("[a&&b]", "'&&' at position 2 is a class intersection in Java"),
    ("orders.(*", "not a valid regular expression: nothing to repeat at position 8"),
    ("\\Q.\\E", "not a valid regular expression: bad escape \\Q at position 0"),
]


@pytest.mark.parametrize(("pattern", "message"), REGEXES, ids=[p for p, _ in REGEXES])
@pytest.mark.parametrize("key", ["topics.include", "topics.exclude", "groups.include", "groups.exclude"])
def test_regex_refused_with_its_key(tmp_path: Path, key: str, pattern: str, message: str) -> None:
    toml_pattern = pattern.replace("\\", "\\\\")
    got = error_of(tmp_path, FLOW + f'{key} = ["ok.*", "{toml_pattern}"]\n')
    assert got.startswith(f"flows[0].{key}[1]: {message}"), got
    assert pattern not in got


@pytest.mark.parametrize(
    "pattern", ["(?i:orders)", "(?-i:x)", "(?s:a.b)", "[]a]", "[^]a]", "a{2}", "a{2,}", "a{1,3}", "\\{x\\}.*", "[\\[]"]
)
def test_regex_both_engines_read_alike_is_accepted(tmp_path: Path, pattern: str) -> None:
    path = tmp_path / "drkit.toml"
    path.write_text(FLOW + f'topics.include = ["{pattern.replace(chr(92), chr(92) * 2)}"]\n', encoding="utf-8")
    assert load_config(path).flows[0].topics.include == [pattern]


# --- numbers, Spark, client properties ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "+inf"])
@pytest.mark.parametrize(
    "key",
    [
        "mirror.trigger_interval_seconds",
        "mirror.stop_grace_seconds",
        "mirror.observe_interval_seconds",
        "checkpoint.interval_seconds",
        "checkpoint.max_age_seconds",
    ],
)
def test_non_finite_numbers_are_refused(tmp_path: Path, key: str, value: str) -> None:
    assert error_of(tmp_path, FLOW + f"{key} = {value}\n") == f"flows[0].{key}: input should be a finite number"


def test_non_finite_property_number_is_refused(tmp_path: Path) -> None:
    got = error_of(tmp_path, FLOW + "mirror.producer = { linger.ms = inf }\n")
    assert got == "flows[0].mirror.producer.linger.ms: must be a finite number"


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[1]",
        "local[*]",
        "local[4,2]",
        "local[*,3]",
        "local-cluster[2,1,1024]",
        "spark://h:7077",
        "spark://h1:7077,h2:7077",
        "yarn",
        "k8s://https://k8s.example:6443",
    ],
)
def test_spark_masters_spark_accepts(tmp_path: Path, master: str) -> None:
    path = tmp_path / "drkit.toml"
    path.write_text(TWO + f'[spark]\nmaster = "{master}"\n', encoding="utf-8")
    assert load_config(path).spark.master == master


@pytest.mark.parametrize("master", ["nonsense", "local[0]", "local[x]", "local[2", "spark://h", "mesos://h:5050", ""])
def test_spark_master_nonsense_is_refused(tmp_path: Path, master: str) -> None:
    got = error_of(tmp_path, TWO + f'[spark]\nmaster = "{master}"\n')
    assert got == (
        "spark.master: expected local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn or k8s://HOST:PORT"
    )


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        (
            '"spark.master" = "local[1]"',
            "spark.conf.spark.master: set the master as [spark] master, where it is checked",
        ),
        (
            '"fs.s3a.secret.key" = "x"',
            "spark.conf.fs.s3a.secret.key: Spark ignores properties that do not start with 'spark.'",
        ),
    ],
)
def test_spark_conf_keys(tmp_path: Path, conf: str, message: str) -> None:
    assert error_of(tmp_path, TWO + f"[spark.conf]\n{conf}\n") == message


CLIENT_PROPERTIES = [
    (
        "sasl.client.callback.handler.class",
        "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
        "names a Java class, which drkit's Python Kafka clients (librdkafka) cannot load; use a mechanism "
        "librdkafka supports (for AWS MSK: SASL/SCRAM, or OAUTHBEARER with sasl.oauthbearer.* properties)",
    ),
    ("interceptor.classes", "com.example.Interceptor", "names a Java class"),
    (
        "sasl.mechanisms.typo",
        "PLAIN",
        "unknown Kafka client property (librdkafka, which drkit's Python clients use, does not know it)",
    ),
    ("security.protocol", "SASL_NONSENSE", "invalid value for this Kafka client property"),
    ("socket.timeout.ms", "7", "value is outside the allowed range 10..300000"),
]


@pytest.mark.parametrize(("name", "value", "message"), CLIENT_PROPERTIES, ids=[c[0] for c in CLIENT_PROPERTIES])
def test_client_properties_librdkafka_refuses(tmp_path: Path, name: str, value: str, message: str) -> None:
    got = error_of(tmp_path, TWO + f'[clusters.A.properties]\n"{name}" = "{value}"\n')
    assert got.startswith(f"clusters.A.properties.{name}: {message}"), got
    assert value not in got


def test_producer_properties_are_checked_too(tmp_path: Path) -> None:
    got = error_of(tmp_path, FLOW + 'mirror.producer = { "compression.type" = "brotli" }\n')
    assert got == "flows[0].mirror.producer.compression.type: invalid value for this Kafka client property"


def test_java_only_cluster_properties_are_not_asked_of_librdkafka(tmp_path: Path) -> None:
    path = tmp_path / "drkit.toml"
    path.write_text(
        TWO + '[clusters.A.properties]\n"ssl.truststore.location" = "/x.jks"\n"ssl.truststore.password" = "pw"\n'
        '"sasl.jaas.config" = "x required;"\n"ssl.endpoint.identification.algorithm" = ""\n',
        encoding="utf-8",
    )
    assert len(load_config(path).clusters["A"].properties) == 4


# --- topologies ----------------------------------------------------------------------------------------


def flows_toml(*flows: tuple[str, str, str]) -> str:
    return "".join(f'\n[[flows]]\nsource = "{s}"\ntarget = "{t}"\nreplication_policy = "{p}"\n' for s, t, p in flows)


def test_identity_rings_are_accepted_the_origin_header_stops_records(tmp_path: Path) -> None:
    path = tmp_path / "drkit.toml"
    path.write_text(THREE + flows_toml(("A", "B", "identity"), ("B", "C", "identity"), ("C", "A", "identity")))
    assert len(load_config(path).flows) == 3
    path.write_text(THREE + flows_toml(("A", "B", "identity"), ("B", "A", "identity")))
    assert len(load_config(path).flows) == 2


def test_a_ring_mixing_policies_grows_names_forever(tmp_path: Path) -> None:
    got = error_of(tmp_path, THREE + flows_toml(("A", "B", "identity"), ("B", "C", "identity"), ("C", "A", "prefix")))
    assert got == (
        "flows[0].replication_policy: flows A->B, B->C, C->A form a loop in which no cluster both receives and "
        "sends with the prefix policy, so copies of copies would be created around it forever under ever longer "
        "names; use the prefix policy on two flows in a row of the loop, or the identity policy on all of them"
    )


@pytest.mark.parametrize(
    ("policies", "loops"),
    [
        (("identity", "identity", "prefix"), True),  # C.orders comes back to A and goes round as C.C.orders...
        (("prefix", "identity", "identity"), True),
        (("prefix", "identity", "prefix"), False),  # A receives and sends with prefix: A.x is stopped there
        (("prefix", "prefix", "identity"), False),
        (("prefix", "prefix", "prefix"), False),
    ],
)
def test_ring_of_three_loops_unless_one_cluster_is_prefix_both_ways(
    tmp_path: Path, policies: tuple[str, str, str], loops: bool
) -> None:
    text = THREE + flows_toml(("A", "B", policies[0]), ("B", "C", policies[1]), ("C", "A", policies[2]))
    path = tmp_path / "drkit.toml"
    path.write_text(text, encoding="utf-8")
    if loops:
        with pytest.raises(ConfigError, match="form a loop"):
            load_config(path)
    else:
        assert len(load_config(path).flows) == 3


def test_prefix_ring_with_mixed_separators_is_a_loop(tmp_path: Path) -> None:
    text = THREE + flows_toml(("A", "B", "prefix"), ("B", "C", "prefix"), ("C", "A", "prefix")) + 'separator = "_"\n'
    assert error_of(tmp_path, text).startswith("flows[2].separator: the prefix flows of the loop A->B, B->C, C->A use")


@pytest.mark.parametrize(
    ("a_include", "b_include", "collide"),
    [
        ('[".*"]', '[".*"]', True),
        ('["orders"]', '["orders"]', True),
        ('["orders\\\\..*"]', '["orders\\\\.eu"]', True),
        ('["a\\\\..*"]', '["b\\\\..*"]', False),
        ('["orders"]', '["orders2"]', False),
        ('["orders", "pay.*"]', '["shipping|payments"]', True),
        ('["orders", "pay.*"]', '["shipping|refunds"]', False),
        ('["eu-.*"]', '["e.*"]', True),
        ('["[ab]x.*"]', '["c.*"]', True),  # not provably apart: refused, the message says how to fix
    ],
)
def test_two_identity_flows_into_one_target(tmp_path: Path, a_include: str, b_include: str, collide: bool) -> None:
    text = (
        THREE
        + f'\n[[flows]]\nsource = "A"\ntarget = "C"\nreplication_policy = "identity"\ntopics.include = {a_include}\n'
        + f'\n[[flows]]\nsource = "B"\ntarget = "C"\nreplication_policy = "identity"\ntopics.include = {b_include}\n'
    )
    path = tmp_path / "drkit.toml"
    path.write_text(text, encoding="utf-8")
    if collide:
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert str(info.value) == (
            f"{path}: flows[1].topics.include: flows A->C and B->C both copy into cluster 'C' with the identity "
            "policy and may select the same topic name, so two topics would be written into one; give them "
            "include patterns that start with different literal text, or use the prefix policy"
        )
    else:
        assert len(load_config(path).flows) == 2


ALIASES = ["A", "B", "C", "D"]


def _loops_by_simulation(cfg: DrkitConfig) -> bool:
    """Reference: follow topic 'orders' from every cluster through the real selectors and policies: a loop is
    names that keep growing (copies of copies under new names, forever)."""
    todo = [(alias, "orders") for alias in cfg.clusters]
    seen = set(todo)
    while todo:
        state = todo.pop()
        if len(state[1]) > 60 or len(seen) > 3000:
            return True  # names keep growing: copies of copies, forever
        cluster, name = state
        for flow in cfg.flows:
            if flow.source == cluster and cfg.topic_selector(flow).matches(name):
                nxt = (flow.target, flow.policy().target_topic(flow.source, name))
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
    # A cycle among finitely many names (identity flows all the way round) is not a loop: the mirror never
    # copies a record whose origin headers name the flow's target, so no record goes round twice.
    return False


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(ALIASES),
            st.sampled_from(ALIASES),
            st.sampled_from(["prefix", "identity"]),
            st.sampled_from([".", "_"]),
        ),
        max_size=6,
    )
)
def test_loop_rule_agrees_with_simulating_the_copies(raw: list[tuple[str, str, str, str]]) -> None:
    flows: dict[str, FlowConfig] = {}
    for source, target, policy, separator in raw:
        if source != target:
            flows[f"{source}->{target}"] = FlowConfig(
                source=source,
                target=target,
                replication_policy=policy,
                separator=separator,  # type: ignore[arg-type]
            )
    clusters = {a: {"bootstrap_servers": "h:1"} for a in ALIASES}
    # Fan-in is its own rule; the simulation judges loops only.
    cfg = DrkitConfig.model_construct(
        clusters=parse_config({"clusters": clusters}).clusters, flows=list(flows.values())
    )
    problem = topology_problem(cfg.flows, [cfg.topic_selector(f) for f in cfg.flows])
    refused_as_loop = problem is not None and "forever" in problem[1]
    assert refused_as_loop == _loops_by_simulation(cfg)


# --- config files that are not readable text -----------------------------------------------------------


def test_non_utf8_config(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(TWO.encode() + '# caf\xe9 "s3cr3t"\n'.encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: config file is not UTF-8 text (byte {len(TWO) + 5}); save it as UTF-8"


def test_utf8_with_byte_order_mark_loads(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + TWO.encode())
    assert sorted(load_config(path).clusters) == ["A", "B"]


@pytest.mark.timeout(20)
def test_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "drkit.toml"
    os.mkfifo(path)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f"{path}: is not a regular file (a FIFO, socket or device); give the path of a TOML file"
    )


def test_device_is_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("/dev/null: is not a regular file")):
        load_config("/dev/null")


def test_path_through_a_file_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "file" / "drkit.toml")


# --- configs that cannot work (the checks beside each component: drkit.config.flows, clusters, ...) ---


def test_an_empty_environment_variable_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRKIT_TEST_EMPTY", "")
    got = error_of(
        tmp_path, TWO.replace('"h:1"\n', '"h:1"\nproperties = { "sasl.password" = "${env:DRKIT_TEST_EMPTY}" }\n')
    )
    assert got == "clusters.A.properties.sasl.password: environment variable DRKIT_TEST_EMPTY is empty"


def test_a_home_in_the_state_root_is_expanded_deliberately(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    path = tmp_path / "drkit.toml"
    path.write_text('[state]\nroot = "~/drkit-state"\n' + TWO, encoding="utf-8")
    assert load_config(path).state_root() == (tmp_path / "drkit-state").resolve()


@pytest.mark.parametrize(
    "floor_key, value",
    [
        ("mirror.trigger_interval_seconds", 0.1),
        ("mirror.observe_interval_seconds", 0.1),
        ("mirror.stop_grace_seconds", 0),
        ("checkpoint.interval_seconds", 0.1),
        ("topology.refresh_interval_seconds", 0),
        ("topology.refresh_interval_seconds", 1),
        ("heartbeats.interval_seconds", 0),
        ("heartbeats.interval_seconds", 0.1),
        ("mirror.trigger_interval_seconds", 86400),
    ],
)
def test_intervals_at_their_floor_or_off_are_accepted(tmp_path: Path, floor_key: str, value: float) -> None:
    path = tmp_path / "drkit.toml"
    path.write_text(FLOW + f"{floor_key} = {value}\n", encoding="utf-8")
    load_config(path)


@pytest.mark.parametrize("pattern", ["orders", "orders|", "a\\\\.b", "x.*", "o" * 247])
def test_selections_that_can_select_a_topic_are_accepted(tmp_path: Path, pattern: str) -> None:
    path = tmp_path / "drkit.toml"
    path.write_text(FLOW + f'topics.include = ["{pattern}"]\n', encoding="utf-8")
    assert load_config(path).flows[0].topics.include == [pattern.replace("\\\\", "\\")]


def test_excluding_one_of_several_plain_includes_pauses_it(tmp_path: Path) -> None:
    """runbooks/coverage.md pauses a topic by excluding it; only a selection left empty is refused."""
    path = tmp_path / "drkit.toml"
    path.write_text(FLOW + 'topics.include = ["orders", "payments"]\ntopics.exclude = ["orders"]\n', encoding="utf-8")
    assert load_config(path).topic_selector(load_config(path).flows[0]).select(["orders", "payments"]) == ["payments"]
