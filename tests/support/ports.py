"""Loopback ports of the integration tests' own clusters, apart from a user's scripts/local-kafka ones.

``DRKIT_TEST_BASE_PORT`` moves them all, so two test runs on one machine never share a broker.
"""

from __future__ import annotations

import os

#: Broker port of the session's cluster A; B is +10 (drkit.localdev.clusters).
TEST_BASE_PORT = int(os.environ.get("DRKIT_TEST_BASE_PORT", "29092"))
#: Clusters of the disaster test, which kills its source broker: never the session's.
DISASTER_BASE_PORT = TEST_BASE_PORT + 100
#: The secure clusters (SASL_SSL and mutual TLS) of tests/integration/secure.
SECURE_BASE_PORT = TEST_BASE_PORT + 600
#: The S3-compatible server (moto's) of tests/integration/store/test_object_store_root.py.
OBJECT_STORE_PORT = TEST_BASE_PORT + 50
#: The local Spark standalone cluster of tests/integration/spark: master here, workers +10 and +20.
SPARK_BASE_PORT = TEST_BASE_PORT + 900
