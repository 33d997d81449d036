"""``drkit config validate|show|import-mm2``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import RenderableType
from rich.markup import escape
from rich.syntax import Syntax

from drkit.cli.console import Output, emit, table
from drkit.cli.options import ConfigOption, OutputOption
from drkit.config import load_config, masked_dump
from drkit.service import Drkit

if TYPE_CHECKING:
    from drkit.results import Mm2Import

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
        "state_root": str(cfg.state_uri() or cfg.state_root()),
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


PropertiesArgument = typer.Argument(
    ..., help="The MirrorMaker 2 dedicated-mode file (connect-mirror-maker.properties)."
)
WriteOption = typer.Option(None, "--write", "-w", help="Write the drkit config to this TOML file (default: print it).")
ForceOption = typer.Option(False, "--force", help="Replace the --write file if it exists.")


@app.command("import-mm2")
def import_mm2(
    properties: Path = PropertiesArgument,
    write: Path | None = WriteOption,
    force: bool = ForceOption,
    output: Output = OutputOption,
) -> None:
    """Turn a MirrorMaker 2 properties file into a drkit config, and list every MM2 property not carried over."""
    result = Drkit.import_mm2(properties, write, force)

    def render(r: Mm2Import) -> Iterable[RenderableType]:
        m = r.mapping
        if r.written is None:
            yield Syntax(r.toml, "toml", background_color="default")
        else:
            written = escape(r.written)
            yield f"[green]written[/]: {written} (check it with `drkit config validate -c {written}`)"
        flows = ", ".join(f"{f['source']}->{f['target']}" for f in m.config.get("flows", [])) or "-"
        clusters = ", ".join(m.config["clusters"])
        yield table("", ["MM2 file", "clusters", "flows"], [[escape(r.source), clusters, flows]])
        if m.secrets:
            yield table(
                "environment variables to set (secrets are never written)",
                ["variable", "MM2 property", "drkit key"],
                [[s.name, escape(s.key), escape(s.to)] for s in m.secrets],
            )
        yield table(
            f"not carried over ({len(m.dropped)} of {len({c.key for c in m.carried} | {d.key for d in m.dropped})})",
            ["MM2 property", "reason", "why"],
            [[escape(d.key), d.reason.value, escape(d.detail)] for d in m.dropped],
        )
        for note in m.notes:
            yield f"[yellow]note[/]: {escape(note)}"

    emit(result, output, render)
