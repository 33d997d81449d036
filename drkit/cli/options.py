"""Options shared by every command, and the one facade of an invocation."""

from __future__ import annotations

import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from drkit.cli.console import Output
from drkit.cli.logs import LogSetup
from drkit.layout import StateLayout
from drkit.service import Drkit

# Not click's readable check: drkit's config loader says why a file cannot be read, in its own words.
ConfigOption = typer.Option(Path("drkit.toml"), "--config", "-c", readable=False, help="Path to the drkit TOML config.")
OutputOption = typer.Option(Output.text, "--output", "-o", help="text (Rich tables) or json.")
FlowOption = typer.Option(None, "--flow", help="Flow name, e.g. A->B (default: every flow).")
MetricsPortOption = typer.Option(
    None, "--metrics-port", min=1, max=65535, help="Serve Prometheus metrics on this port (default: [metrics] port)."
)

#: How an invocation builds its facade from the config path (tests pass one with fakes).
FacadeFactory = Callable[[Path], Drkit]


def _from_file(path: Path) -> Drkit:
    return Drkit.from_file(str(path))


class Invocation:
    """What the root callback keeps for one ``drkit`` run: the facade, made once."""

    def __init__(self, factory: FacadeFactory | None = None) -> None:
        self.factory = factory or _from_file
        self.debug = False
        #: The command already rendered how it ended (an interrupted apply's result): its exit code needs no line.
        self.reported = False
        #: Where log lines go (set by the root callback: --verbose, DRKIT_LOG).
        self.logs: LogSetup | None = None
        #: SIGINT arrived during the run (``interrupt``): whatever error follows, the run was interrupted.
        self.interrupted = False
        self._facades: dict[Path, Drkit] = {}

    def interrupt(self, signum: int, frame: Any) -> None:
        """The CLI's SIGINT handler: noted, then raised as Python's own handler does (KeyboardInterrupt)."""
        self.interrupted = True
        signal.default_int_handler(signum, frame)

    def mask(self, text: str) -> str:
        """``text`` with the loaded configs' secrets and any secret assignment masked, as config errors are:
        a client library may quote a password or a JAAS config in its own error message."""
        from drkit.config.secrets import mask_text, secret_values

        found: set[str] = set()
        for drkit in self._facades.values():
            found |= secret_values(drkit.config.model_dump(mode="json"))
        return mask_text(text, found)

    def facade(self, config: Path) -> Drkit:
        if config not in self._facades:
            self._facades[config] = self.factory(config)
            if self.logs is not None:
                # The path only: the state root is checked (and created) by the commands that use it.
                self.logs.attach(StateLayout(self._facades[config].config.state_root()))
        return self._facades[config]


def facade(ctx: typer.Context, config: Path) -> Drkit:
    """The invocation's facade for ``config`` (built on first use, once)."""
    invocation = ctx.find_object(Invocation)
    if invocation is None:  # a command called outside `drkit.cli.app.main`
        invocation = ctx.ensure_object(Invocation)
    return invocation.facade(config)


def parse_time(value: str | None, option: str = "--as-of") -> datetime | None:
    """ISO 8601 (``2026-11-22T10:15:00Z``); without a zone, UTC. A time in the future is refused: there is
    no state "as of" it yet (it would read as now, with ages that look negative)."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not an ISO 8601 time, e.g. 2026-11-22T10:15:00Z", param_hint=option
        ) from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    now = datetime.now(UTC)
    if parsed > now:
        raise typer.BadParameter(
            f"{value} is in the future (now is {now.isoformat(timespec='seconds')}): give a past time, or leave "
            f"{option} out for the latest state",
            param_hint=option,
        )
    return parsed
