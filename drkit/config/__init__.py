"""The typed drkit configuration, loaded from TOML and validated once.

Every error names the file and the dotted key (``drkit.toml: flows[0].source: ...``) so an
operator can fix it without reading code, and never contains a value that could be secret.
Client property values may reference environment variables as ``${env:NAME}``.

What validation refuses beyond types, because a later layer would fail or misbehave:

- regular expressions that Spark's Java regex and Python would read differently (``regex``);
- client properties the Kafka client (librdkafka) does not know or would reject, and Java class
  properties the Python clients cannot load;
- non-finite numbers (``inf``, ``nan``) and Spark masters Spark cannot parse;
- flow topologies where records would be copied forever or two flows would write the same topic
  (:func:`drkit.core.flows.topology_problem`).

Secrets are one notion (``secrets``: :func:`is_secret_key`, :func:`secret_values`): :func:`masked_dump`
hides them by key, inside JAAS/OAuth strings, and by value wherever else the same value appears.

One module per idea: ``model`` (the pydantic models and their cross-field checks), ``secrets``,
``properties`` (client and Spark properties), ``regex`` (Java/Python regex agreement), ``loading``
(TOML, ``${env:...}``, one-line errors); the rules over the set of flows are ``drkit.core.flows``.
This module re-exports the names the rest of drkit uses.

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
"""

from __future__ import annotations

from drkit.config.loading import load_config as load_config
from drkit.config.loading import masked_dump as masked_dump
from drkit.config.loading import parse_config as parse_config
from drkit.config.model import DRIVER_COPY_MAX_RECORDS as DRIVER_COPY_MAX_RECORDS
from drkit.config.model import CheckpointSettings as CheckpointSettings
from drkit.config.model import ClusterConfig as ClusterConfig
from drkit.config.model import DrkitConfig as DrkitConfig
from drkit.config.model import FlowConfig as FlowConfig
from drkit.config.model import HeartbeatSettings as HeartbeatSettings
from drkit.config.model import MetricsConfig as MetricsConfig
from drkit.config.model import MirrorSettings as MirrorSettings
from drkit.config.model import Selection as Selection
from drkit.config.model import SparkConfig as SparkConfig
from drkit.config.model import StateConfig as StateConfig
from drkit.config.model import TopologySettings as TopologySettings
from drkit.config.properties import JAVA_ONLY_PROPERTIES as JAVA_ONLY_PROPERTIES
from drkit.config.secrets import MASK as MASK
from drkit.config.secrets import is_secret_key as is_secret_key
from drkit.config.secrets import mask_text as mask_text
from drkit.config.secrets import secret_values as secret_values
