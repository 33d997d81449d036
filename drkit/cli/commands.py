"""Registers the job and operator commands on the app (kept apart so their imports stay lazy)."""

from __future__ import annotations

import typer

from drkit.cli import (
    checkpoint_cmd,
    drill_cmd,
    failover_cmd,
    fence_cmd,
    maintain_cmd,
    mirror_cmd,
    recover_cmd,
    status_cmd,
    topics_cmd,
    verify_cmd,
)


def register(app: typer.Typer) -> None:
    """Attach every command module's commands to ``app``."""
    app.command("mirror")(mirror_cmd.mirror)
    app.command("checkpoint")(checkpoint_cmd.checkpoint)
    app.command("failover")(failover_cmd.failover)
    app.command("failback")(failover_cmd.failback)
    app.command("history")(failover_cmd.history)
    app.command("fence")(fence_cmd.fence)
    app.command("verify")(verify_cmd.verify)
    app.command("recover")(recover_cmd.recover)
    app.command("status")(status_cmd.status)
    app.command("offsets")(status_cmd.offsets)
    app.command("maintain")(maintain_cmd.maintain)
    app.add_typer(drill_cmd.app, name="drill")
    app.add_typer(topics_cmd.app, name="topics")
