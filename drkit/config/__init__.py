"""The typed drkit configuration, loaded from TOML and validated once.

Every error names the file and the dotted key (``drkit.toml: flows[0].source: ...``) so an
operator can fix it without reading code, and never contains a value that could be secret.
Client property values may reference environment variables as ``${env:NAME}``.

What validation refuses beyond types, because a later layer would fail or misbehave:

- regular expressions that Spark's Java regex and Python would read differently (:mod:`drkit.config.regex`);
- client properties the Kafka client (librdkafka) does not know or would reject, and Java class
  properties the Python clients cannot load;
- non-finite numbers (``inf``, ``nan``) and Spark masters Spark cannot parse;
- flow topologies where records would be copied forever or two flows would write the same topic
  (:mod:`drkit.core.flows`).
- settings valid one by one that cannot work together: topic names Kafka would refuse, selections that
  select nothing, one cluster under two aliases, intervals below their floor, shell syntax in paths,
  malformed environment references (:mod:`drkit.config.sanity`).

Secrets are one notion (:func:`is_secret_key`, :func:`secret_values`): :func:`masked_dump` hides them
by key, inside JAAS/OAuth strings, and by value wherever else the same value appears.

Example::

    [state]
    root = ".drkit/state"

    [clusters.A]
    bootstrap_servers = "127.0.0.1:19092"

    [clusters.B]
    bootstrap_servers = "127.0.0.1:19102"
    properties = { "security.protocol" = "SASL_SSL", "sasl.password" = "${env:B_PASSWORD}" }

    [[flows]]
    source = "A"
    target = "B"
    topics.include = ["orders.*"]

Modules, one idea each: :mod:`~drkit.config.model` (the pydantic models), :mod:`~drkit.config.secrets`,
:mod:`~drkit.config.properties` (client and Spark properties), :mod:`~drkit.config.regex` (Java-regex
compatibility), :mod:`~drkit.config.sanity` (settings that cannot work), :mod:`~drkit.config.topology`
(messages for the rules of :mod:`drkit.core.flows`) and :mod:`~drkit.config.loading`; the subpackage
:mod:`~drkit.config.mm2` turns a MirrorMaker 2 properties file into a drkit config. This package
re-exports what the rest of drkit imports.
"""

from drkit.config.loading import load_config, masked_dump, parse_config
from drkit.config.model import (
    DRIVER_COPY_MAX_RECORDS,
    CheckpointSettings,
    ClusterConfig,
    DrkitConfig,
    FlowConfig,
    HeartbeatSettings,
    MetricsConfig,
    MirrorSettings,
    Selection,
    SparkConfig,
    StateConfig,
    TopologySettings,
)
from drkit.config.properties import JAVA_ONLY_PROPERTIES
from drkit.config.regex import Pattern
from drkit.config.secrets import MASK, is_secret_key, mask_text, secret_values
from drkit.config.topology import topology_problem

__all__ = [
    "DRIVER_COPY_MAX_RECORDS",
    "JAVA_ONLY_PROPERTIES",
    "MASK",
    "CheckpointSettings",
    "ClusterConfig",
    "DrkitConfig",
    "FlowConfig",
    "HeartbeatSettings",
    "MetricsConfig",
    "MirrorSettings",
    "Pattern",
    "Selection",
    "SparkConfig",
    "StateConfig",
    "TopologySettings",
    "is_secret_key",
    "load_config",
    "mask_text",
    "masked_dump",
    "parse_config",
    "secret_values",
    "topology_problem",
]
