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
  select nothing, a flow between two aliases of one cluster (:mod:`drkit.config.flows`), intervals below their floor
  (:mod:`drkit.config.flow_settings`), shell syntax in paths (:mod:`drkit.config.paths`), malformed
  environment references (:mod:`drkit.config.loading`).

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

Modules, one idea each. One model per component, each with its own checks: :mod:`~drkit.config.clusters`
(clusters and their aliases), :mod:`~drkit.config.flows` (a flow, and what it cannot do among the
clusters) with its sections in :mod:`~drkit.config.flow_settings`, :mod:`~drkit.config.state`,
:mod:`~drkit.config.spark`, and over them :mod:`~drkit.config.model` (the whole config, its checks across
components). Beneath them: :mod:`~drkit.config.base` (the model base, the keyed error),
:mod:`~drkit.config.properties` (client and Spark property tables), :mod:`~drkit.config.regex`
(Java-regex compatibility), :mod:`~drkit.config.paths` (paths drkit takes literally),
:mod:`~drkit.config.secrets`, and :mod:`~drkit.config.topology` (messages for the rules of
:mod:`drkit.core.flows`). :mod:`~drkit.config.loading` reads a file into the model; the subpackage
:mod:`~drkit.config.mm2` turns a MirrorMaker 2 properties file into a drkit config. This package
re-exports what the rest of drkit imports.
"""

from drkit.config.clusters import ClusterConfig
from drkit.config.flow_settings import (
    DRIVER_COPY_MAX_RECORDS,
    CheckpointSettings,
    HeartbeatSettings,
    MirrorSettings,
    TopologySettings,
)
from drkit.config.flows import FlowConfig, Selection
from drkit.config.loading import load_config, masked_dump, parse_config
from drkit.config.model import DrkitConfig, MetricsConfig
from drkit.config.properties import JAVA_ONLY_PROPERTIES
from drkit.config.regex import Pattern
from drkit.config.secrets import MASK, is_secret_key, mask_text, secret_values
from drkit.config.spark import SparkConfig
from drkit.config.state import StateConfig
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
