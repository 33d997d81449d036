"""``drkit``: the Typer application and its error handling.

Every user error is a :class:`drkit.errors.DrkitError`: the CLI prints one red line (or a JSON
object with ``--output json``) and exits with the error's code, then the log files under the state root
this command wrote to (``logs: PATH``: the Spark JVM's output, the libraries' lines). A traceback is shown
only with ``--debug``, and never with local variables (they may hold secrets). The terminal shows drkit's own
lines only, unless ``--verbose`` or ``DRKIT_LOG=debug`` (drkit.cli.logs).
"""

from __future__ import annotations

import importlib.abc
import signal
import sys
import threading
from typing import Any

import typer

from drkit._version import __version__
from drkit.cli import config_cmd
from drkit.cli.console import Output, error, json_stdout, note
from drkit.cli.exit import end_process
from drkit.cli.logs import LogSetup
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
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="Show every log line on the terminal: drkit's debug lines, the Kafka clients' and Spark's output "
        "(also DRKIT_LOG=debug). By default they go to log files under the state root.",
    ),
) -> None:
    # One Invocation per run: commands get their facade from it (drkit.cli.options.facade).
    invocation = ctx.ensure_object(Invocation)
    invocation.debug = debug
    if invocation.logs is None:
        invocation.logs = LogSetup(verbose)


def _register() -> None:
    # Commands that need Spark import it lazily inside their bodies, so `drkit --help` is fast. Once per
    # process: Typer appends every registration, and main() runs many times in one test process.
    if app.registered_commands:
        return
    from drkit.cli import commands

    commands.register(app)


def _output_of(argv: list[str]) -> Output:
    """The output an error must take, read before parsing (a parse error needs it too), as click reads it:
    ``--output json``, ``--output=json``, ``-o json`` and the short option's attached ``-ojson``."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg in ("--output", "-o") and i + 1 < len(argv):
            return Output.json if argv[i + 1] == "json" else Output.text
        if arg.startswith("--output="):
            return Output.json if arg.removeprefix("--output=") == "json" else Output.text
        if arg.startswith("-o") and not arg.startswith("--"):
            return Output.json if arg[2:].removeprefix("=") == "json" else Output.text
    return Output.text


#: The exit codes of a stop by signal, as a shell reports them (128 + the signal number).
INTERRUPTED = 128 + signal.SIGINT
TERMINATED = 128 + signal.SIGTERM


class Terminated(Exception):
    """SIGTERM arrived while a command ran (the mirror stops on it by itself: MirrorRunner)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _usage_line(exc: Exception) -> str:
    """A usage error (click's, by shape) as one line: the problem and where help is."""
    format_message = getattr(exc, "format_message", None)
    message = format_message() if callable(format_message) else str(exc)
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", None) or "drkit"
    return f"{' '.join(message.split())} (see {command} --help)"


#: The operator commands: answers during an incident, read through delta-rs and Kafka's admin API only.
OPERATOR_COMMANDS = frozenset({"status", "offsets", "failover", "failback", "history", "topics", "recover"})


#: Packages an operator command's process goes without (see ``_without_dataframes``).
_UNUSED_BY_OPERATORS = frozenset({"pandas", "numpy"})


def _without_dataframes(args: list[str]) -> None:
    """Keep pandas and numpy out of an operator command's process.

    Why: pyarrow imports numpy, and pyarrow.dataset (under every delta-rs read) imports pandas, whenever
    they are installed (pyspark brings them), for conversions these commands never make: together over
    half a second of each ``drkit status``. pyarrow and delta-rs work without both. Only for a whole
    process started from the command line: Spark's commands need them, and a caller's interpreter
    (tests, notebooks calling ``main``) keeps its own.
    """
    command = next((a for a in args if not a.startswith("-")), None)
    if command in OPERATOR_COMMANDS and not _UNUSED_BY_OPERATORS & sys.modules.keys():
        sys.meta_path.insert(0, _Without())


class _Without(importlib.abc.MetaPathFinder):
    """Importing pandas or numpy fails as if they were not installed (pyarrow then goes without them)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname.partition(".")[0] in _UNUSED_BY_OPERATORS:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


def main(argv: list[str] | None = None, facade_factory: FacadeFactory | None = None) -> None:
    """Run the CLI; ``facade_factory`` builds the facade from the config path (tests pass fakes)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None:
        _without_dataframes(args)
    output = _output_of(args)
    _register()
    invocation = Invocation(facade_factory)
    previous = signal.getsignal(signal.SIGTERM) if _main_thread() else None
    if previous is not None:
        signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C noted before it is raised: a library may turn the KeyboardInterrupt into an error of its own (py4j
    # while Spark starts: its JVM got the SIGINT too), and the run still ends as interrupted. Only where Python's
    # own handler is in place: an ignored SIGINT (a job started in the background) stays ignored.
    interrupt = signal.getsignal(signal.SIGINT) if _main_thread() else None
    if interrupt is signal.default_int_handler:
        signal.signal(signal.SIGINT, invocation.interrupt)
    try:
        with json_stdout(output is Output.json):
            code = _run(args, invocation, output)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if interrupt is signal.default_int_handler:
            signal.signal(signal.SIGINT, interrupt)
        if invocation.logs is not None:
            invocation.logs.close(keep_handlers=argv is None)  # a process of its own exits next
    if argv is None:
        end_process(code)  # never through the interpreter's teardown (drkit.cli.exit says why)
    sys.exit(code)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _run(args: list[str], invocation: Invocation, output: Output) -> int:
    """The command's exit code; every error becomes one line (and a JSON object with --output json)."""
    try:
        # With standalone_mode=False, `raise typer.Exit(code)` (and --help, --version) come back as
        # the return value instead of an exception.
        result = app(args=args, prog_name="drkit", standalone_mode=False, obj=invocation)
    except DrkitError as exc:
        if invocation.interrupted:
            return _interrupted(output)
        if invocation.debug:
            raise
        error(invocation.mask(str(exc)), output, exc.exit_code)
        if exc.names_logs:
            _name_logs(invocation)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        error("aborted: nothing was changed", output, 1)
        return 1
    except KeyboardInterrupt:
        return _interrupted(output)
    except Terminated:
        error("terminated (SIGTERM)", output, TERMINATED)
        return TERMINATED
    except Exception as exc:
        # Usage errors (no such command/option, bad value, no arguments: exit 2). They are click's
        # ClickException, which newer Typer vendors as typer._click (click itself may not be
        # installed), so they are recognised by shape rather than by class.
        exit_code, show = getattr(exc, "exit_code", None), getattr(exc, "show", None)
        if isinstance(exit_code, int) and callable(show):
            error(_usage_line(exc), output, exit_code)
            return exit_code
        if invocation.interrupted:  # what a library made of the Ctrl-C
            return _interrupted(output)
        if invocation.debug:
            raise
        # A bug or a fault drkit does not know yet: one line; --debug shows the traceback. Only the type and
        # the first line: a long Java or Rust message is a trace of its own.
        lines = invocation.mask(str(exc)).strip().splitlines()
        first = lines[0][:300] if lines else ""
        error(
            f"unexpected {type(exc).__name__}: {first} (run again with --debug for the traceback, and please "
            "report it)",
            output,
            1,
        )
        _name_logs(invocation)
        return 1
    if result == INTERRUPTED and not invocation.reported:  # Typer turns Ctrl-C into a silent exit 130
        error("interrupted (Ctrl-C)", output, INTERRUPTED)
    return result if type(result) is int else 0


def _interrupted(output: Output) -> int:
    error("interrupted (Ctrl-C)", output, INTERRUPTED)
    return INTERRUPTED


def _name_logs(invocation: Invocation) -> None:
    """After a failure's line: the log files this command wrote to (what the JVM and the libraries said)."""
    for path in invocation.logs.written() if invocation.logs is not None else []:
        note(f"logs: {path}")


if __name__ == "__main__":
    main()
