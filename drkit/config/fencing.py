"""A flow's fencing (``[flows.fencing]``): the principals denied WRITE on the side they leave (drkit.core.fencing).

Invariant: every producer is a Kafka principal ``<type>:<name>`` (``User:orders-app``), never a wildcard: a
DENY for every principal would stop drkit's own mirror too. No producer: fencing is off.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from drkit.config.base import ConfigModel

_PRINCIPAL = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*:[^*\s]+$")


class FencingConfig(ConfigModel):
    """Who is fenced: ``producers``; and whether the copies on the target are kept read-only to them too."""

    producers: list[str] = Field(default_factory=list)
    read_only_copies: bool = False

    @field_validator("producers")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        for p in value:
            if not _PRINCIPAL.match(p):
                raise ValueError(
                    f"{p!r} is no Kafka principal: give <type>:<name> such as User:orders-app (no wildcard: a DENY "
                    "for every principal would stop drkit's own mirror)"
                )
        return sorted(set(value))

    @property
    def on(self) -> bool:
        return bool(self.producers)
