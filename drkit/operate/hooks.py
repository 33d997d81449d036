"""Running a flow's after-apply hook: the command (no shell) or the webhook POST, bounded by its timeout.

Invariant: :func:`run_hook` never raises and never undoes anything: whatever the hook does, it returns
the outcome (drkit.core.hooks) for the audit trail. A webhook's user information is sent as a Basic
Authorization header, never left in the URL a library could quote; every text kept of the hook (its output,
an error) is masked of the URL's secret parts and the config's secrets before it leaves this module.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from drkit.config import DrkitConfig, FlowConfig, secret_values
from drkit.config.hooks import HookConfig
from drkit.core.audit import Action
from drkit.core.hooks import (
    EXCERPT_CHARS,
    HookKind,
    HookOutcome,
    HookVerdict,
    command_verdict,
    excerpt,
    hook_environment,
    hook_payload,
    http_verdict,
    redact_url,
    url_secrets,
)
from drkit.core.outcome import OperationResult

log = logging.getLogger(__name__)

#: Run after an applied operation; its outcome is written to the operation's audit trail.
AfterApply = Callable[[OperationResult], HookOutcome]
#: Of a webhook's answer, at most this much is read (its excerpt is shorter still).
_READ_BYTES = 4 * EXCERPT_CHARS


def after_apply(config: DrkitConfig, flow: FlowConfig, action: Action) -> AfterApply | None:
    """The flow's hook for ``action`` as a callable for drkit.operate.apply, or None when none is configured."""
    hook = flow.hooks.after_failover if action is Action.FAILOVER else flow.hooks.after_failback
    if hook is None:
        return None
    left = flow.source if action is Action.FAILOVER else flow.target  # the cluster the groups left

    def run(result: OperationResult) -> HookOutcome:
        plan = result.plan
        payload = hook_payload(result.operation_id, plan.action, plan.flow, left, plan.destination, result.verified)
        # The config's secrets (cluster passwords) never reach the audit trail, even if the hook prints them.
        return run_hook(hook, payload, secret_values(config.model_dump(mode="json")))

    return run


def run_hook(hook: HookConfig, payload: Mapping[str, Any], secrets: Iterable[str] = ()) -> HookOutcome:
    """Run ``hook`` with ``payload``; its outcome, whatever happened."""
    if hook.command is not None:
        return _run_command(hook.command, hook.timeout_seconds, payload, set(secrets))
    assert hook.webhook is not None
    return _post(hook.webhook, hook.timeout_seconds, payload, set(secrets) | url_secrets(hook.webhook))


def _run_command(argv: list[str], timeout: float, payload: Mapping[str, Any], secrets: set[str]) -> HookOutcome:
    start = time.monotonic()
    try:
        # Its own process group: on a timeout (or drkit interrupted) the whole group is killed, so no child
        # it started keeps the output pipe open or runs on unseen.
        proc = subprocess.Popen(  # the operator's own argv list, never a shell
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=os.environ | hook_environment(payload),
            start_new_session=True,
        )
    except OSError as exc:  # not found, not executable
        error = f"could not be started: {exc.strerror or type(exc).__name__}"
        return _outcome(HookKind.COMMAND, argv[0], command_verdict(None, False), None, start, "", error, secrets)
    try:
        out, _ = proc.communicate(json.dumps(payload).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, _ = proc.communicate()
        error = f"no end within {timeout:g} s: killed"
        return _outcome(HookKind.COMMAND, argv[0], command_verdict(None, True), None, start, _text(out), error, secrets)
    except BaseException:
        _kill_group(proc)
        raise
    verdict = command_verdict(proc.returncode, False)
    failed = None if verdict.ok else f"exited with {proc.returncode}"
    return _outcome(HookKind.COMMAND, argv[0], verdict, proc.returncode, start, _text(out), failed, secrets)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _post(url: str, timeout: float, payload: Mapping[str, Any], secrets: set[str]) -> HookOutcome:
    start = time.monotonic()
    shown = redact_url(url)
    parts = urlsplit(url)
    headers = {"Content-Type": "application/json", "User-Agent": "drkit"}
    if parts.username is not None:
        # In the URL, urllib would take the user information for part of the host and quote it in its errors.
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        secrets |= {pair, headers["Authorization"]}
    port = f":{parts.port}" if parts.port is not None else ""
    bare = urlunsplit((parts.scheme, f"{parts.hostname}{port}", parts.path or "/", parts.query, ""))
    request = urllib.request.Request(bare, json.dumps(payload).encode(), headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 - http(s) only (config)
            status, body = int(answer.status), answer.read(_READ_BYTES)
    except urllib.error.HTTPError as exc:  # an answer of 400 or more
        body = exc.read(_READ_BYTES) if exc.fp is not None else b""
        reason = f"answered {exc.code} {exc.reason}"
        return _outcome(
            HookKind.WEBHOOK, shown, http_verdict(exc.code, False), exc.code, start, _text(body), reason, secrets
        )
    except (urllib.error.URLError, OSError, ValueError) as exc:
        cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        timed_out = isinstance(cause, TimeoutError)
        error = f"no answer within {timeout:g} s" if timed_out else f"not reached: {cause}"
        return _outcome(HookKind.WEBHOOK, shown, http_verdict(None, timed_out), None, start, "", error, secrets)
    return _outcome(HookKind.WEBHOOK, shown, http_verdict(status, False), status, start, _text(body), None, secrets)


def _outcome(
    kind: HookKind,
    target: str,
    verdict: HookVerdict,
    code: int | None,
    start: float,
    output: str,
    error: str | None,
    secrets: set[str],
) -> HookOutcome:
    outcome = HookOutcome(
        kind,
        target,
        verdict,
        code,
        int((time.monotonic() - start) * 1000),
        excerpt(output, secrets),
        None if error is None else excerpt(error, secrets),
    )
    if not outcome.ok:
        log.warning("%s", outcome.line())
    return outcome


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")
