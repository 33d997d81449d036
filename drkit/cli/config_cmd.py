"""``drkit config validate|show``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from rich.console import RenderableType
from rich.syntax import Syntax

from drkit.cli.console import Output, emit, table
from drkit.cli.options import ConfigOption, OutputOption
from drkit.config import load_config, masked_dump

app = typer.Typer(help="Check and show the configuration.", no_args_is_help=True)


@app.command("validate")
def validate(config: Path = ConfigOption, output: Output = OutputOption) -> None:
    """Validate the config file; exit 2 with the file and key of the first problem."""
    cfg = load_config(config)
    data = {
        "valid": True,
        "file": str(config),
        "clusters": sorted(cfg.clusters),
        "flows": [f.name for f in cfg.flows],
        "state_root": str(cfg.state_root()),
    }

    def render(d: dict[str, Any]) -> Iterable[RenderableType]:
        yield f"[green]valid[/]: {d['file']}"
        yield table(
            "",
            ["clusters", "flows", "state root"],
            [[", ".join(d["clusters"]), ", ".join(d["flows"]) or "-", d["state_root"]]],
        )

    emit(data, output, render)


@app.command("show")
def show(config: Path = ConfigOption, output: Output = OutputOption) -> None:
    """Show the effective config (defaults filled in, secrets masked)."""
    data = masked_dump(load_config(config))

    def render(d: dict[str, Any]) -> Iterable[RenderableType]:
        import json

        yield Syntax(json.dumps(d, indent=2), "json", background_color="default")

    emit(data, output, render)
