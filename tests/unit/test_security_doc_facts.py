"""docs/security.md states what the code does: the heartbeat topic's name, that heartbeats are on by
default, and which client properties drkit keeps from librdkafka (Java-only)."""

from __future__ import annotations

import re
from pathlib import Path

from drkit.config import JAVA_ONLY_PROPERTIES, HeartbeatSettings
from drkit.core.heartbeat import HEARTBEAT_TOPIC

SECURITY = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def java_only_listed(text: str) -> set[str]:
    """The properties of the sentence 'drkit passes Java-only properties (...)', ``x.*`` as the prefix ``x.``."""
    m = re.search(r"Java-only properties \(([^)]*)\)", text.replace("\n", " "))
    assert m, "docs/security.md no longer lists the Java-only properties"
    return {name.replace(".*", ".") for name in re.findall(r"`([^`]+)`", m.group(1))}


def heartbeat_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| heartbeats")]


def test_the_java_only_list_is_the_code_s() -> None:
    assert java_only_listed(SECURITY.read_text()) == set(JAVA_ONLY_PROPERTIES)


def test_heartbeat_rows_name_the_real_topic_and_say_they_are_on_by_default() -> None:
    rows = heartbeat_rows(SECURITY.read_text())
    assert len(rows) == 3  # the mirror writes the topic, copies it; status reads its copy
    assert all(f"`{HEARTBEAT_TOPIC}`" in row or f"{HEARTBEAT_TOPIC}>" in row for row in rows), rows
    assert HeartbeatSettings().interval_seconds > 0  # on by default ...
    assert "on by default" in rows[0]  # ... and the doc says so


def test_the_checks_catch_the_old_text() -> None:
    old = "drkit passes Java-only properties (`ssl.truststore.*`, `ssl.keystore.*`, `sasl.jaas.config`) to"
    assert java_only_listed(old) != set(JAVA_ONLY_PROPERTIES)
    old_row = (
        "| heartbeats (`[flows.heartbeats] interval_seconds > 0`) | mirror | source | TOPIC `heartbeats` (LITERAL) |"
    )
    assert f"`{HEARTBEAT_TOPIC}`" not in old_row and "on by default" not in old_row
