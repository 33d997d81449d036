"""The runbooks do not drift from the CLI and the drill.

Every ``drkit ...`` line in a fenced code block of ``runbooks/*.md`` is checked against the real
Typer application: the command path exists and every option it uses is an option of that command
(with the right number of values). Every drill spec a runbook names loads; the drill runbook runs
``drkit drill run`` and ``drkit drill history``; the failover runbook's apply step uses the flags
through which the drill makes the same facade call (``--flow``, ``--group``, ``--apply``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer.main

from drkit.cli.app import _register, app
from drkit.core.status import Verdict
from drkit.drill.runner import DrillRunner
from drkit.drill.spec import load_spec
from drkit.errors import ClusterError, RefusedError, StoreError

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "runbooks"
RUNBOOK_FILES = sorted(RUNBOOKS.glob("*.md"))

_FENCE = re.compile(r"^[ \t]*```([\w-]*)[ \t]*\n(.*?)^[ \t]*```", re.M | re.S)
_SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
#: Tokens after which a new command starts.
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "$("}
_PREFIXES = {"until", "while", "if", "then", "do", "else", "!", "time", "watch", "sudo", "exec", "env"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SPEC = re.compile(r"runbooks/drills/[\w.-]+\.toml")


@dataclass(frozen=True)
class Invocation:
    source: str  # file:line, for the failure message
    line: str
    args: tuple[str, ...]  # what follows `drkit`


def _is_drkit(token: str) -> bool:
    return token == "drkit" or token.endswith("/drkit")


def invocations(text: str, source: str) -> list[Invocation]:
    """Every ``drkit`` command in the shell blocks of a markdown text."""
    found = []
    for block in _FENCE.finditer(text):
        if block.group(1).lower() not in _SHELL_LANGUAGES:
            continue
        first_line = text.count("\n", 0, block.start(2)) + 1
        for offset, raw in enumerate(block.group(2).splitlines()):
            line = raw.strip().removeprefix("$ ")
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
            command_position = True
            for i, token in enumerate(tokens):
                if command_position and _is_drkit(token):
                    args = []
                    for arg in tokens[i + 1 :]:
                        if arg in _SEPARATORS or set(arg) <= set("();<>|&"):
                            break  # a separator or a redirection ends the command
                        args.append(arg)
                    found.append(Invocation(f"{source}:{first_line + offset}", line, tuple(args)))
                # A separator starts a command; a prefix (`until`, `X=1`) keeps the position for the next.
                starts = token in _SEPARATORS
                keeps = command_position and (token in _PREFIXES or _ASSIGNMENT.match(token) is not None)
                command_position = starts or keeps
    return found


def _root_command() -> Any:
    _register()
    return typer.main.get_command(app)


def problems(invocation: Invocation, root: Any) -> list[str]:
    """What in one invocation the CLI would reject: an unknown command, an unknown option, a missing
    option value. Empty: the line is valid for the real application."""
    out: list[str] = []
    command, path = root, ["drkit"]
    positionals = 0
    args = list(invocation.args)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--help":
            continue
        if arg.startswith("-") and arg != "-":
            name = arg.split("=", 1)[0] if arg.startswith("--") else arg
            options = {o: p for p in command.params if p.param_type_name == "option" for o in p.opts + p.secondary_opts}
            param = options.get(name)
            if param is None:
                out.append(f"{' '.join(path)}: no option {name}")
                continue
            takes_value = not (param.is_flag or param.count) and "=" not in arg
            if takes_value:
                if i + param.nargs > len(args):
                    out.append(f"{' '.join(path)}: {name} needs a value")
                i += param.nargs
            continue
        subcommands = getattr(command, "commands", None)
        if subcommands is not None:
            if arg not in subcommands:
                out.append(f"{' '.join(path)}: no command {arg!r} (has {', '.join(sorted(subcommands))})")
                return out
            command, path = subcommands[arg], [*path, arg]
            positionals = 0
            continue
        positionals += 1
        accepted = sum(max(p.nargs, 1) for p in command.params if p.param_type_name == "argument")
        if positionals > accepted:
            out.append(f"{' '.join(path)}: unexpected argument {arg!r}")
    if getattr(command, "commands", None) is not None and command is not root:
        out.append(f"{' '.join(path)}: a command group, not a command (has {', '.join(sorted(command.commands))})")
    return out


def _takes_config(root: Any, args: tuple[str, ...]) -> bool:
    """Whether the command ``args`` names has a --config option."""
    command = root
    for arg in args:
        subcommands = getattr(command, "commands", None)
        if subcommands is None or arg not in subcommands:
            break
        command = subcommands[arg]
    return any("--config" in p.opts for p in command.params if p.param_type_name == "option")


def _all_invocations() -> list[Invocation]:
    return [
        inv
        for path in RUNBOOK_FILES
        for inv in invocations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]


def test_the_runbooks_are_there() -> None:
    names = {p.name for p in RUNBOOK_FILES}
    assert {
        "failover.md",
        "failback.md",
        "switchover.md",
        "drill.md",
        "coverage.md",
        "status.md",
        "migrate-from-mm2.md",
    } <= names
    assert len(_all_invocations()) >= 30, "the parser found too few drkit commands: is it still reading the blocks?"


@pytest.mark.parametrize("path", RUNBOOK_FILES, ids=lambda p: p.name)
def test_every_drkit_command_in_a_runbook_exists_with_its_options(path: Path) -> None:
    root = _root_command()
    found = invocations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found, f"{path.name} names no drkit command in a code block"
    bad = [f"{inv.source}: `{inv.line}`: {p}" for inv in found for p in problems(inv, root)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", RUNBOOK_FILES, ids=lambda p: p.name)
def test_every_drkit_command_names_the_config(path: Path) -> None:
    """Without -c drkit reads ./drkit.toml: a runbook step must never depend on the directory (a command
    that reads no config, such as ``config import-mm2``, which makes one, has no -c to give)."""
    root = _root_command()
    missing = [
        f"{inv.source}: `{inv.line}`"
        for inv in invocations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
        if "--help" not in inv.args and not {"-c", "--config"} & set(inv.args) and _takes_config(root, inv.args)
    ]
    assert not missing, "\n".join(missing)


def test_every_drill_spec_a_runbook_names_loads() -> None:
    specs = {m.group(0) for path in RUNBOOK_FILES for m in _SPEC.finditer(path.read_text(encoding="utf-8"))}
    assert "runbooks/drills/source-loss.toml" in specs
    for spec in sorted(specs):
        loaded = load_spec(ROOT / spec)
        assert (ROOT / spec).is_file()
        assert loaded.drill.flow, spec


def test_the_drill_runbook_runs_the_drill_and_reads_its_history() -> None:
    commands = {" ".join(inv.args[:2]) for inv in invocations((RUNBOOKS / "drill.md").read_text(encoding="utf-8"), "")}
    assert "drill run" in commands
    assert "drill history" in commands
    runs = [
        inv
        for inv in invocations((RUNBOOKS / "drill.md").read_text(encoding="utf-8"), "drill.md")
        if inv.args[:2] == ("drill", "run")
    ]
    assert any("runbooks/drills/source-loss.toml" in inv.args for inv in runs)


@pytest.mark.parametrize("operation", ["failover", "failback"])
def test_the_runbook_applies_with_the_flags_of_the_drills_facade_call(operation: str) -> None:
    """The drill moves its group with ``Drkit.failover(flow, [group], apply=True)`` (and ``failback``): the
    runbook's step must be that call (``--flow``, ``--group``, ``--apply``), or the drill rehearses
    something else."""
    runner = (ROOT / "drkit" / "drill" / "runner.py").read_text(encoding="utf-8")
    assert f"self._move(self.service.{operation}," in runner
    calls: list[tuple[str, list[str], dict[str, object]]] = []

    def call(flow: str, groups: list[str], **kwargs: object) -> None:
        calls.append((flow, groups, kwargs))
        raise RefusedError("refused")

    workload = SimpleNamespace(group="g")
    drill = SimpleNamespace(flow=SimpleNamespace(name="A->B"), spec=SimpleNamespace(workload=workload))
    assert DrillRunner._move(drill, call, operation) == (None, "refused")  # type: ignore[arg-type]
    assert calls == [("A->B", ["g"], {"apply": True})]
    steps = [
        set(inv.args)
        for inv in invocations((RUNBOOKS / f"{operation}.md").read_text(encoding="utf-8"), f"{operation}.md")
        if inv.args[:1] == (operation,)
    ]
    assert any({"--flow", "--group", "--apply"} <= args for args in steps), steps


_FAKE = """\
# A runbook

```bash
{line}
```
"""


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("drkit failover -c \"$CONFIG\" --flow 'A->B' --group g --nope", "drkit failover: no option --nope"),
        ('.venv/bin/drkit status -c "$CONFIG" --allow-stale', "drkit status: no option --allow-stale"),
        ('drkit failovr -c "$CONFIG"', "drkit: no command 'failovr'"),
        ('drkit drill start x.toml -c "$CONFIG"', "drkit drill: no command 'start'"),
        ('drkit drill -c "$CONFIG"', "drkit drill: no option -c"),
        ('drkit drill run a.toml b.toml -c "$CONFIG"', "drkit drill run: unexpected argument 'b.toml'"),
        ('drkit offsets -c "$CONFIG" --group', "drkit offsets: --group needs a value"),
        ('until drkit status -c "$CONFIG" --lag; do sleep 5; done', "drkit status: no option --lag"),
        ('X=1 drkit checkpoint -c "$CONFIG" --forever >/dev/null', "drkit checkpoint: no option --forever"),
    ],
)
def test_the_checker_catches_a_made_up_command_or_flag(line: str, problem: str) -> None:
    found = invocations(_FAKE.format(line=line), "fake.md")
    assert len(found) == 1
    found_problems = problems(found[0], _root_command())
    assert any(problem in p for p in found_problems), found_problems


@pytest.mark.parametrize(
    "line",
    [
        "drkit failover -c \"$CONFIG\" --flow 'A->B' --group billing --apply --yes   # a comment --nope",
        'drkit status -c "$CONFIG" --flow=A-to-B -o json > status.json',
        'drkit drill run runbooks/drills/source-loss.toml -c "$CONFIG"',
        'drkit offsets --config "$CONFIG" -g billing --version 3',
        "drkit --help",
    ],
)
def test_the_checker_accepts_valid_lines(line: str) -> None:
    found = invocations(_FAKE.format(line=line), "fake.md")
    assert len(found) == 1
    assert problems(found[0], _root_command()) == []


def test_the_checker_ignores_prose_and_other_languages() -> None:
    text = (
        "Run `drkit failover --nope` now.\n\n```toml\ndrkit = '--nope'\n```\n\n"
        "```bash\nscripts/local-kafka up A B\n```\n"
    )
    assert invocations(text, "fake.md") == []


# -- exit codes ---------------------------------------------------------------------------------------

_STATUS_ROW = re.compile(r"^\| (\d+) \| `([^`]+)` \| ([^|]+) \|", re.M)
_HEADING_EXIT = re.compile(r"^## \d+\. (.+?) \(exit (\d+)\)", re.M)
_ALERT_RANGE = re.compile(r"alert on exit codes (\d+)-(\d+)")
_STATUS_LIST = re.compile(r"`drkit status`:\s*((?:\d+ [a-z ]+,?\s*)+)")
#: The error codes a `drkit status` run can end with besides its verdicts, and what each is.
_STATUS_ERRORS = {ClusterError.exit_code: "cluster", StoreError.exit_code: "[state]"}


def status_table(text: str) -> dict[int, tuple[str, str]]:
    """runbooks/status.md's table: exit code -> (last line, meaning)."""
    return {int(code): (last, meaning) for code, last, meaning in _STATUS_ROW.findall(text)}


def status_table_problems(text: str) -> list[str]:
    out = []
    rows = status_table(text)
    for verdict in Verdict:
        if rows.get(verdict.exit_code, ("",))[0] != verdict.value:
            out.append(f"exit {verdict.exit_code} is `{verdict.value}` in drkit, not {rows.get(verdict.exit_code)}")
    for code, (last, meaning) in rows.items():
        if last.startswith("error"):
            if code not in _STATUS_ERRORS or _STATUS_ERRORS[code] not in meaning:
                out.append(f"exit {code} ({meaning.strip()}) is not what drkit/errors.py gives that code")
        elif last not in {v.value for v in Verdict}:
            out.append(f"exit {code}: `{last}` is no verdict")
    out += [f"no row for exit {c} ({what})" for c, what in _STATUS_ERRORS.items() if c not in rows]
    for name, code in _HEADING_EXIT.findall(text):
        verdict = next((v for v in Verdict if v.value == name.lower().split(",")[0]), None)
        if verdict is None or verdict.exit_code != int(code):
            out.append(f"heading '{name} (exit {code})' does not match drkit's verdicts")
    return out


def alert_problems(text: str) -> list[str]:
    """An alert range and a list of status codes in a runbook cover every non-zero verdict, each right."""
    out = []
    codes = sorted(v.exit_code for v in Verdict if v.exit_code)
    for low, high in _ALERT_RANGE.findall(text):
        if (int(low), int(high)) != (codes[0], codes[-1]):
            out.append(f"alert on {low}-{high}, but status exits {codes[0]}-{codes[-1]}")
    for listing in _STATUS_LIST.findall(re.sub(r"\s+", " ", text)):  # a listing may wrap
        listed = {int(c): name.strip() for c, name in re.findall(r"(\d+) ([a-z ]+)", listing)}
        if listed != {v.exit_code: v.value for v in Verdict if v.exit_code}:
            out.append(f"`drkit status` codes listed as {listed}")
    return out


def test_the_status_runbook_lists_the_exit_codes_drkit_gives() -> None:
    assert status_table_problems((RUNBOOKS / "status.md").read_text()) == []


@pytest.mark.parametrize("runbook", RUNBOOK_FILES, ids=lambda p: p.name)
def test_alert_ranges_and_status_codes_in_runbooks_match_the_verdicts(runbook: Path) -> None:
    assert alert_problems(runbook.read_text()) == []


def test_the_failover_runbook_alerts_on_every_verdict() -> None:
    text = (RUNBOOKS / "failover.md").read_text()
    assert _ALERT_RANGE.search(text) and _STATUS_LIST.search(text)  # the checks above have something to check


@pytest.mark.parametrize(
    "old, new",
    [
        (
            "| 6 | `error: ...` | the Delta tables under the `[state]`",
            "| 4 | `error: ...` | the Delta tables under the `[state]`",
        ),
        ("| 24 | `topic refused` |", "| 24 | `target unreachable` |"),
        ("## 2. Stale (exit 21)", "## 2. Stale (exit 4)"),
    ],
)
def test_the_exit_code_check_catches_a_wrong_status_runbook(old: str, new: str) -> None:
    text = (RUNBOOKS / "status.md").read_text()
    assert old in text
    assert status_table_problems(text.replace(old, new)) != []


def test_the_exit_code_check_catches_a_short_alert_range() -> None:
    text = (RUNBOOKS / "failover.md").read_text()
    assert alert_problems(text.replace("exit codes 20-25", "exit codes 20-23")) != []
    assert alert_problems(text.replace(", 24 topic refused", "")) != []


def commands_without_config(command: Any, path: tuple[str, ...] = ()) -> set[str]:
    """The CLI's leaf commands that have no ``-c`` option."""
    subcommands = getattr(command, "commands", None)
    if subcommands:
        return {name for n, sub in subcommands.items() for name in commands_without_config(sub, (*path, n))}
    options = {o for p in command.params for o in getattr(p, "opts", [])}
    return set() if "-c" in options else {" ".join(path)}


def test_the_readme_names_every_command_without_dash_c() -> None:
    """README's "Every command but ... takes `-c FILE`" names exactly the commands that have no ``-c``."""
    text = (ROOT / "README.md").read_text().replace("\n", " ")
    m = re.search(r"Every command but (.*?) takes `-c FILE`", text)
    assert m, "README no longer says which commands take -c"
    named = set(re.findall(r"`([a-z][a-z0-9 -]*)`", m.group(1)))
    assert named == commands_without_config(typer.main.get_command(app))
