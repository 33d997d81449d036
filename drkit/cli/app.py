"""``drkit``: the Typer application and its error handling.

Every user error is a :class:`drkit.errors.DrkitError`: the CLI prints one red line (or a JSON
object with ``--output json``) and exits with the error's code. A traceback is shown only with
``--debug``, and never with local variables (they may hold secrets).
"""

from __future__ import annotations

import sys

import typer

from drkit import __version__
from drkit.cli import config_cmd
from drkit.cli.console import Output, error
from drkit.cli.options import FacadeFactory, Invocation
from drkit.errors import DrkitError

app = typer.Typer(
    name="drkit",
    help="Disaster recovery for Apache Kafka: mirror, translate offsets, fail over and back.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(config_cmd.app, name="config")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"drkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of errors."),
) -> None:
    # One Invocation per run: commands get their facade from it (drkit.cli.options.facade).
    invocation = ctx.ensure_object(Invocation)
    invocation.debug = debug


def _register() -> None:
    # Commands that need Spark import it lazily inside their bodies, so `drkit --help` is fast.
    from drkit.cli import commands

    commands.register(app)


def _output_of(argv: list[str]) -> Output:
    for i, arg in enumerate(argv):
        if arg in ("--output", "-o") and i + 1 < len(argv):
            return Output.json if argv[i + 1] == "json" else Output.text
        if arg in ("--output=json", "-o=json"):
            return Output.json
    return Output.text


def main(argv: list[str] | None = None, facade_factory: FacadeFactory | None = None) -> None:
    """Run the CLI; ``facade_factory`` builds the facade from the config path (tests pass fakes)."""
    args = list(sys.argv[1:] if argv is None else argv)
    _register()
    invocation = Invocation(facade_factory)
    try:
        # With standalone_mode=False, `raise typer.Exit(code)` (and --help, --version) come back as
        # the return value instead of an exception.
        result = app(args=args, prog_name="drkit", standalone_mode=False, obj=invocation)
    except DrkitError as exc:
        if invocation.debug:
            raise
        error(str(exc), _output_of(args), exc.exit_code)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        error("aborted", _output_of(args), 1)
        sys.exit(1)
    except KeyboardInterrupt:
        error("interrupted", _output_of(args), 130)
        sys.exit(130)
    except Exception as exc:
        # Usage errors (no such command/option, bad value, no arguments: exit 2). They are click's
        # ClickException, which newer Typer vendors as typer._click (click itself may not be
        # installed), so they are recognised by shape rather than by class.
        exit_code, show = getattr(exc, "exit_code", None), getattr(exc, "show", None)
        if isinstance(exit_code, int) and callable(show):
            show()
            sys.exit(exit_code)
        raise
    sys.exit(result if type(result) is int else 0)


if __name__ == "__main__":
    main()
