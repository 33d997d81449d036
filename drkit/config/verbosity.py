"""The process's verbosity, from the environment (``DRKIT_LOG``; ``drkit --verbose`` sets it for its jobs).

The decisions are pure (drkit.core.verbosity); this module only reads the variable. The CLI refuses a
value that names no verbosity before any command runs; the adapters (Kafka clients, the Spark session),
which may run outside the CLI, take such a value for the default.
"""

from __future__ import annotations

import os

from drkit.core.verbosity import ENV, LogPlan, Verbosity, log_plan, parse_verbosity
from drkit.errors import ConfigError


def current_verbosity() -> Verbosity:
    """``DRKIT_LOG``'s verbosity; ConfigError (exit 2) when it names none."""
    verbosity = parse_verbosity(os.environ.get(ENV))
    if verbosity is None:
        choices = ", ".join(v.value for v in Verbosity)
        raise ConfigError(f"{ENV} must be one of {choices} (unset: warning); unset it or pick one")
    return verbosity


def current_plan() -> LogPlan:
    """The log plan of ``DRKIT_LOG`` (the default plan when it names no verbosity)."""
    return log_plan(parse_verbosity(os.environ.get(ENV)) or Verbosity.WARNING)
