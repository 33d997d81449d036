"""Options shared by every command."""

from __future__ import annotations

from pathlib import Path

import typer

from drkit.cli.console import Output

ConfigOption = typer.Option(Path("drkit.toml"), "--config", "-c", help="Path to the drkit TOML config.")
OutputOption = typer.Option(Output.text, "--output", "-o", help="text (Rich tables) or json.")
FlowOption = typer.Option(None, "--flow", help="Flow name, e.g. A->B (default: every flow).")
