"""Shared pytest setup: unit tests run everywhere; integration tests need the JVM side.

Hypothesis profiles for the property tests: "dev" (the default: few examples, so the unit suite
stays quick on a laptop) and "ci" (chosen when the CI environment variable is set: many examples).
HYPOTHESIS_PROFILE=<name> picks a profile explicitly and overrides both.
Every test runs in one of two pytest-xdist lanes (tests/support/lanes.py): the scheduler below.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import settings
from support.lanes import lane

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("ci", max_examples=300, deadline=None)


def _profile() -> str:
    explicit = os.environ.get("HYPOTHESIS_PROFILE", "").strip()
    if explicit:
        return explicit
    ci = os.environ.get("CI", "").strip().lower()
    return "ci" if ci not in ("", "0", "false", "no") else "dev"


settings.load_profile(_profile())


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scheduler by scope, with one scope per lane (tests/support/lanes.py): a worker each."""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return lane(nodeid)

    return Lanes(config, log)
