"""One exception tree for everything drkit reports to a user.

Each kind carries the process exit code the CLI uses, so scripts can tell a bad config (2) from
a refused operation (3), an unreachable cluster (4) or a failed job (5). Messages are written
for the operator: they say what is wrong and what to do, and never contain secrets.

    DrkitError (1)
    ├── ConfigError (2)          bad or missing config file, key or value
    ├── RefusedError (3)         a safety check refused an operation; nothing was changed
    ├── ClusterError (4)         a Kafka cluster is unreachable or answered with an error
    ├── MirrorError (5)          the mirror could not deliver records; progress did not move
    ├── StoreError (6)           Delta tables missing, of another schema version, or unreadable
    ├── ArtifactError (7)        JVM artifacts could not be fetched
    └── AccessDenied (4)         a cluster refused the principal (a missing ACL): never "unreachable"
"""

from __future__ import annotations


class DrkitError(Exception):
    """Base of every error drkit reports to a user."""

    exit_code = 1
    names_logs = True


class ConfigError(DrkitError):
    names_logs = False
    exit_code = 2


class RefusedError(DrkitError):
    names_logs = False
    exit_code = 3


class ClusterError(DrkitError):
    exit_code = 4


class MirrorError(DrkitError):
    exit_code = 5


class FencedError(RefusedError):
    """A newer holder of a flow's mirror lease fenced this process: its writes are refused (exit 3)."""


#: Words every refusal of a fenced process's sync append holds (drkit.store.delta): the running mirror tells
#: such a failure of its query by them (the query's error is Spark's, holding the Python error as text).
FENCED_BY_NEWER_HOLDER = "recorded by a newer holder of the lease"


class StoreError(DrkitError):
    names_logs = False
    exit_code = 6


class ArtifactError(DrkitError):
    exit_code = 7


class AccessDenied(DrkitError):
    """A cluster answered and refused the principal (drkit.kafka.authz). Exit 4 like a cluster error, but
    not a ClusterError: callers that take a ClusterError for an unreachable cluster (and wait, or report
    it as down) must not take a missing ACL for one."""

    exit_code = 4


#: Why a cluster refused one request of several in flight: a missing ACL, or any other broker error.
Refusal = ClusterError | AccessDenied
