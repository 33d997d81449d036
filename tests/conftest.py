"""Shared pytest setup: unit tests run everywhere; integration tests need the JVM side.

Hypothesis profiles for the property tests: "dev" (the default: few examples, so the unit suite
stays quick on a laptop) and "ci" (chosen when the CI environment variable is set: many examples).
HYPOTHESIS_PROFILE=<name> picks a profile explicitly and overrides both.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("ci", max_examples=300, deadline=None)


def _profile() -> str:
    explicit = os.environ.get("HYPOTHESIS_PROFILE", "").strip()
    if explicit:
        return explicit
    ci = os.environ.get("CI", "").strip().lower()
    return "ci" if ci not in ("", "0", "false", "no") else "dev"


settings.load_profile(_profile())
