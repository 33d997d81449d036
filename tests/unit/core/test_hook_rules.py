"""The after-apply hook's rules: it runs only after an applied operation; its outcome maps to a verdict and
to exit 40 when it failed; a webhook's token never shows (user information, query string); excerpts are
bounded and masked."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.core.audit import Action, OperationRecord, OperationStatus, fold
from drkit.core.hooks import (
    EXCERPT_CHARS,
    HOOK_FAILED_EXIT,
    HookKind,
    HookOutcome,
    HookVerdict,
    command_verdict,
    excerpt,
    hook_environment,
    hook_payload,
    http_verdict,
    redact_url,
    should_run,
    url_secrets,
)


@pytest.mark.parametrize("status", list(OperationStatus))
@pytest.mark.parametrize("dry_run", [False, True])
def test_only_an_applied_apply_runs_the_hook(status: OperationStatus, dry_run: bool) -> None:
    assert should_run(status, dry_run) == (status is OperationStatus.APPLIED and not dry_run)


@pytest.mark.parametrize(
    ("returncode", "timed_out", "verdict"),
    [
        (0, False, HookVerdict.SUCCEEDED),
        (3, False, HookVerdict.FAILED),
        (-9, False, HookVerdict.FAILED),
        (None, False, HookVerdict.NOT_STARTED),
        (None, True, HookVerdict.TIMED_OUT),
        (0, True, HookVerdict.TIMED_OUT),
    ],
)
def test_a_command_s_end_decides_its_verdict(returncode: int | None, timed_out: bool, verdict: HookVerdict) -> None:
    assert command_verdict(returncode, timed_out) is verdict


@pytest.mark.parametrize(
    ("status", "timed_out", "verdict"),
    [
        (200, False, HookVerdict.SUCCEEDED),
        (204, False, HookVerdict.SUCCEEDED),
        (302, False, HookVerdict.SUCCEEDED),
        (400, False, HookVerdict.REJECTED),
        (503, False, HookVerdict.REJECTED),
        (None, False, HookVerdict.NOT_STARTED),
        (None, True, HookVerdict.TIMED_OUT),
    ],
)
def test_an_http_answer_decides_the_verdict(status: int | None, timed_out: bool, verdict: HookVerdict) -> None:
    assert http_verdict(status, timed_out) is verdict


@pytest.mark.parametrize("verdict", list(HookVerdict))
def test_every_failed_verdict_exits_40_and_says_the_offsets_stay(verdict: HookVerdict) -> None:
    outcome = HookOutcome(HookKind.COMMAND, "/bin/x", verdict, 3, 12, "")
    assert outcome.exit_code == (None if verdict is HookVerdict.SUCCEEDED else HOOK_FAILED_EXIT)
    assert ("the offsets stay applied" in outcome.line()) == (verdict is not HookVerdict.SUCCEEDED)
    assert "\n" not in outcome.line()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.example/switch?token=s3cr3t", "https://hooks.example/switch?***"),
        ("https://user:pa55@hooks.example:8443/a/b", "https://***@hooks.example:8443/a/b"),
        ("http://tok@127.0.0.1:9/x?a=1&b=2#frag", "http://***@127.0.0.1:9/x?***"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
        ("http://dns.internal/switch", "http://dns.internal/switch"),
    ],
)
def test_a_webhook_is_shown_without_user_information_or_query(url: str, shown: str) -> None:
    assert redact_url(url) == shown


#: Secret parts that cannot occur in the fixed text around them ("Zq" is in none of it).
_TOKEN = st.text(st.sampled_from("0123456789abcdefXYZ"), min_size=2, max_size=30).map(lambda t: "Zq" + t)


@given(user=_TOKEN, password=_TOKEN, token=_TOKEN)
def test_no_secret_part_of_a_url_survives_redaction_or_an_excerpt(user: str, password: str, token: str) -> None:
    url = f"https://{user}:{password}@hooks.example/path?key={token}"
    text = excerpt(f"bad answer from {url}: key={token}, as {user}:{password}", url_secrets(url))
    for shown in (redact_url(url), text):
        assert "Zq" not in shown


def test_the_query_its_values_and_the_user_information_are_secrets() -> None:
    assert url_secrets("https://u:p4ss@h/x?token=abc&z=9") == {"u", "p4ss", "token=abc&z=9", "abc", "9"}
    assert url_secrets("https://h/x") == set()


def test_an_excerpt_is_masked_then_bounded_keeping_the_end() -> None:
    text = "x" * (3 * EXCERPT_CHARS) + "s3cr3t the last line"
    out = excerpt(text, {"s3cr3t"})
    assert len(out) == EXCERPT_CHARS and out.endswith("*** the last line") and out.startswith("...")
    assert excerpt("short s3cr3t", {"s3cr3t", ""}) == "short ***"
    assert excerpt("took 1 s, 9 retries", {"1", "9", "abc"}) == "took 1 s, 9 retries"  # too short to mask


def test_the_payload_and_environment_name_the_operation() -> None:
    payload = hook_payload("op1", "failover", "A->B", "A", "B", {"g2": {"A.t/1": 5, "A.t/0": 4}, "g1": {}})
    assert payload == {
        "operation_id": "op1",
        "action": "failover",
        "flow": "A->B",
        "from_cluster": "A",
        "to_cluster": "B",
        "groups": ["g1", "g2"],
        "committed": {"g1": {}, "g2": {"A.t/0": 4, "A.t/1": 5}},
    }
    assert hook_environment(payload) == {
        "DRKIT_OPERATION_ID": "op1",
        "DRKIT_ACTION": "failover",
        "DRKIT_FLOW": "A->B",
        "DRKIT_FROM_CLUSTER": "A",
        "DRKIT_TO_CLUSTER": "B",
        "DRKIT_GROUPS": "g1,g2",
    }


def _row(status: str, hook: bool = False) -> OperationRecord:
    from datetime import UTC, datetime

    result: dict[str, object] = {"status": status} | ({"hook": {"verdict": "failed"}} if hook else {})
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return OperationRecord("op", Action.FAILOVER, "A->B", ("g",), None, False, {}, result, "u", "h", "v", at, at)


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (0, 2, 1), (2, 0, 1), (1, 2, 0)])
def test_fold_keeps_the_hook_row_of_an_operation_whatever_the_order_of_its_rows(order: tuple[int, ...]) -> None:
    rows = [_row("applying"), _row("applied"), _row("applied", hook=True)]
    [folded] = fold([rows[i] for i in order])
    assert folded.stage == 2 and folded.result["hook"] == {"verdict": "failed"}
    [without] = fold([r for i in order for r in [rows[i]] if i != 2])
    assert without.status == "applied" and without.stage == 1
