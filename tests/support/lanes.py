"""The two lanes of the suite: two pytest-xdist workers (``-n 2``, pyproject.toml), one lane each.

The integration tests that share the session's clusters and Spark session run in one worker, one after
another, as without xdist: the session fixtures start once. The tests that need none of them run in the other:
the unit tests, and the modules named here (clusters of their own: the 5-minute outage, the drills, broker
faults), so that they overlap the rest. A main-lane test therefore runs on a loaded machine: it waits for a
state by what it observes (records counted, offsets seen), never by a time that load can stretch.
tests/conftest.py hands xdist a scheduler that groups by :func:`lane` (xdist's own ``loadgroup`` marks do not
reach the node ids under pytest 9.2).
"""

from __future__ import annotations

#: The lane of the tests that need no session fixture.
SIDE_LANE = "side"
#: The lane of the integration tests on the session's clusters and Spark session.
MAIN_LANE = "main"
#: Node id prefixes of the side lane: every unit test, and the integration modules that use no session
#: fixture (clusters of their own, drkit as processes), so that the lanes take about as long as each other
#: (tests/unit/test_lanes.py checks that none takes a session fixture).
SIDE_PREFIXES = (
    "tests/unit/",
    "tests/integration/drill/test_drill_run.py",
    "tests/integration/kafka/test_acl_sync.py",
    "tests/integration/mirror/test_long_outage.py",
    "tests/integration/mirror/test_target_faults.py",
    "tests/integration/operate/test_outage_answers.py",
)


def lane(nodeid: str) -> str:
    """The lane of a test, by its node id (relative to the rootdir)."""
    return SIDE_LANE if nodeid.startswith(SIDE_PREFIXES) else MAIN_LANE
