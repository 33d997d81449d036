"""The two lanes of the suite: two pytest-xdist workers (``-n 2``, pyproject.toml), one lane each.

The integration tests that share the session's clusters and Spark session run in one worker, one after
another, as without xdist: the session fixtures start once. The tests that need none of them run in the other:
the unit tests, and the modules named here (a long wait on clusters of their own, such as the 5-minute outage),
so that their wait overlaps the rest. A main-lane test still runs beside them: it waits for a state by what it
observes (records counted, offsets seen), never by a time that load can stretch. tests/conftest.py hands xdist
a scheduler that groups by :func:`lane` (xdist's own ``loadgroup`` marks do not reach the node ids under pytest
9.2).
"""

from __future__ import annotations

#: The lane of the tests that need no session fixture.
SIDE_LANE = "side"
#: The lane of the integration tests on the session's clusters and Spark session.
MAIN_LANE = "main"
#: Node id prefixes of the side lane: every unit test, and integration modules with clusters of their own
#: whose run is mostly waiting. Modules that run JVMs of their own (the drills, the target broker faults) are
#: not here although they take no session fixture: on two cores they slowed the main lane's tests more than
#: they saved (a fresh-clone run with them here: pytest 3,264 s, the exactly-once random kills 335 s instead of
#: 133 s).
SIDE_PREFIXES = ("tests/unit/", "tests/integration/mirror/test_long_outage.py")


def lane(nodeid: str) -> str:
    """The lane of a test, by its node id (relative to the rootdir)."""
    return SIDE_LANE if nodeid.startswith(SIDE_PREFIXES) else MAIN_LANE
