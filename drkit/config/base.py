"""What every component model of the config shares: the model base and the keyed error.

Invariant: every component model is frozen, refuses unknown keys and non-finite numbers; a check that
knows the dotted key it is about raises :class:`KeyedError`, which :mod:`drkit.config.loading` prints
under that key instead of pydantic's location.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigModel(BaseModel):
    """The base of every model of the config."""

    # inf and nan read from TOML would pass every bound check (or fail it with a puzzling message).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class KeyedError(ValueError):
    """A cross-field error that knows which key it is about."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message
