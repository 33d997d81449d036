"""A flow's after-apply hooks (``[flows.hooks.after_failover]``, ``[flows.hooks.after_failback]``).

Invariant: a hook that exists is exactly one of a command (a non-empty argv list, run without a shell) or a
webhook (an absolute ``http``/``https`` URL), with a timeout between 0.1 s and 10 minutes. Errors never quote
the URL: it may carry a token (drkit.config.secrets treats ``webhook`` values as secrets).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from drkit.config.base import ConfigModel

#: A hook is waited for at most this long by default; the offsets are applied whatever it does.
DEFAULT_HOOK_TIMEOUT_SECONDS = 30.0


class HookConfig(ConfigModel):
    """One hook: run ``command`` or POST to ``webhook``, with the applied operation as JSON."""

    command: list[str] | None = Field(default=None, min_length=1)
    webhook: str | None = None
    timeout_seconds: float = Field(default=DEFAULT_HOOK_TIMEOUT_SECONDS, ge=0.1, le=600.0)

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value[0]:
            raise ValueError("the program (first item) is empty")
        return value

    @field_validator("webhook")
    @classmethod
    def _webhook(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - a port that is no number raises here, not at the first failover
        except ValueError:
            raise ValueError("is no valid URL (value not shown: it may hold a token)") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host (value not shown: it may hold a token)")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> HookConfig:
        if (self.command is None) == (self.webhook is None):
            raise ValueError("give exactly one of command (an argv list) or webhook (a URL)")
        return self


class FlowHooks(ConfigModel):
    """What runs after an applied failover or failback of the flow (none by default)."""

    after_failover: HookConfig | None = None
    after_failback: HookConfig | None = None
