"""A flow's after-apply hooks in the config: exactly one of a command or a webhook, a sane timeout, and a
webhook URL (which may carry a token) never quoted by an error nor shown by ``config show``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drkit.config import masked_dump, parse_config
from drkit.config.hooks import DEFAULT_HOOK_TIMEOUT_SECONDS, HookConfig
from drkit.errors import ConfigError

TOKEN = "tok-5b4a3c2d"


def config(tmp_path: Path, hooks: dict[str, Any]) -> Any:
    data = {
        "clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [{"source": "A", "target": "B", "hooks": hooks}],
        "state": {"root": str(tmp_path / "state")},
    }
    return parse_config(data, str(tmp_path / "drkit.toml"))


def test_no_hook_by_default(tmp_path: Path) -> None:
    hooks = config(tmp_path, {}).flow("A->B").hooks
    assert hooks.after_failover is None and hooks.after_failback is None


def test_a_command_and_a_webhook(tmp_path: Path) -> None:
    hooks = (
        config(
            tmp_path,
            {
                "after_failover": {"command": ["/usr/local/bin/switch-dns", "orders", "B"]},
                "after_failback": {"webhook": f"https://cfg.example/kafka?token={TOKEN}", "timeout_seconds": 5},
            },
        )
        .flow("A->B")
        .hooks
    )
    assert hooks.after_failover == HookConfig(command=["/usr/local/bin/switch-dns", "orders", "B"])
    assert hooks.after_failover.timeout_seconds == DEFAULT_HOOK_TIMEOUT_SECONDS
    assert hooks.after_failback.webhook.endswith(TOKEN) and hooks.after_failback.timeout_seconds == 5


@pytest.mark.parametrize(
    ("hook", "key"),
    [
        ({}, "flows[0].hooks.after_failover"),
        ({"command": ["x"], "webhook": f"https://h/?t={TOKEN}"}, "flows[0].hooks.after_failover"),
        ({"command": []}, "flows[0].hooks.after_failover.command"),
        ({"command": [""]}, "flows[0].hooks.after_failover.command"),
        ({"command": "switch-dns B"}, "flows[0].hooks.after_failover.command"),
        ({"webhook": f"ftp://h/?t={TOKEN}"}, "flows[0].hooks.after_failover.webhook"),
        ({"webhook": f"https:///nohost?t={TOKEN}"}, "flows[0].hooks.after_failover.webhook"),
        ({"webhook": f"http://u:{TOKEN}@h:port{TOKEN}/"}, "flows[0].hooks.after_failover.webhook"),
        ({"command": ["x"], "timeout_seconds": 0}, "flows[0].hooks.after_failover.timeout_seconds"),
        ({"command": ["x"], "timeout_seconds": 601}, "flows[0].hooks.after_failover.timeout_seconds"),
        ({"command": ["x"], "shell": True}, "flows[0].hooks.after_failover.shell"),
    ],
)
def test_a_bad_hook_is_one_line_naming_its_key_without_the_url(tmp_path: Path, hook: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, {"after_failover": hook})
    message = str(caught.value)
    assert key in message and "\n" not in message
    assert TOKEN not in message


def test_config_show_masks_a_webhook_whole(tmp_path: Path) -> None:
    url = f"https://svc:{TOKEN}@cfg.example/kafka?token={TOKEN}"
    shown = masked_dump(config(tmp_path, {"after_failover": {"webhook": url}}))
    assert TOKEN not in str(shown)
    assert shown["flows"][0]["hooks"]["after_failover"]["webhook"] == "********"
