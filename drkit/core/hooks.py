"""After-apply hooks: whether one runs, what it is given, and what its outcome means.

Invariant: a hook runs only after an apply whose every planned offset read back (``applied``), never on a
dry run, a refusal, a declined or an unfinished apply; its outcome is recorded and reported, never hidden,
and never undoes the offsets (they were committed and read back before it started). A webhook's address is
shown only without its user information and query string (where tokens travel); what a hook printed or
answered is kept only as a bounded excerpt with the given secrets masked. Pure: drkit.operate.hooks runs
the command or calls the webhook and hands the facts here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from drkit.core.audit import OperationStatus

#: The exit code of a failover or failback whose offsets were applied and whose hook failed.
HOOK_FAILED_EXIT = 40
#: At most this many characters of a hook's output (or a webhook's answer) are kept in the audit trail.
EXCERPT_CHARS = 2000
#: Shorter secrets are not masked inside an excerpt: as substrings they would mask unrelated text (a query value
#: ``1``), and a secret this short protects nothing (drkit.config.secrets draws the same line).
MIN_SECRET_CHARS = 4
#: What stands for a removed secret: a URL's user information, its query string, a secret in an excerpt.
REDACTED = "***"


class HookKind(StrEnum):
    COMMAND = "command"  # an argv list, run without a shell; the operation as JSON on stdin
    WEBHOOK = "webhook"  # an HTTP(S) POST of the operation as JSON


class HookVerdict(StrEnum):
    SUCCEEDED = "succeeded"  # exit code 0, or an HTTP status below 400
    FAILED = "failed"  # a non-zero exit code
    REJECTED = "rejected"  # an HTTP status of 400 or more
    TIMED_OUT = "timed_out"  # no end (or no answer) within the hook's timeout: the command was killed
    NOT_STARTED = "not_started"  # the command could not be started, or the webhook not reached

    @property
    def ok(self) -> bool:
        return self is HookVerdict.SUCCEEDED


def should_run(status: OperationStatus, dry_run: bool) -> bool:
    """Only an apply that read back every planned offset runs the hook: the clients are moved to where
    the groups are, never to a half-moved flow."""
    return status is OperationStatus.APPLIED and not dry_run


def command_verdict(returncode: int | None, timed_out: bool) -> HookVerdict:
    """``returncode`` None: the command never started (not found, not executable)."""
    if timed_out:
        return HookVerdict.TIMED_OUT
    if returncode is None:
        return HookVerdict.NOT_STARTED
    return HookVerdict.SUCCEEDED if returncode == 0 else HookVerdict.FAILED


def http_verdict(status: int | None, timed_out: bool) -> HookVerdict:
    """``status`` None: no HTTP answer (connection refused, name not resolved, TLS failed)."""
    if timed_out:
        return HookVerdict.TIMED_OUT
    if status is None:
        return HookVerdict.NOT_STARTED
    return HookVerdict.SUCCEEDED if status < 400 else HookVerdict.REJECTED


def redact_url(url: str) -> str:
    """``url`` without its user information and query string (each replaced by ``***``) nor fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # a port that is no number: shown as nothing rather than risk a secret in it
        port = None
    netloc = f"{REDACTED}@" if parts.username is not None or parts.password is not None else ""
    netloc += host + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, REDACTED if parts.query else "", ""))


def url_secrets(url: str) -> set[str]:
    """The parts of ``url`` that may be secret: its user name and password, its query and each query value."""
    parts = urlsplit(url)
    found = {parts.username or "", parts.password or "", parts.query, parts.fragment}
    for pair in parts.query.split("&"):
        found.add(pair.partition("=")[2])
    return {s for s in found if s}


def excerpt(text: str, secrets: Iterable[str], limit: int = EXCERPT_CHARS) -> str:
    """``text`` with every secret in it masked, then cut to ``limit`` characters (the end kept: an error is
    most often last). Masked before it is cut, so no cut leaves a recognisable piece of a secret."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, REDACTED)
    if len(text) <= limit:
        return text
    return "..." + text[len(text) - limit + 3 :]


@dataclass(frozen=True)
class HookOutcome:
    """What one hook did: recorded in the operation's audit trail and shown in one line."""

    kind: HookKind
    target: str  # the command's program, or the webhook's redacted address
    verdict: HookVerdict
    code: int | None  # the exit code, or the HTTP status
    duration_ms: int
    output: str  # bounded and masked: the command's stdout and stderr, or the webhook's answer
    error: str | None = None  # why it did not end well, masked

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def exit_code(self) -> int | None:
        """The CLI's exit code for this outcome: None when it succeeded."""
        return None if self.ok else HOOK_FAILED_EXIT

    def line(self) -> str:
        """One line: what ran, how it ended, how long it took."""
        what = f"{self.kind.value} {self.target}"
        code = (
            ""
            if self.code is None
            else (f" exit {self.code}" if self.kind is HookKind.COMMAND else f" HTTP {self.code}")
        )
        why = f": {self.error}" if self.error else ""
        undone = "" if self.ok else " (the offsets stay applied: move the clients by hand)"
        return f"after-apply hook {what}: {self.verdict.value}{code} in {self.duration_ms} ms{why}{undone}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "target": self.target,
            "verdict": self.verdict.value,
            "code": self.code,
            "duration_ms": self.duration_ms,
            "output": self.output,
            "error": self.error,
        }


def hook_payload(
    operation_id: str,
    action: str,
    flow: str,
    source: str,
    destination: str,
    committed: Mapping[str, Mapping[str, int]],
) -> dict[str, Any]:
    """The JSON a hook is given (a command on stdin, a webhook as the body): the applied operation."""
    return {
        "operation_id": operation_id,
        "action": action,
        "flow": flow,
        "from_cluster": source,
        "to_cluster": destination,
        "groups": sorted(committed),
        "committed": {g: dict(sorted(parts.items())) for g, parts in sorted(committed.items())},
    }


def hook_environment(payload: Mapping[str, Any]) -> dict[str, str]:
    """The variables a command hook gets beside the JSON on stdin (the groups comma-separated)."""
    return {
        "DRKIT_OPERATION_ID": str(payload["operation_id"]),
        "DRKIT_ACTION": str(payload["action"]),
        "DRKIT_FLOW": str(payload["flow"]),
        "DRKIT_FROM_CLUSTER": str(payload["from_cluster"]),
        "DRKIT_TO_CLUSTER": str(payload["to_cluster"]),
        "DRKIT_GROUPS": ",".join(payload["groups"]),
    }
