"""The port plan of the integration tests: every module that starts a server takes its block from here.

``DRKIT_TEST_BASE_PORT`` moves every block, so two test runs on one machine whose bases are at least
``PLAN_SPAN`` apart never share a port; the blocks of one run never overlap each other, nor reach past
``PLAN_SPAN`` (tests/unit/test_port_plan.py checks both, and that no integration module picks a port
outside its block).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Broker port of the session's cluster A; B is +10 (drkit.localdev.clusters).
TEST_BASE_PORT = int(os.environ.get("DRKIT_TEST_BASE_PORT", "29092"))
#: Every block lies in TEST_BASE_PORT .. TEST_BASE_PORT + PLAN_SPAN - 1.
PLAN_SPAN = 1000

#: Ports of a LocalKafka that runs two clusters: cluster i on base + 10*i (broker) and one above it
#: (its KRaft controller), so A holds base, base+1 and B base+10, base+11.
KAFKA_PAIR_SPAN = 12


@dataclass(frozen=True)
class PortBlock:
    """Ports ``base .. base + span - 1``, used by one integration module (or conftest) only."""

    name: str
    #: The module (path from the repository root) that starts the servers on this block.
    owner: str
    offset: int
    span: int

    @property
    def base(self) -> int:
        return TEST_BASE_PORT + self.offset

    @property
    def ports(self) -> range:
        return range(self.base, self.base + self.span)

    def at(self, index: int) -> int:
        """The block's port ``index``: a module's second server gets its port here, never by arithmetic."""
        if not 0 <= index < self.span:
            raise ValueError(f"port block {self.name} spans {self.span} ports, not index {index}")
        return self.base + index


def _block(name: str, owner: str, offset: int, span: int = KAFKA_PAIR_SPAN) -> PortBlock:
    return PortBlock(name, f"tests/integration/{owner}", offset, span)


#: The session's clusters A and B.
SESSION = _block("SESSION", "conftest.py", 0)
#: The session's S3-compatible server (moto's): a port of the session's block the clusters leave free.
OBJECT_STORE_INDEX = 5
#: The clusters of the disaster test, which kills its source broker: never the session's.
DISASTER = _block("DISASTER", "operate/test_disaster.py", 100)
FAILBACK = _block("FAILBACK", "operate/test_failback_exact.py", 150)
SOURCE_LOSS = _block("SOURCE_LOSS", "mirror/test_mirror_source_loss.py", 200)
SOURCE_KILLED = _block("SOURCE_KILLED", "operate/test_source_killed.py", 250)
UNSYNCED_TAIL = _block("UNSYNCED_TAIL", "operate/test_unsynced_tail.py", 300)
ACL_SYNC = _block("ACL_SYNC", "kafka/test_acl_sync.py", 350)
DRILL = _block("DRILL", "drill/test_drill_run.py", 400)
OUTAGE_ANSWERS = _block("OUTAGE_ANSWERS", "operate/test_outage_answers.py", 450)
#: X alone at +0, Y and Z at +10 and +20 (a second LocalKafka, base +10), X's TCP proxy at +40.
LONG_OUTAGE = _block("LONG_OUTAGE", "mirror/test_long_outage.py", 500, 41)
#: The metrics ports of the standby test's mirror processes (one each, on one host).
STANDBY = _block("STANDBY", "mirror/test_standby.py", 700, 4)
#: The secure clusters (SASL_SSL and mutual TLS).
SECURE = _block("SECURE", "secure/conftest.py", 600)
#: The clusters of the target-faults test, which kills and freezes its target broker.
TARGET_FAULTS = _block("TARGET_FAULTS", "mirror/test_target_faults.py", 800)
#: The metrics port of the probe drill test's mirror process.
PROBE = _block("PROBE", "drill/test_probe_drill.py", 850, 1)
#: The clusters of the follower's source-kill test (A is SIGKILLed).
FOLLOW_KILLED = _block("FOLLOW_KILLED", "translator/test_follow_source_killed.py", 860)
#: The local Spark standalone cluster: master at +0 (web UI +1), workers at +10 and +20 (web UI one
#: above each); Spark moves a worker up to 16 ports on when its own is taken (spark.port.maxRetries).
SPARK = _block("SPARK", "spark/conftest.py", 900, 50)

PLAN: tuple[PortBlock, ...] = (
    SESSION,
    DISASTER,
    FAILBACK,
    SOURCE_LOSS,
    SOURCE_KILLED,
    UNSYNCED_TAIL,
    ACL_SYNC,
    DRILL,
    OUTAGE_ANSWERS,
    LONG_OUTAGE,
    STANDBY,
    SECURE,
    TARGET_FAULTS,
    PROBE,
    FOLLOW_KILLED,
    SPARK,
)
